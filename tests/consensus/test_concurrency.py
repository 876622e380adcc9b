"""Exactly-once routing under real concurrency: threads with their own PostgreSQL connections.

SQLite serializes every writing transaction, so these run on PostgreSQL only, and only there does
removing the example's row lock (consensus.services.lock_example) make them fail: that is right,
and it is why CI runs the whole suite on PostgreSQL as well as on SQLite (.ci/run).
"""

import threading
import uuid
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor

import pytest
from django.db import connection, connections

from annotation.models import Annotation, Assignment, Example, RatingChoice, Task
from consensus.models import Adjudication
from consensus.services import AlreadySubmitted, SubmitResult, submit_annotation
from tests.factories import make_reading_study, rate
from tests.invariants import exams_given_twice

pytestmark = [pytest.mark.postgres, pytest.mark.django_db(transaction=True)]

ROUNDS = 200


class Racer:
    """Runs callables on N threads at the same instant, each thread with its own connection."""

    def __init__(self, threads: int) -> None:
        self.threads = threads
        self.pool = ThreadPoolExecutor(max_workers=threads)

    def race(self, *calls: Callable[[], object]) -> list[object]:
        barrier = threading.Barrier(len(calls))

        def run(call: Callable[[], object]) -> object:
            barrier.wait()
            try:
                return call()
            except Exception as error:  # returned, not raised: the test looks at every outcome
                return error

        return [future.result() for future in [self.pool.submit(run, call) for call in calls]]

    def close(self) -> None:
        self.pool.submit(connections.close_all).result()
        for _ in range(self.threads):
            self.pool.submit(connections.close_all)
        self.pool.shutdown(wait=True)


@pytest.fixture
def racer():
    racer = Racer(threads=5)
    yield racer
    racer.close()


def _submit(assignment: Assignment, rating: str, token: uuid.UUID | None = None) -> Callable[[], object]:
    def call() -> SubmitResult:
        try:
            return submit_annotation(
                reader=assignment.reader,
                assignment_id=assignment.public_id,
                rating=rating,
                rationale="" if rating in (RatingChoice.REALISTIC, RatingChoice.EQUIVALENT) else "A reason.",
                form_token=token or uuid.uuid4(),
            )
        finally:
            connection.close()

    return call


def _initial_pairs(study) -> list[tuple[Assignment, Assignment]]:
    examples = Example.objects.filter(study=study).order_by("pk")
    result = []
    for example in examples:
        first, second = example.assignments.select_related("reader").order_by("slot")
        result.append((first, second))
    return result


def test_simultaneous_disagreeing_second_reads_route_exactly_one_third_read(racer):
    # 67 pairs -> 201 examples; 200 rounds, one example each.
    study, _, _ = make_reading_study(pairs=67)
    rounds = _initial_pairs(study)[:ROUNDS]
    assert len(rounds) == ROUNDS
    for first, second in rounds:
        task = first.example.task
        low, high = (
            (RatingChoice.REALISTIC, RatingChoice.MAJOR_ISSUES)
            if task == Task.REALISM
            else (RatingChoice.EQUIVALENT, RatingChoice.MAJOR_DISCREPANCY)
        )
        outcomes = racer.race(_submit(first, low), _submit(second, high))
        assert all(isinstance(o, SubmitResult) and o.created for o in outcomes), outcomes
        third_reads = Assignment.objects.active().filter(example_id=first.example_id, slot=3)
        assert third_reads.count() == 1
        assert third_reads.get().reader_id not in {first.reader_id, second.reader_id}
    assert Annotation.objects.filter(example__study=study).count() == 2 * ROUNDS


def test_simultaneous_third_reads_that_split_three_ways_route_exactly_one_adjudication(racer):
    study, _, _ = make_reading_study(pairs=67, adjudicators=3)
    rounds = _initial_pairs(study)[:ROUNDS]
    for first, second in rounds:
        realism = first.example.task == Task.REALISM
        labels = (
            (RatingChoice.REALISTIC, RatingChoice.MINOR_ISSUES, RatingChoice.MAJOR_ISSUES)
            if realism
            else (RatingChoice.EQUIVALENT, RatingChoice.MINOR_DISCREPANCY, RatingChoice.MAJOR_DISCREPANCY)
        )
        rate(first, labels[0], "" if labels[0] in (RatingChoice.REALISTIC, RatingChoice.EQUIVALENT) else "r")
        rate(second, labels[1])
        third = Assignment.objects.select_related("reader").get(example_id=first.example_id, slot=3)
        # The third reader submits from two tabs at once (two form tokens), splitting three ways.
        outcomes = racer.race(_submit(third, labels[2]), _submit(third, labels[2]))
        stored = [o for o in outcomes if isinstance(o, SubmitResult)]
        refused = [o for o in outcomes if isinstance(o, AlreadySubmitted)]
        assert len(stored) == 1 and len(refused) == 1, outcomes
        assert Adjudication.objects.active().filter(example_id=first.example_id).count() == 1
    assert Adjudication.objects.filter(example__study=study).count() == ROUNDS
    assert Annotation.objects.filter(example__study=study).count() == 3 * ROUNDS


def test_one_token_from_five_threads_stores_one_annotation(racer):
    study, _, _ = make_reading_study(pairs=1, readers=4)
    first, _second = _initial_pairs(study)[0]
    token = uuid.uuid4()
    outcomes = racer.race(*[_submit(first, RatingChoice.MINOR_ISSUES, token) for _ in range(5)])
    assert all(isinstance(o, SubmitResult) for o in outcomes), outcomes
    assert sum(o.created for o in outcomes) == 1
    assert len({o.annotation.pk for o in outcomes}) == 1
    assert Annotation.objects.filter(example_id=first.example_id).count() == 1


def test_readers_of_different_examples_do_not_wait_for_each_other(racer):
    # Five readers submit on five different examples at once: all succeed.
    study, _, _ = make_reading_study(pairs=5, readers=6)
    firsts = [first for first, _ in _initial_pairs(study)[:5]]
    outcomes = racer.race(
        *[
            _submit(a, RatingChoice.REALISTIC if a.example.task == Task.REALISM else RatingChoice.EQUIVALENT)
            for a in firsts
        ]
    )
    assert all(isinstance(o, SubmitResult) and o.created for o in outcomes), outcomes


def test_simultaneous_third_reads_of_one_exam_never_go_to_one_reader(racer):
    # An exam in two pairs: its six items take twelve readers, and one reader is left over. Two of
    # its items get their disagreeing second read at the same instant: both third reads want that
    # reader, and the exam's items are kept apart, so exactly one gets them and the other waits.
    for _ in range(10):
        study, _, _ = make_reading_study(pairs=2, pairs_per_exam=2, readers_beyond_initial=1, adjudicators=0)
        one, other = Example.objects.filter(study=study, task=Task.REALISM).order_by("pk")[:2]
        seconds = []
        for example in (one, other):
            first, second = example.assignments.select_related("reader").order_by("slot")
            rate(first, RatingChoice.REALISTIC, "")
            seconds.append(second)

        outcomes = racer.race(*(_submit(second, RatingChoice.MAJOR_ISSUES) for second in seconds))

        assert all(isinstance(o, SubmitResult) and o.created for o in outcomes), outcomes
        third_reads = Assignment.objects.filter(example__in=[one, other], slot=3)
        assert third_reads.count() == 1
        assert Example.objects.filter(pk__in=[one.pk, other.pk], unrouted=True).count() == 1
        assert exams_given_twice(study) == {}


def test_assigning_task_2_while_a_task_1_third_read_is_routed_never_gives_one_reader_two_items_of_an_exam(racer):
    # One exam, Task 1 read by four readers; two readers are left for everything else. At the same
    # instant a Task 1 disagreement wants one of them for its third read and the assignment of
    # Task 2 wants both: whichever goes first, the other finds one reader (or none) left.
    from consensus.assignment import assign_readers
    from tests.factories import make_user

    for _ in range(10):
        study, _, _ = make_reading_study(pairs=1, readers=6, assign=False, adjudicators=0)
        coordinator = make_user()
        assign_readers(study, actor=coordinator, tasks=[Task.REALISM])
        example = Example.objects.filter(study=study, task=Task.REALISM).order_by("pk").first()
        first, second = example.assignments.select_related("reader").order_by("slot")
        rate(first, RatingChoice.REALISTIC, "")

        def assign_task_2(study=study, coordinator=coordinator):
            try:
                return assign_readers(study, actor=coordinator, tasks=[Task.EQUIVALENCE])
            finally:
                connection.close()

        outcomes = racer.race(_submit(second, RatingChoice.MAJOR_ISSUES), assign_task_2)

        assert not any(isinstance(o, Exception) for o in outcomes), outcomes
        assert exams_given_twice(study) == {}
