"""Blinding holds for automated judges: what a judge receives is what a radiologist's API client receives.

The fixture of tests/annotation/test_blinding.py (one pair, distinctive primary keys, another
reader's rating); a judge enrolled on it reads both Task 1 versions and the Task 2 example.
"""

import pytest

from annotation.models import Task
from judges.models import JudgeRead
from tests.annotation.test_blinding import (
    ALTERNATIVE_TEXT,
    ORIGINAL_TEXT,
    _assert_response_blind,
    _masked_headers,
    _masked_json,
    _other_rates,
    world,  # noqa: F401 - the fixture
)
from tests.judges.helpers import api_client, enrol, form_token, make_judge

pytestmark = pytest.mark.django_db


class _Read:
    """A JudgeRead masked like an assignment by the blinding helpers (they use .public_id)."""

    def __init__(self, read: JudgeRead) -> None:
        self.public_id = read.public_id


@pytest.fixture
def judge(world):  # noqa: F811
    judge = make_judge("judge-bot")
    enrol(world.study, judge)
    JudgeRead.objects.filter(judge=judge, example=world.alternative.example).update(queue_order=0)
    JudgeRead.objects.filter(judge=judge, example=world.original.example).update(queue_order=1)
    return judge


def _read(judge, example) -> JudgeRead:
    return JudgeRead.objects.get(judge=judge, example=example)


def test_a_judge_gets_the_same_payload_for_the_original_and_the_alternative(world, judge):  # noqa: F811
    _other_rates(world)
    client = api_client(judge)
    original, alternative = _read(judge, world.original.example), _read(judge, world.alternative.example)
    items = (_Read(original), _Read(alternative))

    first = client.get(f"/api/reading/{original.public_id}/")
    second = client.get(f"/api/reading/{alternative.public_id}/")

    assert first.json()["reports"][0]["findings"] == ORIGINAL_TEXT[0]
    assert second.json()["reports"][0]["findings"] == ALTERNATIVE_TEXT[0]
    assert _masked_json(first.json(), items) == _masked_json(second.json(), items)
    assert _masked_headers(first, items=items) == _masked_headers(second, items=items)
    for response in (first, second):
        _assert_response_blind(response, "a judge's item")


def test_a_judges_payload_is_a_radiologists_payload(world, judge):  # noqa: F811
    read = _read(judge, world.original.example)
    as_judge = api_client(judge).get(f"/api/reading/{read.public_id}/")
    as_reader = api_client(world.reader).get(f"/api/reading/{world.original.public_id}/")

    assert as_judge.status_code == as_reader.status_code == 200
    assert _masked_json(as_judge.json(), (_Read(read),)) == _masked_json(as_reader.json(), (world.original,))
    assert _masked_headers(as_judge, items=(_Read(read),)) == _masked_headers(as_reader, items=(world.original,))


def test_everything_a_judge_receives_is_blind(world, judge):  # noqa: F811
    _other_rates(world)
    client = api_client(judge)
    for task in Task.values:
        response = client.get(f"/api/reading/next/?task={task}")
        _assert_response_blind(response, f"a judge's next {task} item")
        item = response.json()
        rating = item["labels"][1]["value"]
        answer = client.post(
            f"/api/reading/{item['id']}/rating/",
            {"rating": rating, "rationale": "Because.", "form_token": item["form_token"]},
            content_type="application/json",
        )
        assert answer.status_code == 201
        _assert_response_blind(answer, f"a judge's {task} rating answer")
    _assert_response_blind(client.get("/api/reading/progress/"), "a judge's progress")
    for read in JudgeRead.objects.filter(judge=judge).rated():
        _assert_response_blind(client.get(f"/api/reading/{read.public_id}/"), "a judge's rated item")


def test_a_judges_task2_order_is_drawn_per_presentation_and_kept(world, judge):  # noqa: F811
    read = _read(judge, world.equivalence.example)
    client = api_client(judge)
    first = client.get(f"/api/reading/{read.public_id}/").json()
    again = client.get(f"/api/reading/{read.public_id}/").json()
    read.refresh_from_db()

    assert first["reports"] == again["reports"]
    shown_a = first["reports"][0]["findings"]
    assert read.report_a_type == ("original" if shown_a == ORIGINAL_TEXT[0] else "alternative")
    assert form_token()  # a fresh token per fetch, as for readers:
    assert first["form_token"] != again["form_token"]
