"""Undo tells a reader nothing about other readers: the notice, the undo's answers and the work it
does (its queries, and so its timing) are the same whether a colleague rated the example or not."""

import re
import uuid
from datetime import timedelta

import pytest
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext
from django.urls import reverse
from django.utils import timezone

from annotation.models import Assignment, RatingChoice, Task
from consensus.services import settle_due_ratings, show_assignment, submit_annotation, undo_last_rating
from tests.factories import make_reading_study, make_token

pytestmark = pytest.mark.django_db

UUID = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}|[0-9a-f]{32}")


def _world(*, colleague_rated: bool):
    """A reader about to rate the Task 2 example; in one world the other initial reader has rated it
    (disagreeing, settled: the reader's rating would route a third read), in the other nobody has."""
    study, _, _ = make_reading_study(pairs=1, readers=4, keep_versions_apart=False)
    study.undo_window_seconds = 120
    study.save(update_fields=["undo_window_seconds"])
    mine, theirs = (
        Assignment.objects.filter(study=study, task=Task.EQUIVALENCE).select_related("reader").order_by("slot")
    )
    if colleague_rated:
        show_assignment(theirs)
        submit_annotation(
            reader=theirs.reader,
            assignment_id=theirs.public_id,
            rating=RatingChoice.MAJOR_DISCREPANCY,
            rationale="Different.",
            form_token=uuid.uuid4(),
        )
        settle_due_ratings(now=timezone.now() + timedelta(minutes=5))
    return mine


def _normalized(text: str) -> str:
    text = UUID.sub("<id>", text)
    text = re.sub(r'name="csrfmiddlewaretoken" value="[^"]+"', "<csrf>", text)
    text = re.sub(r'data-undo-seconds="\d+"', "<seconds>", text)
    text = re.sub(r"user\d+", "<user>", text)
    return text


def _through_the_page(mine: Assignment) -> tuple[str, str]:
    client = Client()
    client.force_login(mine.reader)
    url = reverse("reading_page", args=[mine.public_id])
    client.get(url)
    data = {"rating": RatingChoice.MINOR_DISCREPANCY, "rationale": "A slip.", "form_token": uuid.uuid4()}
    home = client.post(url, data, HTTP_HX_REQUEST="true").content.decode()
    start = home.index('id="saved-notice"')
    notice = home[start : home.index("</div>", start)]
    undone = client.post(reverse("reading_undo"), HTTP_HX_REQUEST="true")
    panel = undone.content.decode()
    form = panel[panel.index("<form") : panel.index("</form>")]
    return _normalized(notice), _normalized(form)


def test_the_notice_and_the_undo_answer_do_not_depend_on_a_colleagues_rating():
    alone = _through_the_page(_world(colleague_rated=False))
    with_colleague = _through_the_page(_world(colleague_rated=True))

    assert alone == with_colleague
    assert "Saved: Item 1, Minor Discrepancy." in alone[0]


def test_the_api_answers_the_same_whether_a_colleague_rated_or_not():
    answers = []
    for colleague_rated in (False, True):
        mine = _world(colleague_rated=colleague_rated)
        api = Client(HTTP_AUTHORIZATION=f"Token {make_token(mine.reader)}")
        item = api.get(f"/api/reading/{mine.public_id}/").json()
        body = {"rating": RatingChoice.MINOR_DISCREPANCY, "rationale": "A slip.", "form_token": item["form_token"]}
        rated = api.post(f"/api/reading/{mine.public_id}/rating/", body, content_type="application/json").json()
        undone = api.post("/api/reading/undo/").json()
        refused = api.post("/api/reading/undo/")
        rated.pop("next"), undone.pop("id")
        rated["undo_seconds"] = rated["undo_seconds"] > 0
        answers.append((rated, undone, refused.status_code, refused.json()))

    assert answers[0] == answers[1]


def _undo_queries(mine: Assignment) -> list[str]:
    show_assignment(mine)
    submit_annotation(
        reader=mine.reader,
        assignment_id=mine.public_id,
        rating=RatingChoice.MINOR_DISCREPANCY,
        rationale="A slip.",
        form_token=uuid.uuid4(),
    )
    with CaptureQueriesContext(connection) as captured:
        undo_last_rating(mine.reader)
    # The statements, with the values (ids, times, tokens, savepoint names) taken out.
    return [re.sub(r'"s\d+_x\d+"|\'[^\']*\'|\b\d+(\.\d+)?\b', "?", query["sql"]) for query in captured]


def test_undo_does_the_same_work_whatever_colleagues_did_and_never_locks_the_example():
    alone = _undo_queries(_world(colleague_rated=False))
    with_colleague = _undo_queries(_world(colleague_rated=True))

    assert alone == with_colleague
    # It locks its own rating only, never the example (whoever holds that, another reader submitting or
    # routing, is never waited for). SQLite has no row locks: this part bites on PostgreSQL.
    locks = [sql.split(" FOR ")[-1] for sql in alone if " FOR UPDATE" in sql or " FOR NO KEY UPDATE" in sql]
    assert all(lock.endswith('OF "annotation_annotation"') for lock in locks), locks
