"""Undo and settlement racing on PostgreSQL: exactly one outcome, every time.

A rating still in its undo window meets, at the same instant, its reader's Undo (pressed as the
window closes) and the worker settling it (or two workers, or the reader's own next submit from
another tab). Either it is taken back (no rating, its read open again, nothing routed) or it
settles (routed once, and the undo refused), never both and never neither. Threads with their own
connections, as in test_concurrency.py.
"""

import time
import uuid
from datetime import timedelta

import pytest
from django.db import connection
from django.utils import timezone

from annotation.models import Annotation, Assignment, AssignmentStatus, AuditAction, AuditEvent, RatingChoice, Task
from consensus.services import SubmitResult, UndoRefused, UndoResult, settle_due_ratings, submit_annotation
from consensus.services import undo_last_rating as undo
from tests.consensus.test_concurrency import _initial_pairs, racer  # noqa: F401 (the fixture)
from tests.factories import make_reading_study, rate

pytestmark = [pytest.mark.postgres, pytest.mark.django_db(transaction=True)]

ROUNDS = 60


def _closed(call, *, after: float = 0.0):
    """call on its own connection, closed after; `after` seconds of head start for the other side."""

    def run():
        try:
            time.sleep(after)
            return call()
        finally:
            connection.close()

    return run


def _labels(task: str) -> tuple[str, str]:
    return (
        (RatingChoice.REALISTIC, RatingChoice.MAJOR_ISSUES)
        if task == Task.REALISM
        else (RatingChoice.EQUIVALENT, RatingChoice.MAJOR_DISCREPANCY)
    )


def _rounds(pairs: int):
    """Examples whose first read has settled and whose second, disagreeing, is in its undo window."""
    study, _, _ = make_reading_study(pairs=pairs, keep_versions_apart=False)
    study.undo_window_seconds = 120
    study.save(update_fields=["undo_window_seconds"])
    return _initial_pairs(study)[:ROUNDS]


def _another_open_read(reader, rounds) -> Assignment | None:
    """An open read of the reader outside the rounds (rating it must not rate a later round's read)."""
    reserved = {assignment.pk for pair in rounds for assignment in pair}
    return (
        Assignment.objects.filter(reader=reader, status=AssignmentStatus.OPEN)
        .exclude(pk__in=reserved)
        .order_by("pk")
        .first()
    )


def _pending_second(first: Assignment, second: Assignment, deadline) -> Annotation:
    agree, disagree = _labels(first.example.task)
    rate(first, agree, "")
    settle_due_ratings(now=timezone.now() + timedelta(hours=2))
    annotation = rate(second, disagree).annotation
    Annotation.objects.filter(pk=annotation.pk).update(settle_by=deadline)
    return annotation


def _check_one_outcome(annotation: Annotation, second: Assignment, undo_outcomes: list) -> str:
    stored = Annotation.objects.filter(pk=annotation.pk).first()
    second.refresh_from_db()
    third_reads = Assignment.objects.active().filter(example_id=second.example_id, slot=3).count()
    undone_events = AuditEvent.objects.filter(example_id=second.example_id, action=AuditAction.UNDONE).count()
    if stored is None:
        # Taken back: its read is open again, nothing was routed, the audit trail says so once.
        assert second.status == AssignmentStatus.OPEN
        assert (third_reads, undone_events) == (0, 1)
        assert sum(isinstance(o, UndoResult) for o in undo_outcomes) == 1
        return "undone"
    # Settled: routed exactly once, and every undo was refused.
    assert stored.settled_at is not None and second.status == AssignmentStatus.DONE
    assert (third_reads, undone_events) == (1, 0)
    assert all(isinstance(o, UndoRefused) for o in undo_outcomes), undo_outcomes
    return "settled"


def test_undo_pressed_as_the_window_closes_and_the_worker_settling_end_in_one_outcome(racer):  # noqa: F811
    outcomes = []
    for round_number, (first, second) in enumerate(_rounds(pairs=20)):
        deadline = timezone.now() + timedelta(seconds=60)
        annotation = _pending_second(first, second, deadline)
        # The reader's clock says a millisecond is left, the worker's that the window has closed.
        # Every other round one side starts a few milliseconds later, so that each wins some rounds
        # whichever is faster on this machine.
        undo_after, settle_after = (0.005, 0.0) if round_number % 2 else (0.0, 0.005)
        results = racer.race(
            _closed(lambda r=second.reader, d=deadline: undo(r, now=d - timedelta(milliseconds=1)), after=undo_after),
            _closed(lambda d=deadline: settle_due_ratings(now=d), after=settle_after),
        )
        assert not [r for r in results if isinstance(r, Exception) and not isinstance(r, UndoRefused)], results
        outcomes.append(_check_one_outcome(annotation, second, [results[0]]))
    # Both outcomes happen: the race is real.
    assert set(outcomes) == {"undone", "settled"}, outcomes


def test_two_workers_and_the_readers_next_submit_settle_a_rating_once(racer):  # noqa: F811
    rounds = _rounds(pairs=20)
    for first, second in rounds:
        deadline = timezone.now() - timedelta(seconds=1)
        annotation = _pending_second(first, second, deadline)
        following = _another_open_read(second.reader, rounds)
        calls = [_closed(settle_due_ratings), _closed(settle_due_ratings)]
        if following is not None:
            rating = RatingChoice.REALISTIC if following.task == Task.REALISM else RatingChoice.EQUIVALENT
            calls.append(
                _closed(
                    lambda a=following, r=rating: submit_annotation(
                        reader=a.reader, assignment_id=a.public_id, rating=r, rationale="", form_token=uuid.uuid4()
                    )
                )
            )
        results = racer.race(*calls)
        assert not [r for r in results if isinstance(r, Exception)], results
        assert _check_one_outcome(annotation, second, []) == "settled"
        if following is not None:
            assert isinstance(results[2], SubmitResult) and results[2].created
        # The next round's readers start with nothing unsettled of their own.
        settle_due_ratings(now=timezone.now() + timedelta(hours=2))


def test_undo_from_one_tab_and_the_next_submit_from_another_end_in_one_outcome(racer):  # noqa: F811
    outcomes = []
    rounds = _rounds(pairs=20)
    for first, second in rounds:
        annotation = _pending_second(first, second, timezone.now() + timedelta(seconds=60))
        following = _another_open_read(second.reader, rounds)
        if following is None:
            continue
        rating = RatingChoice.REALISTIC if following.task == Task.REALISM else RatingChoice.EQUIVALENT
        results = racer.race(
            _closed(lambda r=second.reader: undo(r)),
            _closed(
                lambda a=following, r=rating: submit_annotation(
                    reader=a.reader, assignment_id=a.public_id, rating=r, rationale="", form_token=uuid.uuid4()
                )
            ),
        )
        assert isinstance(results[1], SubmitResult), results
        if isinstance(results[0], UndoResult) and results[0].assignment.pk == following.pk:
            continue  # the submit won and the undo took back that newer rating: its own single outcome
        outcomes.append(_check_one_outcome(annotation, second, [results[0]]))
        settle_due_ratings(now=timezone.now() + timedelta(hours=2))
    assert outcomes
