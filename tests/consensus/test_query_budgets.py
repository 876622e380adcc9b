"""Submitting and routing use a number of queries that does not grow with the study."""

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from annotation.models import Assignment, Example, RatingChoice, Study, Task
from consensus.models import ConsensusLabel
from tests.factories import make_reading_study, rate

pytestmark = pytest.mark.django_db


def _queries(call) -> int:
    with CaptureQueriesContext(connection) as captured:
        call()
    return len(captured)


def _measure(pairs: int) -> dict[str, int]:
    # One reader beyond the six an exam's items take: the third read finds one outside the exam.
    study, _, _ = make_reading_study(pairs=pairs, readers_beyond_initial=1, adjudicators=2)
    examples = list(Example.objects.filter(study=study, task=Task.REALISM).order_by("pk")[:2])
    agreeing, splitting = (list(e.assignments.select_related("reader").order_by("slot")) for e in examples)
    counts = {
        "first read": _queries(lambda: rate(agreeing[0], RatingChoice.REALISTIC, "")),
        "second read, consensus": _queries(lambda: rate(agreeing[1], RatingChoice.REALISTIC, "")),
    }
    rate(splitting[0], RatingChoice.REALISTIC, "")
    counts["second read, third read routed"] = _queries(lambda: rate(splitting[1], RatingChoice.MINOR_ISSUES))
    third = examples[1].assignments.select_related("reader").get(slot=3)
    counts["third read, adjudication routed"] = _queries(lambda: rate(third, RatingChoice.MAJOR_ISSUES))
    return counts


def test_submitting_and_routing_do_not_grow_with_the_study():
    small, large = _measure(2), _measure(30)
    assert small == large
    assert max(large.values()) <= 25, large


def _agreeing(assignment) -> str:
    return RatingChoice.REALISTIC if assignment.example.task == Task.REALISM else RatingChoice.EQUIVALENT


def _measure_with_undo_window(pairs: int) -> dict[str, int]:
    """With an undo window (the default), each submit settles the reader's previous rating and routes it."""
    study, _, _ = make_reading_study(pairs=pairs, readers_beyond_initial=1, adjudicators=2)
    Study.objects.filter(pk=study.pk).update(undo_window_seconds=120)
    example = Example.objects.filter(study=study, task=Task.REALISM).order_by("pk").first()
    reads = list(example.assignments.select_related("reader").order_by("slot"))
    first, second = reads[0].reader, reads[1].reader
    # Each reader's next read of another example: its submit settles their rating of the first example.
    following = {
        reader: Assignment.objects.filter(reader=reader)
        .exclude(example=example)
        .select_related("reader", "example")
        .order_by("pk")
        .first()
        for reader in (first, second)
    }
    rate(reads[0], RatingChoice.REALISTIC, "")
    counts = {"rating, nothing to settle": _queries(lambda: rate(reads[1], RatingChoice.REALISTIC, ""))}
    rate(following[first], _agreeing(following[first]), "")  # settles the first read: one settled
    agreeing = _agreeing(following[second])
    counts["rating that settles the second read, consensus"] = _queries(lambda: rate(following[second], agreeing, ""))
    assert ConsensusLabel.objects.filter(example=example).exists()
    return counts


def test_a_submit_that_settles_the_previous_rating_does_not_grow_with_the_study():
    small, large = _measure_with_undo_window(6), _measure_with_undo_window(30)
    assert small == large
    # Within a savepoint: the lock of the exam(s), reading the reader's unsettled rating along; the
    # assignment with its rating, and the unsettled rating again, once locked; the rating's insert, the
    # assignment, the audit, the queue's counter. Settling adds its update and the route: the settled
    # ratings; for the consensus, one look (a consensus already? a read or an adjudication left open?),
    # its insert, audit and the example's state. This assignment was never shown, so its Report A is
    # drawn here (one update).
    assert large == {"rating, nothing to settle": 8, "rating that settles the second read, consensus": 15}


# --- Lists masked for a coordinator who also reads: one more query, not one per row --------------


def _conflicted_study(pairs: int):
    """A study whose examples are all unrouted, read by eight readers and `both` (coordinator and reader)."""
    from annotation.models import MemberRole, Role, StudyMember
    from consensus.assignment import assign_readers
    from tests.factories import make_user

    # Eight other readers, so that `both` reads some pairs but hardly ever all 12 (with four it often did).
    study, readers, _ = make_reading_study(pairs=pairs, readers=8, assign=False)
    both = make_user(Role.COORDINATOR, Role.READER)
    StudyMember.objects.create(study=study, user=both, role=MemberRole.READER)
    assign_readers(study, actor=both)
    Example.objects.filter(study=study).update(unrouted=True)
    return study, both, readers


def _masked_lists(client, pairs: int) -> tuple[dict[str, int], int]:
    from django.urls import reverse

    study, both, readers = _conflicted_study(pairs)
    client.force_login(both)
    paths = {
        "unrouted page": reverse("study_unrouted", args=[study.slug]),
        "unrouted API": f"/api/studies/{study.slug}/unrouted/",
        "own reader page": reverse("reader_detail", args=[study.slug, both.username]),
        "other reader page": reverse("reader_detail", args=[study.slug, readers[0].username]),
        "reader API": f"/api/studies/{study.slug}/readers/{readers[0].username}/",
        "pairs API": f"/api/studies/{study.slug}/pairs/",
        "readers page": reverse("study_readers", args=[study.slug]),
        "workload API": f"/api/studies/{study.slug}/workload/",
    }
    counts = {}
    for name, path in paths.items():
        client.get(path)
        counts[name] = _queries(lambda path=path: client.get(path))
    masked = sum(
        row == {"hidden": True, "detail": "hidden: you are reading this pair"}
        for row in client.get(paths["unrouted API"]).json()
    )
    return counts, masked


def test_masked_lists_do_not_grow_with_the_rows(client):
    (small, _), (large, masked) = _masked_lists(client, 2), _masked_lists(client, 12)

    assert small == large
    assert 0 < masked < 36  # some rows masked, some shown


# --- Locking an exam reads its rows through the pairs' exam index, whatever the study's size -----


def _plan_nodes(node: dict):
    yield node
    for child in node.get("Plans", []):
        yield from _plan_nodes(child)


@pytest.mark.skipif(connection.vendor != "postgresql", reason="reads PostgreSQL's query plan")
def test_locking_two_exams_reads_the_examples_through_the_pair_index():
    """A submit after an unsettled rating locks two exams in one statement. Written as an OR of two
    `pair_id IN (...)` tests, PostgreSQL filtered every example of every study (32 ms per submit at
    50,000 pairs); as one IN over their pairs, it looks each exam's examples up by pair."""
    from django.db import transaction

    from consensus.services import _lock_exams_of

    study, _, _ = make_reading_study(pairs=4, assign=False)
    first, second = Example.objects.filter(study=study).order_by("pk").values_list("pk", flat=True)[::5][:2]
    with transaction.atomic(), CaptureQueriesContext(connection) as captured:
        locked = _lock_exams_of([("%s", [first]), ("%s", [second])])
        statement = captured.captured_queries[-1]["sql"]
        with connection.cursor() as cursor:
            # Without sequential scans, as the planner chooses on a large table.
            cursor.execute("SET LOCAL enable_seqscan = off")
            cursor.execute("EXPLAIN (FORMAT JSON) " + statement)
            (plan,) = cursor.fetchone()[0]
    assert set(locked.pks) >= {first, second}
    example_scans = [
        node
        for node in _plan_nodes(plan["Plan"])
        if node.get("Relation Name") == Example._meta.db_table and node.get("Alias") == "e"
    ]
    assert example_scans, plan
    for scan in example_scans:
        conditions = [scan.get("Index Cond", "")] + [child.get("Index Cond", "") for child in scan.get("Plans", [])]
        assert any("pair_id" in condition for condition in conditions), scan
