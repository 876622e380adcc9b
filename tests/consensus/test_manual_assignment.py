"""Queues by hand: assign_example, withdraw_assignment, reassign_assignment and add_study_member."""

import uuid

import pytest

from annotation.models import (
    Assignment,
    AssignmentStatus,
    AuditAction,
    AuditEvent,
    Example,
    ExampleState,
    MemberRole,
    RatingChoice,
    ReportType,
    Role,
    StudyMember,
    Task,
)
from consensus.assignment import (
    QueueRefused,
    add_study_member,
    assign_example,
    assign_readers,
    reassign_assignment,
    withdraw_assignment,
)
from consensus.services import show_assignment, void_annotation
from tests.factories import make_reading_study, make_user, rate
from tests.invariants import exams_given_twice, readers_barred_from

pytestmark = pytest.mark.django_db


def _task2(study) -> Example:
    return Example.objects.get(study=study, task=Task.EQUIVALENCE)


def _version(study, report_type: str) -> Example:
    return Example.objects.get(study=study, task=Task.REALISM, report_type=report_type)


def _free_reader(example, readers):
    """One of readers who may be given the example: no item of its exam (nor one showing its texts) so far."""
    barred = readers_barred_from(example)
    return next(r for r in readers if r.pk not in barred)


def _enrolled_directly(study):
    """A new reader of the study, enrolled without the routing that add_study_member runs."""
    reader = make_user(Role.READER)
    StudyMember.objects.create(study=study, user=reader, role=MemberRole.READER)
    return reader


def _disagree(example) -> None:
    """The two initial reads of a Task 2 example disagree: it needs a third read."""
    first, second = example.assignments.filter(slot__in=[1, 2]).order_by("slot")
    rate(first, RatingChoice.EQUIVALENT, "")
    rate(second, RatingChoice.MAJOR_DISCREPANCY, "The effusion is missing.")
    example.refresh_from_db()
    assert example.state == ExampleState.THIRD_READ


# --- assign_example ---------------------------------------------------------------------------


def test_it_puts_the_example_in_the_first_free_slot(coordinator):
    study, readers, _ = make_reading_study(pairs=1, readers=4, assign=False)
    example = _task2(study)

    first = assign_example(example.public_id, readers[0], actor=coordinator)
    second = assign_example(example.public_id, readers[1], actor=coordinator)

    assert (first.slot, first.reader, first.status) == (1, readers[0], AssignmentStatus.OPEN)
    assert (second.slot, second.reader) == (2, readers[1])
    event = AuditEvent.objects.get(action=AuditAction.ASSIGNED, subject=readers[0])
    assert event.actor == coordinator
    assert event.example == example
    assert event.after == {"assignment": str(first.public_id), "slot": 1, "how": "by hand"}


def test_it_fills_the_slot_a_withdrawal_freed(coordinator):
    study, readers, _ = make_reading_study(pairs=1, readers=4, assign=False)
    example = _task2(study)
    first = assign_example(example.public_id, readers[0], actor=coordinator)
    assign_example(example.public_id, readers[1], actor=coordinator)
    withdraw_assignment(first.public_id, actor=coordinator)

    replacement = assign_example(example.public_id, readers[2], actor=coordinator)

    assert replacement.slot == 1


def test_it_refuses_a_reader_who_already_has_the_example(coordinator):
    study, readers, _ = make_reading_study(pairs=1, readers=4, assign=False)
    example = _task2(study)
    assign_example(example.public_id, readers[0], actor=coordinator)

    with pytest.raises(QueueRefused, match="never gets it twice"):
        assign_example(example.public_id, readers[0], actor=coordinator)

    assert example.assignments.count() == 1


def test_it_refuses_a_reader_whose_rating_of_the_example_was_voided(coordinator):
    study, _, _ = make_reading_study(pairs=1, readers=4, keep_versions_apart=False)
    example = _task2(study)
    first, second = example.assignments.select_related("reader").order_by("slot")
    first_reader = first.reader
    rate(first, RatingChoice.EQUIVALENT, "")
    rate(second, RatingChoice.EQUIVALENT, "")
    void_annotation(first.annotation.public_id, actor=coordinator, reason="Wrong case.")
    example.refresh_from_db()
    # A slot is free and nobody is eligible: the other two readers hold the pair's Task 1 items (its texts).
    assert example.unrouted

    with pytest.raises(QueueRefused, match=r"already has \(or had\)"):
        assign_example(example.public_id, first_reader, actor=coordinator)

    assert example.assignments.filter(reader=first_reader).count() == 1


def test_filling_one_of_two_missing_reads_leaves_the_example_unrouted(coordinator):
    # Both first ratings voided and nobody eligible left: the example waits for two readers.
    study, _, _ = make_reading_study(pairs=1, readers=2, keep_versions_apart=False)
    example = _task2(study)
    for assignment in example.assignments.order_by("slot"):
        rate(assignment, RatingChoice.MAJOR_DISCREPANCY, "The effusion is missing.")
    for annotation in example.annotations.order_by("pk"):
        void_annotation(annotation.public_id, actor=coordinator, reason="Wrong case.")
    example.refresh_from_db()
    assert (example.assignments.active().count(), example.unrouted) == (0, True)
    reason = example.unrouted_reason
    newcomer = _enrolled_directly(study)

    assign_example(example.public_id, newcomer, actor=coordinator)

    example.refresh_from_db()
    # One read is given, the other still has nobody: the example stays on the coordinator's list.
    assert example.assignments.active().count() == 1
    assert (example.state, example.unrouted, example.unrouted_reason) == (ExampleState.WAITING, True, reason)


def test_reassigning_the_one_read_of_an_example_waiting_for_two_leaves_it_unrouted(coordinator):
    # The four readers a pair needs hold its texts; one more, enrolled after the assignment, holds
    # nothing: the only reader the first refill can go to.
    study, _, _ = make_reading_study(pairs=1, readers=4, keep_versions_apart=False)
    example = _task2(study)
    first, second = example.assignments.order_by("slot")
    rate(first, RatingChoice.EQUIVALENT, "")
    rate(second, RatingChoice.EQUIVALENT, "")
    spare = _enrolled_directly(study)
    void_annotation(first.annotation.public_id, actor=coordinator, reason="Wrong case.")
    refill = example.assignments.get(reader=spare)
    void_annotation(second.annotation.public_id, actor=coordinator, reason="Wrong case.")
    example.refresh_from_db()
    assert example.unrouted and list(example.assignments.active()) == [refill]
    newcomer = _enrolled_directly(study)

    reassign_assignment(refill.public_id, newcomer, actor=coordinator)

    example.refresh_from_db()
    assert [a.reader for a in example.assignments.active()] == [newcomer]
    assert (example.state, example.unrouted) == (ExampleState.WAITING, True)


def test_giving_the_last_missing_read_clears_unrouted(coordinator):
    study, _, _ = make_reading_study(pairs=1, readers=2, keep_versions_apart=False)
    example = _task2(study)
    first, second = example.assignments.order_by("slot")
    rate(first, RatingChoice.EQUIVALENT, "")
    rate(second, RatingChoice.EQUIVALENT, "")
    void_annotation(first.annotation.public_id, actor=coordinator, reason="Wrong case.")
    example.refresh_from_db()
    assert example.unrouted
    newcomer = _enrolled_directly(study)

    assign_example(example.public_id, newcomer, actor=coordinator)

    example.refresh_from_db()
    assert (example.unrouted, example.unrouted_reason) == (False, "")


def test_it_refuses_someone_who_is_not_an_active_reader_of_the_study(coordinator):
    study, _, adjudicators = make_reading_study(pairs=1, readers=4, assign=False)
    example = _task2(study)
    outsider = make_user(Role.READER)
    removed = make_user(Role.READER)
    StudyMember.objects.create(study=study, user=removed, role=MemberRole.READER, active=False)

    for person in (outsider, removed, adjudicators[0]):
        with pytest.raises(QueueRefused) as refused:
            assign_example(example.public_id, person, actor=coordinator)
        assert str(refused.value) == (
            f"{person.get_username()} is not an active reader of study {study.slug} (enrolled, with the Reader "
            "role and an active account). Add them first."
        )

    assert not example.assignments.exists()


def test_it_refuses_an_unknown_example(coordinator, reader):
    with pytest.raises(QueueRefused) as refused:
        assign_example(uuid.uuid4(), reader, actor=coordinator)
    assert str(refused.value) == "No such example."


def test_it_refuses_another_item_of_the_same_exam_when_versions_are_kept_apart(coordinator):
    # An exam in two pairs (two variations, one original), and an exam in one pair.
    study, readers, _ = make_reading_study(pairs=3, pairs_per_exam=2, assign=False)
    first_pair, second_pair, other_exams_pair = study.pairs.filter(sampled=True).order_by("pk")
    original = Example.objects.get(pair=first_pair, report_type=ReportType.ORIGINAL)
    assign_example(original.public_id, readers[0], actor=coordinator)
    same_exam = Example.objects.filter(pair__in=[first_pair, second_pair]).exclude(pk=original.pk)
    assert same_exam.count() == 5

    # The pair's other version, its Task 2, and every item of the exam's other pair.
    for example in same_exam:
        with pytest.raises(QueueRefused) as refused:
            assign_example(example.public_id, readers[0], actor=coordinator)
        assert str(refused.value) == (
            f"{readers[0].get_username()} has or had another item of the same exam (the original, a rewrite or "
            "Task 2 of it), and the study keeps the items of an exam apart. Choose another reader."
        )

    assert not Assignment.objects.filter(example__in=same_exam).exists()
    # Another exam's items are not kept apart from it.
    task2 = Example.objects.get(pair=other_exams_pair, task=Task.EQUIVALENCE)
    assert assign_example(task2.public_id, readers[0], actor=coordinator).slot == 1


def test_keeping_items_apart_asks_about_this_exams_items_only(coordinator):
    # The reader has every item of another exam: none of them is an item of this exam.
    study, readers, _ = make_reading_study(pairs=2, assign=False)
    this, other = (Example.objects.filter(study=study, pair=pair).order_by("pk") for pair in study.pairs.order_by("pk"))
    for example in other:
        Assignment.objects.create(example=example, reader=readers[0], slot=1, queue_order=example.pk)

    version = this.get(task=Task.REALISM, report_type=ReportType.ORIGINAL)
    assert assign_example(version.public_id, readers[0], actor=coordinator).slot == 1


def test_it_gives_both_versions_when_the_study_does_not_keep_them_apart(coordinator):
    study, readers, _ = make_reading_study(pairs=1, readers=2, keep_versions_apart=False, assign=False)
    assign_example(_version(study, ReportType.ORIGINAL).public_id, readers[0], actor=coordinator)
    assignment = assign_example(_version(study, ReportType.ALTERNATIVE).public_id, readers[0], actor=coordinator)
    assert assignment.slot == 1


def test_it_refuses_when_the_example_already_has_its_readers(coordinator):
    # The default readers: some hold no item of the exam, so the refusal is about the slots alone.
    study, readers, _ = make_reading_study(pairs=1)
    example = _task2(study)
    newcomer = _free_reader(example, readers)

    with pytest.raises(QueueRefused) as refused:
        assign_example(example.public_id, newcomer, actor=coordinator)
    assert str(refused.value) == "This example already has all the readers it needs."

    # Nor is a second third read possible while one is open.
    _disagree(example)
    third = example.assignments.get(slot=3)
    spare = _free_reader(example, readers)
    with pytest.raises(QueueRefused, match="all the readers it needs"):
        assign_example(example.public_id, spare, actor=coordinator)

    # Nor once it has its consensus.
    rate(third, RatingChoice.EQUIVALENT, "")
    example.refresh_from_db()
    assert example.state == ExampleState.CONSENSUS
    with pytest.raises(QueueRefused, match="all the readers it needs"):
        assign_example(example.public_id, spare, actor=coordinator)
    assert example.assignments.count() == 3


def test_on_an_unrouted_third_read_it_fills_slot_3_and_clears_unrouted(coordinator):
    study, _, _ = make_reading_study(pairs=1, readers=2, keep_versions_apart=False)
    example = _task2(study)
    _disagree(example)
    assert example.unrouted
    newcomer = _enrolled_directly(study)

    assignment = assign_example(example.public_id, newcomer, actor=coordinator)

    assert assignment.slot == 3
    example.refresh_from_db()
    assert not example.unrouted
    assert example.state == ExampleState.THIRD_READ
    rate(assignment, RatingChoice.EQUIVALENT, "")
    assert Example.objects.get(pk=example.pk).state == ExampleState.CONSENSUS


# --- withdraw_assignment -------------------------------------------------------------------


def test_withdrawing_deletes_an_open_assignment_and_audits_it(coordinator):
    study, _, _ = make_reading_study(pairs=1, readers=4)
    example = _task2(study)
    assignment = example.assignments.get(slot=2)

    returned = withdraw_assignment(assignment.public_id, actor=coordinator)

    assert returned == example
    assert not Assignment.objects.filter(pk=assignment.pk).exists()
    event = AuditEvent.objects.get(action=AuditAction.WITHDRAWN)
    assert event.actor == coordinator
    assert event.subject == assignment.reader
    assert event.example == example
    assert event.before == {"assignment": str(assignment.public_id), "slot": 2}
    assert event.after == {"reason": "withdrawn by a coordinator", "shown": False}
    example.refresh_from_db()
    assert (example.state, example.unrouted) == (ExampleState.WAITING, False)


def test_a_rated_assignment_cannot_be_withdrawn(coordinator):
    study, _, _ = make_reading_study(pairs=1, readers=4)
    assignment = _task2(study).assignments.get(slot=1)
    rate(assignment, RatingChoice.EQUIVALENT, "")

    with pytest.raises(QueueRefused) as refused:
        withdraw_assignment(assignment.public_id, actor=coordinator)
    assert str(refused.value) == "This assignment has a rating; it cannot be withdrawn (void the rating instead)."

    assignment.refresh_from_db()
    assert assignment.status == AssignmentStatus.DONE
    assert not AuditEvent.objects.filter(action=AuditAction.WITHDRAWN).exists()


def test_withdrawing_an_unknown_assignment_is_refused(coordinator):
    with pytest.raises(QueueRefused) as refused:
        withdraw_assignment(uuid.uuid4(), actor=coordinator)
    assert str(refused.value) == "No such assignment."


def test_withdrawing_a_needed_third_read_lists_the_example_as_unrouted(coordinator):
    study, _, _ = make_reading_study(pairs=1)
    example = _task2(study)
    _disagree(example)
    third = example.assignments.get(slot=3)
    assert not example.unrouted

    returned = withdraw_assignment(third.public_id, actor=coordinator)

    reason = "Its third reader was withdrawn by a coordinator. Assign a reader by hand."
    assert (returned.unrouted, returned.unrouted_reason) == (True, reason)
    example.refresh_from_db()
    assert (example.unrouted, example.unrouted_reason) == (True, reason)
    assert example.state == ExampleState.THIRD_READ
    assert not example.assignments.filter(slot=3).exists()


def test_withdrawing_both_initial_reads_leaves_the_example_waiting_and_not_unrouted(coordinator):
    # Taken out by hand: the coordinator who did it decides what comes next (not the Unrouted list).
    study, _, _ = make_reading_study(pairs=1, readers=5)
    example = _task2(study)
    for assignment in example.assignments.order_by("slot"):
        withdraw_assignment(assignment.public_id, actor=coordinator)

    example.refresh_from_db()
    assert (example.state, example.unrouted, example.unrouted_reason) == (ExampleState.WAITING, False, "")


def test_withdrawing_twice_is_refused(coordinator):
    study, _, _ = make_reading_study(pairs=1, readers=5)
    example = _task2(study)
    assignment = example.assignments.get(slot=1)
    show_assignment(Assignment.objects.select_related("example__study").get(pk=assignment.pk))
    withdraw_assignment(assignment.public_id, actor=coordinator)  # shown: kept as withdrawn

    with pytest.raises(QueueRefused) as refused:
        withdraw_assignment(assignment.public_id, actor=coordinator)
    assert str(refused.value) == "This assignment was already withdrawn."


def test_withdrawing_uses_a_fixed_number_of_queries(coordinator, django_assert_num_queries):
    study, _, _ = make_reading_study(pairs=1, readers=5)
    assignment = _task2(study).assignments.get(slot=1)

    # The assignment's example, locked; the assignment with its reader; the audit row; the
    # delete; the queue counter; the third-read check; and the transaction's savepoints.
    with django_assert_num_queries(WITHDRAW_QUERIES):
        withdraw_assignment(assignment.public_id, actor=coordinator)


WITHDRAW_QUERIES = 9


@pytest.mark.parametrize("voided_slot", [1, 2])
def test_a_third_read_given_by_hand_after_a_void_takes_the_freed_initial_slot(coordinator, voided_slot):
    # Three readers, a majority; the majority's rating in voided_slot is voided: the two left
    # disagree, nobody is eligible, and the freed slot is the one to fill. One reader beyond the six
    # the exam's items need: the third read's; every other reader has an item of the exam.
    study, _, _ = make_reading_study(pairs=1, readers_beyond_initial=1)
    example = _task2(study)
    ratings = {voided_slot: RatingChoice.EQUIVALENT, 3 - voided_slot: RatingChoice.MAJOR_DISCREPANCY}
    for slot in (1, 2):
        rate(example.assignments.get(slot=slot), ratings[slot], "" if slot == voided_slot else "Missed.")
    rate(example.assignments.get(slot=3), RatingChoice.EQUIVALENT, "")
    voided = example.assignments.get(slot=voided_slot).annotation
    void_annotation(voided.public_id, actor=coordinator, reason="Wrong case.")
    example.refresh_from_db()
    assert (example.state, example.unrouted) == (ExampleState.THIRD_READ, True)
    newcomer = _enrolled_directly(study)

    assignment = assign_example(example.public_id, newcomer, actor=coordinator)

    assert assignment.slot == voided_slot
    assert exams_given_twice(study) == {}


def test_nothing_is_given_by_hand_once_two_reads_agree(coordinator):
    study, readers, _ = make_reading_study(pairs=1, readers_beyond_initial=1)
    example = _task2(study)
    for assignment in example.assignments.order_by("slot"):
        rate(assignment, RatingChoice.EQUIVALENT, "")
    example.refresh_from_db()
    assert example.state == ExampleState.CONSENSUS
    spare = _free_reader(example, readers)

    with pytest.raises(QueueRefused, match="all the readers it needs"):
        assign_example(example.public_id, spare, actor=coordinator)
    assert example.assignments.count() == 2


# --- reassign_assignment -------------------------------------------------------------------


def test_reassigning_moves_an_initial_read_to_the_new_reader_in_the_same_slot(coordinator):
    study, readers, _ = make_reading_study(pairs=1, readers_beyond_initial=1)
    example = _task2(study)
    old = example.assignments.get(slot=2)
    newcomer = _free_reader(example, readers)

    new = reassign_assignment(old.public_id, newcomer, actor=coordinator)

    assert (new.example, new.reader, new.slot, new.status) == (example, newcomer, 2, AssignmentStatus.OPEN)
    assert not Assignment.objects.filter(pk=old.pk).exists()
    assert exams_given_twice(study) == {}
    withdrawn = AuditEvent.objects.get(action=AuditAction.WITHDRAWN)
    assert (withdrawn.subject, withdrawn.actor) == (old.reader, coordinator)
    assigned = AuditEvent.objects.get(action=AuditAction.ASSIGNED, subject=newcomer, example=example)
    assert assigned.actor == coordinator
    assert assigned.after == {"assignment": str(new.public_id), "slot": 2, "how": "by hand"}


def test_reassigning_a_third_read_keeps_it_in_slot_3(coordinator):
    study, readers, _ = make_reading_study(pairs=1)
    example = _task2(study)
    _disagree(example)
    old = example.assignments.get(slot=3)
    newcomer = _free_reader(example, readers)

    new = reassign_assignment(old.public_id, newcomer, actor=coordinator)

    assert (new.reader, new.slot) == (newcomer, 3)
    example.refresh_from_db()
    assert not example.unrouted


@pytest.mark.parametrize("who", ["has_the_example", "not_a_member", "has_the_other_version", "has_the_exams_task_2"])
def test_reassigning_to_a_refused_reader_changes_nothing(coordinator, who):
    study, _, _ = make_reading_study(pairs=1, readers_beyond_initial=1)
    example = _version(study, ReportType.ORIGINAL)
    old = example.assignments.get(slot=1)
    if who == "has_the_example":
        target = example.assignments.get(slot=2).reader
    elif who == "not_a_member":
        target = make_user(Role.READER)
    elif who == "has_the_other_version":
        target = _version(study, ReportType.ALTERNATIVE).assignments.first().reader
    else:
        target = _task2(study).assignments.first().reader
    before = set(example.assignments.values_list("pk", "reader_id", "slot", "status"))
    audit_rows = AuditEvent.objects.count()

    with pytest.raises(QueueRefused):
        reassign_assignment(old.public_id, target, actor=coordinator)

    still = Assignment.objects.get(pk=old.pk)
    assert (still.reader_id, still.slot, still.status, still.public_id) == (
        old.reader_id,
        1,
        AssignmentStatus.OPEN,
        old.public_id,
    )
    assert set(example.assignments.values_list("pk", "reader_id", "slot", "status")) == before
    assert AuditEvent.objects.count() == audit_rows


def test_a_refused_reassignment_of_a_third_read_leaves_it_routed(coordinator):
    study, _, _ = make_reading_study(pairs=1)
    example = _task2(study)
    _disagree(example)
    third = example.assignments.get(slot=3)
    first_reader = example.assignments.get(slot=1).reader

    with pytest.raises(QueueRefused):
        reassign_assignment(third.public_id, first_reader, actor=coordinator)

    assert Assignment.objects.filter(pk=third.pk, status=AssignmentStatus.OPEN).exists()
    example.refresh_from_db()
    assert not example.unrouted


def test_a_rated_assignment_cannot_be_reassigned(coordinator):
    study, readers, _ = make_reading_study(pairs=1, readers_beyond_initial=1)
    example = _task2(study)
    assignment = example.assignments.get(slot=1)
    rate(assignment, RatingChoice.EQUIVALENT, "")
    newcomer = _free_reader(example, readers)

    with pytest.raises(QueueRefused, match="has a rating"):
        reassign_assignment(assignment.public_id, newcomer, actor=coordinator)

    assert Assignment.objects.get(pk=assignment.pk).status == AssignmentStatus.DONE
    assert not Assignment.objects.filter(reader=newcomer, example=example).exists()


# --- add_study_member ----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("roles", "member_role"),
    [((), MemberRole.READER), ((Role.COORDINATOR,), MemberRole.READER), ((Role.READER,), MemberRole.ADJUDICATOR)],
)
def test_adding_a_member_requires_the_user_to_hold_the_role(coordinator, study, roles, member_role):
    user = make_user(*roles)

    with pytest.raises(QueueRefused, match="role"):
        add_study_member(study, user, member_role, actor=coordinator)

    assert not StudyMember.objects.filter(study=study).exists()
    assert not AuditEvent.objects.exists()


def test_adding_a_member_is_audited(coordinator, study, reader):
    member = add_study_member(study, reader, MemberRole.READER, actor=coordinator, max_assignments=40)

    assert (member.user, member.role, member.active, member.max_assignments) == (
        reader,
        MemberRole.READER,
        True,
        40,
    )
    event = AuditEvent.objects.get(action=AuditAction.MEMBER_ADDED)
    assert (event.study, event.actor, event.subject) == (study, coordinator, reader)
    assert event.before == {}
    assert event.after == {"role": MemberRole.READER, "active": True, "max_assignments": 40}


def test_re_activating_a_member_updates_the_cap_and_audits_the_change(coordinator, study, reader):
    old = StudyMember.objects.create(study=study, user=reader, role=MemberRole.READER, active=False, max_assignments=3)

    member = add_study_member(study, reader, MemberRole.READER, actor=coordinator, max_assignments=10)

    assert member.pk == old.pk
    assert StudyMember.objects.filter(study=study, user=reader).count() == 1
    member.refresh_from_db()
    assert (member.active, member.max_assignments) == (True, 10)
    event = AuditEvent.objects.get(action=AuditAction.MEMBER_CHANGED)
    assert event.before == {"active": False, "max_assignments": 3}
    assert event.after == {"role": MemberRole.READER, "active": True, "max_assignments": 10}
    assert not AuditEvent.objects.filter(action=AuditAction.MEMBER_ADDED).exists()


def test_re_activating_a_removed_reader_routes_the_examples_waiting_for_one(coordinator):
    # Four active readers, the fewest a pair needs: Task 2's third read has nobody (the other two
    # hold its texts in Task 1) until the fifth comes back.
    study, readers, _ = make_reading_study(pairs=1, readers=5, keep_versions_apart=False, assign=False)
    returning = readers[-1]
    StudyMember.objects.filter(study=study, user=returning).update(active=False)
    assign_readers(study, actor=coordinator)
    example = _task2(study)
    _disagree(example)
    assert example.unrouted

    add_study_member(study, returning, MemberRole.READER, actor=coordinator)

    example.refresh_from_db()
    assert not example.unrouted
    third = example.assignments.get(slot=3)
    assert third.reader == returning
    routed = AuditEvent.objects.get(action=AuditAction.THIRD_READ_ROUTED, example=example)
    assert (routed.actor, routed.subject) == (coordinator, returning)


def test_reassigning_keeps_the_slot_even_when_a_lower_one_is_free(coordinator):
    study, readers, _ = make_reading_study(pairs=1, readers_beyond_initial=1)
    example = _task2(study)
    withdraw_assignment(example.assignments.get(slot=1).public_id, actor=coordinator)
    old = example.assignments.get(slot=2)
    newcomer = _free_reader(example, readers)

    new = reassign_assignment(old.public_id, newcomer, actor=coordinator)

    assert new.slot == 2


@pytest.mark.parametrize("change", ["deactivated", "role removed"])
def test_it_refuses_an_enrolled_reader_who_is_no_longer_a_reader(coordinator, change):
    study, readers, _ = make_reading_study(pairs=1, readers=5, assign=False)
    reader = readers[0]
    if change == "deactivated":
        reader.is_active = False
        reader.save()
    else:
        reader.groups.clear()
    with pytest.raises(QueueRefused, match="not an active reader"):
        assign_example(_task2(study).public_id, reader, actor=coordinator)
    assert not Assignment.objects.filter(reader=reader).exists()
