"""Which item GET /api/reading/next/ serves when the reader has work in several studies."""

import pytest

from annotation.models import Assignment, AssignmentStatus, ReportType, Task
from tests.factories import make_assignment, make_example, make_pair, make_study

pytestmark = pytest.mark.django_db


def _item(study, reader, queue_order: int, **fields) -> Assignment:
    example = make_example(make_pair(study), task=Task.REALISM, report_type=ReportType.ORIGINAL)
    return make_assignment(example, reader, queue_order=queue_order, **fields)


def _next_id(client, **params) -> str | None:
    response = client.get("/api/reading/next/", {"task": Task.REALISM, **params})
    return response.json()["id"] if response.status_code == 200 else None


def test_it_serves_the_earliest_study_with_open_work_first(client, reader):
    client.force_login(reader)
    earlier, later = make_study("earlier"), make_study("later")
    _item(later, reader, queue_order=0)
    _item(earlier, reader, queue_order=7)
    first = _item(earlier, reader, queue_order=5)

    assert _next_id(client) == str(first.public_id)


def test_it_moves_on_to_the_next_study_when_the_earlier_one_is_done(client, reader):
    client.force_login(reader)
    earlier, later = make_study("earlier"), make_study("later")
    _item(earlier, reader, queue_order=0, status=AssignmentStatus.DONE)
    waiting = _item(later, reader, queue_order=3)

    assert _next_id(client) == str(waiting.public_id)


def test_a_named_study_is_served_even_if_an_earlier_one_has_work(client, reader):
    client.force_login(reader)
    earlier, later = make_study("earlier"), make_study("later")
    _item(earlier, reader, queue_order=0)
    wanted = _item(later, reader, queue_order=9)

    assert _next_id(client, study="later") == str(wanted.public_id)
