"""Properties of assignment and routing over random studies (seeded, a bounded number of examples).

The step-by-step state machine is test_routing_state_machine.py; these check what one call must
give whatever the study: the first assignment of a study, and who gets a third read.
"""

import functools
from collections import Counter

import pytest
from django.db import transaction
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from annotation import queues
from annotation.models import (
    THIRD_READ_SLOT,
    Assignment,
    AuditAction,
    AuditEvent,
    Example,
    MemberRole,
    RatingChoice,
    ReaderQueue,
    Role,
    StudyMember,
    Task,
)
from annotation.services import sample_pairs
from consensus.assignment import assign_readers
from consensus.blinding import readers_needed
from tests.factories import make_pair, make_reading_study, make_study, make_user, rate_open_reads
from tests.hypothesis_profiles import examples
from tests.invariants import (
    exams_given_twice,
    queue_counter_mismatches,
    readers_barred_from,
    texts_shown_twice,
)

pytestmark = pytest.mark.django_db

PROPERTY_SETTINGS = settings(
    max_examples=examples(12),
    deadline=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)


def _rolled_back(check):
    """Run one example in a savepoint that is rolled back: each example starts from an empty study."""

    @functools.wraps(check)
    def run(*args, **kwargs):
        with transaction.atomic():
            try:
                check(*args, **kwargs)
            finally:
                transaction.set_rollback(True)

    return run


@st.composite
def studies(draw) -> dict:
    keep_apart = draw(st.booleans(), label="keep versions apart")
    tasks = draw(st.sampled_from([[Task.REALISM], [Task.EQUIVALENCE], [Task.REALISM, Task.EQUIVALENCE]]), label="tasks")
    return {
        "keep_apart": keep_apart,
        "tasks": tasks,
        "pairs": draw(st.integers(min_value=1, max_value=4), label="pairs"),
        # Consecutive pairs share an exam (and its original text).
        "pairs_per_exam": draw(st.integers(min_value=1, max_value=2), label="pairs per exam"),
        "readers_beyond": draw(st.integers(min_value=0, max_value=3), label="readers beyond the least"),
    }


@PROPERTY_SETTINGS
@given(shape=studies())
@_rolled_back
def test_the_first_assignment_gives_every_example_two_readers_and_balances_their_loads(shape):
    study = make_study(keep_versions_apart=shape["keep_apart"])
    variations = list(study.variations.values_list("key", flat=True))
    for i in range(shape["pairs"]):
        exam = i // shape["pairs_per_exam"]
        make_pair(
            study,
            study_id=str(53_000_000 + exam),
            variation=variations[i % len(variations)],
            original_findings=f"Lungs are clear. Exam {exam}.",
        )
    sample_pairs(study, per_variation=shape["pairs"], seed=1)
    least = readers_needed(study, shape["tasks"]).initial
    readers = [make_user(Role.READER) for _ in range(least + shape["readers_beyond"])]
    for reader in readers:
        StudyMember.objects.create(study=study, user=reader, role=MemberRole.READER)

    assign_readers(study, actor=make_user(Role.COORDINATOR), tasks=shape["tasks"])

    assignments = list(Assignment.objects.filter(study=study).values_list("example_id", "reader_id", "slot", "task"))
    for example in Example.objects.filter(study=study):
        reads = [(reader, slot) for example_id, reader, slot, _ in assignments if example_id == example.pk]
        if example.task in shape["tasks"]:
            # Two first reads, slots 1 and 2, by two different readers.
            assert sorted(slot for _, slot in reads) == [1, 2]
            assert len({reader for reader, _ in reads}) == 2
        else:
            assert reads == []
    # Never one report text twice for one reader; kept apart, never two items of one exam.
    assert texts_shown_twice(study) == {}
    if shape["keep_apart"]:
        assert exams_given_twice(study) == {}
    # Loads within one of each other: no caps, and room for everyone. Per task when one task is
    # assigned; with both, overall only: an item of one task may bar a reader from the same exam's
    # items of the other, and with the fewest readers that forces the split between the tasks.
    for tasks in [[task] for task in shape["tasks"]] if len(shape["tasks"]) == 1 else [shape["tasks"]]:
        loads = Counter(reader for _, reader, _, t in assignments if t in tasks)
        counts = [loads[reader.pk] for reader in readers]
        assert max(counts) - min(counts) <= 1, (tasks, counts)
    # Every assignment is in the audit trail.
    announced = Counter(
        after["assignment"]
        for after in AuditEvent.objects.filter(study=study, action=AuditAction.ASSIGNED).values_list("after", flat=True)
    )
    assert announced == Counter(
        str(pid) for pid in Assignment.objects.filter(study=study).values_list("public_id", flat=True)
    )

    assert queue_counter_mismatches(study) == {}

    # A second run gives nobody anything more.
    assign_readers(study, actor=make_user(Role.COORDINATOR), tasks=shape["tasks"])
    assert Assignment.objects.filter(study=study).count() == len(assignments)


@PROPERTY_SETTINGS
@given(
    keep_apart=st.booleans(),
    task=st.sampled_from([Task.REALISM, Task.EQUIVALENCE]),
    pairs_per_exam=st.integers(min_value=1, max_value=2),
    readers_beyond=st.integers(min_value=0, max_value=2),
    extra=st.lists(st.integers(min_value=0, max_value=3), min_size=14, max_size=14),
)
@_rolled_back
def test_a_disagreement_goes_to_one_least_loaded_eligible_reader(
    keep_apart, task, pairs_per_exam, readers_beyond, extra
):
    study, members, _ = make_reading_study(
        pairs=2,
        pairs_per_exam=pairs_per_exam,
        readers_beyond_initial=readers_beyond,
        adjudicators=0,
        keep_versions_apart=keep_apart,
    )
    # Random open work elsewhere in the study, counted as the routing counts it.
    for reader, more in zip(members, extra, strict=False):
        queues.count(reader.pk, study.pk, Task.EQUIVALENCE if task == Task.REALISM else Task.REALISM, opened=more)
    example = Example.objects.filter(study=study, task=task).select_related("pair").first()
    excluded = readers_barred_from(example)
    ratings = {
        Task.REALISM: (RatingChoice.REALISTIC, RatingChoice.MAJOR_ISSUES),
        Task.EQUIVALENCE: (RatingChoice.EQUIVALENT, RatingChoice.MAJOR_DISCREPANCY),
    }[task]

    rate_open_reads(example, *ratings)

    thirds = list(example.assignments.filter(slot=THIRD_READ_SLOT).values_list("reader_id", flat=True))
    eligible = [m for m in members if m.pk not in excluded]
    if not eligible:
        assert thirds == []
        example.refresh_from_db()
        assert example.unrouted
        return
    (third,) = thirds
    assert third not in excluded
    load = {
        m.pk: sum(ReaderQueue.objects.filter(reader=m, study=study).values_list("open_count", flat=True))
        for m in eligible
    }
    # Loads now include the new third read itself.
    load[third] -= 1
    assert load[third] == min(load.values()), load
    assert AuditEvent.objects.filter(study=study, example=example, action=AuditAction.THIRD_READ_ROUTED).count() == 1
