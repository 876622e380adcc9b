import uuid

import pytest
from django.db import connection, transaction
from django.test.utils import CaptureQueriesContext

from annotation import queues
from annotation.models import (
    Assignment,
    AssignmentStatus,
    AuditAction,
    AuditEvent,
    Example,
    ExampleState,
    MemberRole,
    RatingChoice,
    ReaderQueue,
    Role,
    Study,
    StudyMember,
    Task,
    tiebreak,
)
from consensus.assignment import add_study_member
from consensus.models import Adjudication, AdjudicationStatus, ConsensusLabel, LabelSource
from consensus.reserve import QUEUE_ORDER_END
from consensus.services import (
    create_routed_assignment,
    eligible_readers,
    lock_example,
    route_example,
    submit_adjudication,
    void_annotation,
)
from tests.factories import make_reading_study, make_user, rate
from tests.invariants import readers_barred_from

pytestmark = pytest.mark.django_db

REALISTIC, MINOR, MAJOR = RatingChoice.REALISTIC, RatingChoice.MINOR_ISSUES, RatingChoice.MAJOR_ISSUES


def _task1_example(study) -> Example:
    return Example.objects.filter(study=study, task=Task.REALISM).order_by("pk").first()


def _initial(example) -> list[Assignment]:
    return list(example.assignments.filter(slot__in=[1, 2]).order_by("slot"))


def _third(example) -> Assignment:
    return example.assignments.active().get(slot=3)


def test_two_agreeing_reads_reach_unanimous_consensus(db):
    study, _, _ = make_reading_study()
    example = _task1_example(study)
    first, second = _initial(example)
    rate(first, REALISTIC, "")
    example.refresh_from_db()
    assert example.state == ExampleState.WAITING
    rate(second, REALISTIC, "")
    example.refresh_from_db()
    assert example.state == ExampleState.CONSENSUS
    consensus = ConsensusLabel.objects.get(example=example)
    assert (consensus.rating, consensus.label_source, consensus.n_annotations) == (REALISTIC, LabelSource.UNANIMOUS, 2)
    assert not example.assignments.filter(slot=3).exists()
    [audited] = AuditEvent.objects.filter(example=example, action=AuditAction.CONSENSUS)
    assert audited.after == {"rating": REALISTIC, "label_source": LabelSource.UNANIMOUS, "n_annotations": 2}


def test_routing_an_example_again_after_its_consensus_changes_nothing(db):
    study, _, _ = make_reading_study()
    example = _task1_example(study)
    first, second = _initial(example)
    rate(first, REALISTIC, "")
    rate(second, REALISTIC, "")

    route_example(Example.objects.get(pk=example.pk), refill=True)

    consensus = ConsensusLabel.objects.get(example=example)
    assert (consensus.rating, consensus.label_source) == (REALISTIC, LabelSource.UNANIMOUS)
    assert AuditEvent.objects.filter(example=example, action=AuditAction.CONSENSUS).count() == 1


def test_whatever_is_still_open_when_consensus_is_reached_leaves_the_queues(db):
    # No sequence of the protocol's own actions leaves a read or an adjudication open at consensus;
    # should one be (a read given by hand, a change to come), consensus withdraws it, audited.
    study, readers, adjudicators = make_reading_study(pairs=1, readers_beyond_initial=1)
    example = _task1_example(study)
    first, second = _initial(example)
    # The one reader who may be given it: every other has an item of the exam.
    barred = readers_barred_from(example)
    extra_reader = next(r for r in readers if r.pk not in barred)

    def open_count():
        counter = ReaderQueue.objects.filter(reader=extra_reader, study=study, task=example.task).first()
        return counter.open_count if counter else 0

    opened_before = open_count()
    with transaction.atomic(), queues.counting():
        extra = create_routed_assignment(lock_example(example.pk), extra_reader, slot=3)
    adjudication = Adjudication.objects.create(example=example, adjudicator=adjudicators[0], task=example.task)
    rate(first, REALISTIC, "")
    rate(second, REALISTIC, "")

    assert not Assignment.objects.filter(pk=extra.pk).exists()
    adjudication.refresh_from_db()
    assert adjudication.status == AdjudicationStatus.VOIDED
    withdrawn = AuditEvent.objects.filter(example=example, action=AuditAction.WITHDRAWN).order_by("pk")
    assert [(e.subject, e.before, e.after) for e in withdrawn] == [
        (
            extra_reader,
            {"assignment": str(extra.public_id), "slot": 3},
            {"reason": "consensus reached", "shown": False},
        ),
        (adjudicators[0], {"adjudication": str(adjudication.public_id)}, {"reason": "consensus reached"}),
    ]
    assert open_count() == opened_before


def test_a_disagreement_brings_exactly_one_third_reader(db):
    study, _readers, _ = make_reading_study()
    example = _task1_example(study)
    first, second = _initial(example)
    rate(first, REALISTIC, "")
    rate(second, MINOR)
    example.refresh_from_db()
    assert example.state == ExampleState.THIRD_READ
    third = _third(example)
    assert third.reader_id not in {first.reader_id, second.reader_id}
    assert third.status == AssignmentStatus.OPEN
    [event] = AuditEvent.objects.filter(example=example, action=AuditAction.THIRD_READ_ROUTED)
    assert (event.actor, event.subject, event.study) == (None, third.reader, study)
    assert event.after == {"assignment": str(third.public_id), "slot": 3}


def test_a_refill_after_a_void_is_audited_as_an_assignment_of_the_freed_slot(db):
    study, _readers, _ = make_reading_study(pairs=1, readers_beyond_initial=1)
    example = _task1_example(study)
    first, second = _initial(example)
    rate(first, REALISTIC, "")
    rate(second, REALISTIC, "")
    coordinator = make_user(Role.COORDINATOR)

    void_annotation(first.annotation.public_id, actor=coordinator, reason="Wrong case.")

    refill = example.assignments.get(status=AssignmentStatus.OPEN)
    event = AuditEvent.objects.filter(example=example, action=AuditAction.ASSIGNED).order_by("pk").last()
    assert (event.actor, event.subject) == (coordinator, refill.reader)
    assert event.after == {"assignment": str(refill.public_id), "slot": 1}


def test_a_routed_read_is_placed_in_this_studys_queue_only(db):
    # The reader's first open item in another study comes before everything here: placing the routed
    # read above that one could put it first here, in place of the item on the reader's screen.
    study, readers, _ = make_reading_study(pairs=3, readers=3, keep_versions_apart=False)
    other, _, _ = make_reading_study(pairs=1, readers=2, keep_versions_apart=False, slug="other")
    reader = readers[0]
    StudyMember.objects.create(study=other, user=reader, role=MemberRole.READER)
    elsewhere = Example.objects.filter(study=other, task=Task.REALISM).order_by("pk").first()
    Assignment.objects.create(example=elsewhere, reader=reader, slot=3, queue_order=0)
    here = Assignment.objects.filter(reader=reader, study=study, task=Task.REALISM, status=AssignmentStatus.OPEN)
    on_screen = here.order_by("queue_order").first()
    Assignment.objects.filter(pk=on_screen.pk).update(queue_order=QUEUE_ORDER_END - 1000)
    here.exclude(pk=on_screen.pk).update(queue_order=QUEUE_ORDER_END - 10)
    example = (
        Example.objects.select_related("study")
        .filter(study=study, task=Task.REALISM)
        .exclude(assignments__reader=reader)
    ).first()
    example.assignments.filter(slot=2).delete()

    with transaction.atomic(), queues.counting():
        routed = create_routed_assignment(lock_example(example.pk), reader, 2)

    assert routed.queue_order > QUEUE_ORDER_END - 1000


def test_the_third_reader_is_the_least_loaded_eligible_one(db):
    # Load is what the readers' queue counters say: open items in the study. The eligible readers
    # are loaded so that the least loaded one is the one the seeded tie-break would rank last,
    # so a routing that ignored the load would choose someone else. Seven readers, not keeping
    # versions apart: the example's two and Task 2's two (which shows its text) are not eligible.
    study, readers, _ = make_reading_study(pairs=1, readers=7, keep_versions_apart=False)
    example = _task1_example(study)
    first, second = _initial(example)
    barred = readers_barred_from(example)
    eligible = [r for r in readers if r.pk not in barred]
    by_tiebreak = sorted(eligible, key=lambda r: tiebreak(study.seed, "route", example.public_id, r.pk))
    for extra, reader in zip((20, 10, 0), by_tiebreak, strict=True):
        queues.count(reader.pk, study.pk, Task.EQUIVALENCE, opened=extra)
    loads = {
        r.pk: sum(ReaderQueue.objects.filter(reader=r, study=study).values_list("open_count", flat=True))
        for r in eligible
    }
    assert loads[by_tiebreak[-1].pk] < min(loads[r.pk] for r in by_tiebreak[:-1])

    rate(first, REALISTIC, "")
    rate(second, MAJOR)

    assert _third(Example.objects.get(pk=example.pk)).reader == by_tiebreak[-1]


def test_equally_loaded_eligible_readers_are_ordered_by_a_draw_from_the_study_seed(db):
    # Three eligible readers with the same load: over 16 seeds each of them comes first (a fixed
    # public id keeps the draws fixed too). An order that ignored the seed, or the readers, would
    # put the same one first every time. Seven readers, as above: three are eligible.
    study, readers, _ = make_reading_study(pairs=1, readers=7, keep_versions_apart=False)
    example = _task1_example(study)
    Example.objects.filter(pk=example.pk).update(public_id=uuid.UUID("7d1f7a0e-2c1b-4d6e-9f3a-0b5c8e4a2d11"))
    eligible = {r.pk for r in readers} - readers_barred_from(example)
    assert len(eligible) == 3
    ReaderQueue.objects.filter(study=study).update(open_count=0, rated_count=0)

    firsts = set()
    for seed in range(16):
        Study.objects.filter(pk=study.pk).update(seed=seed)
        ranked = eligible_readers(Example.objects.select_related("study").get(pk=example.pk))
        assert {r.pk for r in ranked} == eligible
        firsts.add(ranked[0].pk)

    assert firsts == eligible


def test_a_majority_of_three_is_the_consensus(db):
    study, _, _ = make_reading_study()
    example = _task1_example(study)
    first, second = _initial(example)
    rate(first, REALISTIC, "")
    rate(second, MINOR)
    rate(_third(example), MINOR)
    consensus = ConsensusLabel.objects.get(example=example)
    assert (consensus.rating, consensus.label_source, consensus.n_annotations) == (MINOR, LabelSource.MAJORITY, 3)
    assert not Adjudication.objects.filter(example=example).exists()


def test_a_three_way_split_goes_to_exactly_one_adjudicator(db):
    study, _, adjudicators = make_reading_study(adjudicators=2)
    example = _task1_example(study)
    first, second = _initial(example)
    rate(first, REALISTIC, "")
    rate(second, MINOR)
    rate(_third(example), MAJOR)
    example.refresh_from_db()
    assert example.state == ExampleState.ADJUDICATION
    adjudication = Adjudication.objects.get(example=example)
    assert adjudication.status == AdjudicationStatus.OPEN
    assert adjudication.adjudicator in adjudicators
    assert not ConsensusLabel.objects.filter(example=example).exists()


def test_the_adjudicator_is_never_one_of_the_three_readers(db):
    # The only adjudicator also reads; when they read the example, nobody is eligible. One reader
    # beyond the six the exam's items need, for the third read.
    study, _, _ = make_reading_study(readers_beyond_initial=1, adjudicators=0, pairs=1)
    # Which reader has no item of the exam depends on the users' ids: take a reader of the example.
    example = Example.objects.filter(study=study, task=Task.REALISM).order_by("pk").first()
    both = example.assignments.order_by("slot").first().reader
    both.groups.add(*make_user(Role.ADJUDICATOR).groups.all())
    add_study_member(study, both, MemberRole.ADJUDICATOR, actor=make_user(Role.COORDINATOR))
    assignments = _initial(example)
    for assignment, rating in zip(assignments, [REALISTIC, MINOR], strict=True):
        rate(assignment, rating, "" if rating == REALISTIC else "why")
    example.refresh_from_db()
    rate(_third(example), MAJOR)
    example.refresh_from_db()
    assert example.state == ExampleState.ADJUDICATION
    assert example.unrouted
    assert not Adjudication.objects.filter(example=example).exists()


def test_cardiothoracic_adjudicators_are_preferred(db):
    study, _, _ = make_reading_study(adjudicators=3, adjudicator_subspecialty="general")
    cardiothoracic = make_user(Role.ADJUDICATOR, subspecialty="cardiothoracic")
    add_study_member(study, cardiothoracic, MemberRole.ADJUDICATOR, actor=make_user(Role.COORDINATOR))
    example = _task1_example(study)
    first, second = _initial(example)
    rate(first, REALISTIC, "")
    rate(second, MINOR)
    rate(_third(example), MAJOR)
    assert Adjudication.objects.get(example=example).adjudicator == cardiothoracic


def test_the_adjudication_becomes_the_consensus(db):
    study, _, _adjudicators = make_reading_study()
    example = _task1_example(study)
    first, second = _initial(example)
    rate(first, REALISTIC, "")
    rate(second, MINOR)
    rate(_third(example), MAJOR)
    adjudication = Adjudication.objects.get(example=example)
    submit_adjudication(
        adjudicator=adjudication.adjudicator,
        adjudication_id=adjudication.public_id,
        rating=MINOR,
        rationale="Phrasing is unusual but correct.",
        form_token=uuid.uuid4(),
    )
    consensus = ConsensusLabel.objects.get(example=example)
    assert (consensus.rating, consensus.label_source, consensus.n_annotations) == (
        MINOR,
        LabelSource.ADJUDICATED,
        3,
    )
    example.refresh_from_db()
    assert example.state == ExampleState.CONSENSUS


def test_an_example_without_an_eligible_third_reader_waits_until_one_is_added(db):
    study, _readers, _ = make_reading_study(readers=2, pairs=1, keep_versions_apart=False)
    example = _task1_example(study)
    first, second = _initial(example)
    rate(first, REALISTIC, "")
    rate(second, MINOR)
    example.refresh_from_db()
    assert example.state == ExampleState.THIRD_READ
    assert example.unrouted
    assert not example.assignments.filter(slot=3).exists()

    newcomer = make_user(Role.READER)
    add_study_member(study, newcomer, MemberRole.READER, actor=make_user(Role.COORDINATOR))
    example.refresh_from_db()
    assert not example.unrouted
    assert _third(example).reader == newcomer


def test_enrolling_in_one_study_routes_that_studys_waiting_examples_only(db):
    def waiting_for_a_third_reader(slug):
        study, _, _ = make_reading_study(readers=2, pairs=1, keep_versions_apart=False, slug=slug)
        example = _task1_example(study)
        first, second = _initial(example)
        rate(first, REALISTIC, "")
        rate(second, MINOR)
        example.refresh_from_db()
        assert example.unrouted
        return study, example

    here, waiting_here = waiting_for_a_third_reader("here")
    elsewhere, waiting_elsewhere = waiting_for_a_third_reader("elsewhere")
    # The other study has an eligible reader too, enrolled without routing (its coordinator's turn).
    StudyMember.objects.create(study=elsewhere, user=make_user(Role.READER), role=MemberRole.READER)

    add_study_member(here, make_user(Role.READER), MemberRole.READER, actor=make_user(Role.COORDINATOR))

    waiting_here.refresh_from_db()
    waiting_elsewhere.refresh_from_db()
    assert (waiting_here.unrouted, waiting_elsewhere.unrouted) == (False, True)


def test_an_example_without_an_adjudicator_waits_until_one_is_added(db):
    study, _, _ = make_reading_study(adjudicators=0)
    example = _task1_example(study)
    first, second = _initial(example)
    rate(first, REALISTIC, "")
    rate(second, MINOR)
    rate(_third(example), MAJOR)
    example.refresh_from_db()
    assert example.unrouted
    adjudicator = make_user(Role.ADJUDICATOR)
    add_study_member(study, adjudicator, MemberRole.ADJUDICATOR, actor=make_user(Role.COORDINATOR))
    example.refresh_from_db()
    assert not example.unrouted
    assert Adjudication.objects.get(example=example).adjudicator == adjudicator


def test_task_2_follows_the_same_rules(db):
    study, _, _ = make_reading_study()
    example = Example.objects.filter(study=study, task=Task.EQUIVALENCE).first()
    first, second = _initial(example)
    rate(first, RatingChoice.EQUIVALENT, "")
    rate(second, RatingChoice.MAJOR_DISCREPANCY)
    rate(_third(example), RatingChoice.EQUIVALENT, "")
    consensus = ConsensusLabel.objects.get(example=example)
    assert (consensus.rating, consensus.label_source) == (RatingChoice.EQUIVALENT, LabelSource.MAJORITY)


def test_the_load_that_counts_is_the_readers_open_work_in_this_study(db):
    # A reader busy in another study is not busy here: the least loaded in this study gets the read,
    # and a reader with no work anywhere yet (no queue counter at all) counts as 0.
    study, _, _ = make_reading_study(pairs=1, readers=2, keep_versions_apart=False)
    example = _task1_example(study)
    first, second = _initial(example)
    busy_elsewhere, busy_here = make_user(Role.READER), make_user(Role.READER)
    for reader in (busy_elsewhere, busy_here):
        add_study_member(study, reader, MemberRole.READER, actor=make_user(Role.COORDINATOR))
    other_study, _, _ = make_reading_study(pairs=1, readers=2, keep_versions_apart=False)
    queues.count(busy_elsewhere.pk, other_study.pk, Task.REALISM, opened=10)
    queues.count(busy_here.pk, study.pk, Task.EQUIVALENCE, opened=1)

    rate(first, REALISTIC, "")
    rate(second, MAJOR)

    assert _third(Example.objects.get(pk=example.pk)).reader == busy_elsewhere


def test_a_reader_without_any_queue_yet_can_be_chosen(db):
    study, _, _ = make_reading_study(pairs=1, readers=2, keep_versions_apart=False)
    example = _task1_example(study)
    first, second = _initial(example)
    newcomer, loaded = make_user(Role.READER), make_user(Role.READER)
    for reader in (newcomer, loaded):
        add_study_member(study, reader, MemberRole.READER, actor=make_user(Role.COORDINATOR))
    queues.count(loaded.pk, study.pk, Task.EQUIVALENCE, opened=1)
    assert not ReaderQueue.objects.filter(reader=newcomer).exists()

    rate(first, REALISTIC, "")
    rate(second, MAJOR)

    assert _third(Example.objects.get(pk=example.pk)).reader == newcomer


def test_choosing_the_third_reader_is_one_query_whatever_the_number_of_readers(db):
    # Eight readers: the example's two and Task 2's two (which shows its text) are not eligible.
    study, _, _ = make_reading_study(pairs=1, readers=8, keep_versions_apart=False)
    example = Example.objects.select_related("study", "pair").get(pk=_task1_example(study).pk)

    with CaptureQueriesContext(connection) as captured:
        chosen = eligible_readers(example)
        names = [reader.get_username() for reader in chosen]

    assert len(names) == 4
    assert len(captured) == 1


def test_a_consensus_reached_by_a_void_names_the_coordinator_who_voided(db):
    study, _, _ = make_reading_study(pairs=1, readers_beyond_initial=1, keep_versions_apart=False)
    coordinator = make_user(Role.COORDINATOR)
    example = _task1_example(study)
    first, second = _initial(example)
    rate(first, REALISTIC, "")
    odd_one = rate(second, MAJOR).annotation
    rate(_third(Example.objects.get(pk=example.pk)), REALISTIC, "")
    # A majority of three; voiding the odd rating leaves two that agree.
    void_annotation(odd_one.public_id, actor=coordinator, reason="Wrong report.")

    event = AuditEvent.objects.filter(example=example, action=AuditAction.CONSENSUS).order_by("pk").last()
    assert event.after["label_source"] == LabelSource.UNANIMOUS
    assert event.actor == coordinator


def test_an_adjudication_routed_when_an_adjudicator_joins_names_the_coordinator_who_added_them(db):
    study, _, _ = make_reading_study(pairs=1, readers_beyond_initial=1, adjudicators=0, keep_versions_apart=False)
    example = _task1_example(study)
    first, second = _initial(example)
    rate(first, REALISTIC, "")
    rate(second, MINOR)
    rate(_third(Example.objects.get(pk=example.pk)), MAJOR)
    coordinator = make_user(Role.COORDINATOR)

    add_study_member(study, make_user(Role.ADJUDICATOR), MemberRole.ADJUDICATOR, actor=coordinator)

    # Before: waiting for an adjudicator, said once, when the split came in.
    (unrouted,) = AuditEvent.objects.filter(example=example, action=AuditAction.UNROUTED)
    assert (unrouted.actor, unrouted.after) == (
        None,
        {
            "waiting_for": "adjudicator",
            "reason": "No active adjudicator of the study who has not read this example. Add an adjudicator.",
        },
    )
    routed = AuditEvent.objects.get(example=example, action=AuditAction.ADJUDICATION_ROUTED)
    adjudication = Adjudication.objects.get(example=example)
    assert (routed.actor, routed.subject, routed.study) == (coordinator, adjudication.adjudicator, study)
    assert routed.after == {"adjudication": str(adjudication.public_id)}
