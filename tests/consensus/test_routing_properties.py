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
    Rating,
    ReaderQueue,
    Role,
    StudyMember,
    Task,
)
from annotation.services import sample_pairs
from consensus.assignment import assign_readers
from tests.factories import make_pair, make_reading_study, make_study, make_user, rate_open_reads
from tests.invariants import queue_counter_mismatches

pytestmark = pytest.mark.django_db

PROPERTY_SETTINGS = settings(
    max_examples=12,
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
    least = 4 if keep_apart and Task.REALISM in tasks else 2
    return {
        "keep_apart": keep_apart,
        "tasks": tasks,
        "pairs": draw(st.integers(min_value=1, max_value=4), label="pairs"),
        "readers": draw(st.integers(min_value=least, max_value=7), label="readers"),
    }


@PROPERTY_SETTINGS
@given(shape=studies())
@_rolled_back
def test_the_first_assignment_gives_every_example_two_readers_and_balances_their_loads(shape):
    study = make_study(keep_versions_apart=shape["keep_apart"])
    variations = list(study.variations.values_list("key", flat=True))
    for i in range(shape["pairs"]):
        make_pair(study, study_id=str(53_000_000 + i), variation=variations[i % len(variations)])
    sample_pairs(study, per_variation=shape["pairs"], seed=1)
    readers = [make_user(Role.READER) for _ in range(shape["readers"])]
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
    if shape["keep_apart"]:
        # Never both versions of a pair for one reader.
        seen = Counter(
            Assignment.objects.filter(study=study, task=Task.REALISM).values_list("reader_id", "example__pair_id")
        )
        assert set(seen.values()) <= {1}, seen
    for task in shape["tasks"]:
        # Loads within one of each other: no caps, and room for everyone.
        loads = Counter(reader for _, reader, _, t in assignments if t == task)
        counts = [loads[reader.pk] for reader in readers]
        assert max(counts) - min(counts) <= 1, (task, counts)
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
    readers=st.integers(min_value=5, max_value=7),
    extra=st.lists(st.integers(min_value=0, max_value=3), min_size=7, max_size=7),
)
@_rolled_back
def test_a_disagreement_goes_to_one_least_loaded_eligible_reader(keep_apart, task, readers, extra):
    study, members, _ = make_reading_study(
        pairs=1, readers=readers, adjudicators=0, keep_versions_apart=keep_apart, assign=True
    )
    # Random open work elsewhere in the study, counted as the routing counts it.
    for reader, more in zip(members, extra, strict=False):
        queues.count(reader.pk, study.pk, Task.EQUIVALENCE if task == Task.REALISM else Task.REALISM, opened=more)
    example = Example.objects.filter(study=study, task=task).select_related("pair").first()
    excluded = set(example.assignments.values_list("reader_id", flat=True))
    if keep_apart and task == Task.REALISM:
        excluded |= set(
            Assignment.objects.filter(example__pair=example.pair, example__task=Task.REALISM)
            .exclude(example=example)
            .values_list("reader_id", flat=True)
        )
    ratings = {
        Task.REALISM: (Rating.REALISTIC, Rating.MAJOR_ISSUES),
        Task.EQUIVALENCE: (Rating.EQUIVALENT, Rating.MAJOR_DISCREPANCY),
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
