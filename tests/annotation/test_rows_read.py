"""A reader's request reads a bounded number of rows, whatever the length of their queue.

PostgreSQL counts, per transaction, the rows each table scan returned (pg_stat_xact_user_tables:
sequential scans' rows read plus the rows fetched through indexes, index-only scans that visit
the heap included). A test runs in one transaction, so the difference around a request is
what that request read.

Sequential scans are switched off while a request is measured (SET LOCAL enable_seqscan = off):
these tables hold a few hundred rows and no statistics yet, and on tables that small a planner
rightly prefers to read them whole. What the test asks is that every query has a plan whose rows
do not grow with the queues; with statistics, at a real study's size, the planner takes it.
"""

from collections import Counter

import pytest
from django.db import connection
from django.test import Client

from annotation.models import Assignment, AssignmentStatus, Example, RatingChoice, Task
from tests.factories import make_reading_study, make_token, rate

pytestmark = [pytest.mark.django_db, pytest.mark.postgres]
JSON = "application/json"


def _rows_read() -> Counter:
    with connection.cursor() as cursor:
        cursor.execute("SELECT relname, seq_tup_read + coalesce(idx_tup_fetch, 0) FROM pg_stat_xact_user_tables")
        return Counter(dict(cursor.fetchall()))


# The tables that grow with queues and studies' work. Others (users, roles, permissions, studies)
# grow with the people and studies in the database, never with a queue's length.
WORK_TABLES = (
    "annotation_assignment",
    "annotation_annotation",
    "annotation_example",
    "annotation_candidatepair",
    "annotation_readerqueue",
    "annotation_auditevent",
    "consensus_adjudication",
    "consensus_consensuslabel",
)


def _measure(call, *, tables=WORK_TABLES) -> tuple[object, int]:
    with connection.cursor() as cursor:
        cursor.execute("SET LOCAL enable_seqscan = off")
    before = _rows_read()
    result = call()
    after = _rows_read()
    after.subtract(before)
    return result, sum(after[table] for table in tables)


def _requests(pairs: int) -> dict[str, int]:
    """Rows read by each reader request, for a reader whose queues hold about pairs items (six
    readers: two beyond the four a pair's texts need, so that the third read finds a reader)."""
    _, readers, _ = make_reading_study(pairs=pairs, readers_beyond_initial=2, keep_versions_apart=False)
    # The reader with the most Task 1 items (how many each has depends on the study's seed).
    reader = max(readers, key=lambda r: Assignment.objects.filter(reader=r, task=Task.REALISM).count())
    # Half of each queue already rated: rated rows are what a count over the queue would walk.
    for task in Task.values:
        queue = Assignment.objects.filter(reader=reader, task=task).select_related("example__study")
        for assignment in queue.order_by("queue_order")[: queue.count() // 2]:
            rate(assignment, RatingChoice.REALISTIC if task == Task.REALISM else RatingChoice.EQUIVALENT, "")
    client = Client(HTTP_AUTHORIZATION=f"Token {make_token(reader)}")
    client.get("/api/reading/progress/")  # warm the token and role look-ups' caches
    rows = {}

    response, rows["next"] = _measure(lambda: client.get(f"/api/reading/next/?task={Task.REALISM}"))
    item = response.json()
    body = {"rating": RatingChoice.REALISTIC, "rationale": "", "form_token": item["form_token"]}
    response, rows["submit"] = _measure(
        lambda: client.post(f"/api/reading/{item['id']}/rating/", body, content_type=JSON)
    )
    assert response.status_code == 201

    # A second read that disagrees with the first: the submit routes a third read. The other read is
    # whoever holds it (the study's seed is random: which reader shares an open example varies).
    disputed = Example.objects.filter(
        task=Task.REALISM, assignments__reader=reader, assignments__status=AssignmentStatus.OPEN
    ).first()
    rate(disputed.assignments.exclude(reader=reader).get(), RatingChoice.MAJOR_ISSUES, "Odd.")
    mine = disputed.assignments.get(reader=reader)
    item = client.get(f"/api/reading/{mine.public_id}/").json()
    body = {"rating": RatingChoice.REALISTIC, "rationale": "", "form_token": item["form_token"]}
    response, rows["submit routing a third read"] = _measure(
        lambda: client.post(f"/api/reading/{mine.public_id}/rating/", body, content_type=JSON)
    )
    assert response.status_code == 201
    disputed.refresh_from_db()
    assert disputed.assignments.filter(slot=3).exists()

    session = Client()
    session.force_login(reader)
    session.get("/read/")
    following = Assignment.objects.filter(reader=reader, status=AssignmentStatus.OPEN).first()
    _, rows["page"] = _measure(lambda: session.get(f"/read/a/{following.public_id}/"))
    _, rows["progress"] = _measure(lambda: client.get("/api/reading/progress/"))
    return rows


def test_a_reader_request_reads_the_same_rows_at_any_queue_length():
    # Ten pairs, not fewer: the reader's queue must still hold an item after the measured submits, as
    # in the larger study, or the two would read different things.
    short, long = _requests(pairs=10), _requests(pairs=60)

    assert short == long, (short, long)
    # A submit locks its exam's examples (with their pairs), and routing asks who holds an item of
    # the exam: a few dozen rows, the same for any study.
    assert max(long.values()) <= 60, long
