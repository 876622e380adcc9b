"""submit_annotation, and the database constraints that hold its rules should anything slip past."""

import uuid
from datetime import timedelta

import pytest
from django.db import IntegrityError, transaction
from django.utils import timezone

from annotation.models import (
    Annotation,
    Assignment,
    AssignmentStatus,
    AuditAction,
    AuditEvent,
    Example,
    MemberRole,
    RatingChoice,
    ReportType,
    StudyMember,
    Task,
)
from consensus.assignment import withdraw_assignment
from consensus.models import Adjudication, AdjudicationStatus
from consensus.services import (
    AlreadySubmitted,
    NoSuchWork,
    SubmissionRefused,
    submit_annotation,
    validate_rating,
    void_annotation,
)
from tests.factories import make_reading_study, rate

pytestmark = pytest.mark.django_db

NEEDS_RATIONALE = [
    RatingChoice.MINOR_ISSUES,
    RatingChoice.MAJOR_ISSUES,
    RatingChoice.MINOR_DISCREPANCY,
    RatingChoice.MAJOR_DISCREPANCY,
]


@pytest.fixture
def reading():
    study, _, _ = make_reading_study(pairs=1, readers=4)
    return study


def _assignment(study, task: str, *, slot: int = 1) -> Assignment:
    example = Example.objects.filter(study=study, task=task).order_by("pk").first()
    return example.assignments.select_related("reader", "example").get(slot=slot)


def _for_rating(study, rating: str) -> Assignment:
    task = (
        Task.REALISM
        if rating in (RatingChoice.REALISTIC, RatingChoice.MINOR_ISSUES, RatingChoice.MAJOR_ISSUES)
        else Task.EQUIVALENCE
    )
    return _assignment(study, task)


def _submit(assignment: Assignment, rating: str, rationale: str = "A reason.", *, token=None, reader=None):
    return submit_annotation(
        reader=reader or assignment.reader,
        assignment_id=assignment.public_id,
        rating=rating,
        rationale=rationale,
        form_token=token or uuid.uuid4(),
    )


def _nothing_stored(assignment: Assignment) -> None:
    assert not Annotation.objects.filter(assignment=assignment).exists()
    assert Assignment.objects.get(pk=assignment.pk).status == AssignmentStatus.OPEN
    assert not AuditEvent.objects.filter(action=AuditAction.SUBMITTED).exists()


# --- labels and rationales ---------------------------------------------------------------------


@pytest.mark.parametrize(
    ("task", "rating"),
    [
        (Task.EQUIVALENCE, RatingChoice.REALISTIC),
        (Task.EQUIVALENCE, RatingChoice.MAJOR_ISSUES),
        (Task.REALISM, RatingChoice.EQUIVALENT),
        (Task.REALISM, RatingChoice.MINOR_DISCREPANCY),
        (Task.REALISM, "excellent"),
        (Task.EQUIVALENCE, ""),
    ],
)
def test_the_label_must_belong_to_the_task(reading, task, rating):
    assignment = _assignment(reading, task)
    with pytest.raises(SubmissionRefused) as refused:
        _submit(assignment, rating)
    assert refused.value.field == "rating"
    assert not isinstance(refused.value, AlreadySubmitted)
    _nothing_stored(assignment)


@pytest.mark.parametrize("rating", NEEDS_RATIONALE)
@pytest.mark.parametrize("rationale", ["", "   ", " \n\t "])
def test_a_rationale_is_required_for_every_label_but_realistic_and_equivalent(reading, rating, rationale):
    assignment = _for_rating(reading, rating)
    with pytest.raises(SubmissionRefused, match="rationale is required") as refused:
        _submit(assignment, rating, rationale)
    assert refused.value.field == "rationale"
    _nothing_stored(assignment)


@pytest.mark.parametrize("rating", [RatingChoice.REALISTIC, RatingChoice.EQUIVALENT])
def test_the_rationale_is_optional_for_realistic_and_equivalent(reading, rating):
    assignment = _for_rating(reading, rating)
    result = _submit(assignment, rating, "  ")
    assert result.created
    assert (result.annotation.rating, result.annotation.rationale) == (rating, "")


@pytest.mark.parametrize("rating", [RatingChoice.REALISTIC, *NEEDS_RATIONALE])
def test_the_stored_rationale_is_stripped(reading, rating):
    assignment = _for_rating(reading, rating)
    _submit(assignment, rating, "\n  The impression repeats the findings.  \t\n")
    annotation = Annotation.objects.get(assignment=assignment)
    assert annotation.rationale == "The impression repeats the findings."


def test_a_rating_is_stored_with_its_assignment_and_the_assignment_is_done(reading):
    assignment = _assignment(reading, Task.EQUIVALENCE)
    Assignment.objects.filter(pk=assignment.pk).update(report_a_type=ReportType.ALTERNATIVE)

    result = _submit(assignment, RatingChoice.MINOR_DISCREPANCY, "Terminology differs.")

    annotation = Annotation.objects.get()
    assert result.created
    assert result.annotation == annotation
    assert (annotation.assignment_id, annotation.example_id, annotation.reader_id, annotation.task) == (
        assignment.pk,
        assignment.example_id,
        assignment.reader_id,
        Task.EQUIVALENCE,
    )
    assert annotation.report_a_type == ReportType.ALTERNATIVE
    assert annotation.voided_at is None
    assert Assignment.objects.get(pk=assignment.pk).status == AssignmentStatus.DONE


def test_an_item_rated_before_it_was_shown_keeps_the_order_drawn_for_the_rating(reading):
    # An API client that kept the item from an earlier session rates it without fetching it.
    assignment = _assignment(reading, Task.EQUIVALENCE)
    assert assignment.report_a_type == ""

    annotation = _submit(assignment, RatingChoice.EQUIVALENT, "").annotation

    assert annotation.report_a_type in (ReportType.ORIGINAL, ReportType.ALTERNATIVE)
    assert Assignment.objects.get(pk=assignment.pk).report_a_type == annotation.report_a_type


@pytest.mark.parametrize(
    "before_undo_ms, resumed, seconds, expected",
    [(0, False, 0, 0), (0, False, 95.5, 95_500), (0, False, -2, 0), (4_000, True, 12.25, 16_250)],
)
def test_the_time_on_task_is_counted_to_the_millisecond(before_undo_ms, resumed, seconds, expected):
    from consensus.services import _time_on_task

    started = timezone.now()
    assignment = Assignment(
        first_shown_at=started - timedelta(hours=1) if resumed else started,
        resumed_at=started if resumed else None,
        time_before_undo_ms=before_undo_ms,
    )

    assert _time_on_task(assignment, started + timedelta(seconds=seconds)) == expected


# --- repeated and concurrent submissions --------------------------------------------------------


def test_the_same_form_token_twice_stores_one_annotation_and_returns_the_first(reading):
    assignment = _assignment(reading, Task.REALISM)
    token = uuid.uuid4()
    first = _submit(assignment, RatingChoice.MINOR_ISSUES, "Odd phrasing.", token=token)

    again = _submit(assignment, RatingChoice.MAJOR_ISSUES, "Changed my mind.", token=token)

    assert first.created
    assert not again.created
    assert again.annotation.pk == first.annotation.pk
    stored = Annotation.objects.get()
    assert (stored.rating, stored.rationale) == (RatingChoice.MINOR_ISSUES, "Odd phrasing.")
    assert AuditEvent.objects.filter(action=AuditAction.SUBMITTED).count() == 1


def test_a_second_submission_of_a_rated_assignment_is_refused_and_the_first_kept(reading):
    assignment = _assignment(reading, Task.REALISM)
    first = _submit(assignment, RatingChoice.REALISTIC, "")
    stored_before = Annotation.objects.values().get()

    with pytest.raises(AlreadySubmitted) as refused:
        _submit(assignment, RatingChoice.MAJOR_ISSUES, "Actually incoherent.")

    assert refused.value.annotation == first.annotation
    assert refused.value.annotation.rating == RatingChoice.REALISTIC
    assert isinstance(refused.value, SubmissionRefused)
    # Ratings are final: no second row, and the first is unchanged.
    assert Annotation.objects.values().get() == stored_before
    assert AuditEvent.objects.filter(action=AuditAction.SUBMITTED).count() == 1


def test_a_form_token_used_for_another_assignment_is_refused():
    # A reader gets at most one item of an exam: one with a Task 1 and a Task 2 item needs two exams.
    study, _, _ = make_reading_study(pairs=2, readers=6)
    task2 = next(
        a
        for a in Assignment.objects.filter(study=study, task=Task.EQUIVALENCE).select_related("reader", "example")
        if Assignment.objects.filter(reader=a.reader, task=Task.REALISM).exists()
    )
    task1 = Assignment.objects.select_related("reader", "example").get(reader=task2.reader, task=Task.REALISM)
    assert task1.example.pair.source_study_id != task2.example.pair.source_study_id
    token = uuid.uuid4()
    _submit(task1, RatingChoice.REALISTIC, "", token=token)

    with pytest.raises(SubmissionRefused) as refused:
        _submit(task2, RatingChoice.EQUIVALENT, "", token=token)

    assert str(refused.value) == "This form was already used for another example. Reload the page."

    assert Assignment.objects.get(pk=task2.pk).status == AssignmentStatus.OPEN
    assert not Annotation.objects.filter(assignment=task2).exists()
    assert Annotation.objects.count() == 1


def test_another_readers_assignment_is_not_found(reading):
    assignment = _assignment(reading, Task.EQUIVALENCE, slot=1)
    someone_else = _assignment(reading, Task.EQUIVALENCE, slot=2).reader

    with pytest.raises(NoSuchWork):
        _submit(assignment, RatingChoice.EQUIVALENT, "", reader=someone_else)

    _nothing_stored(assignment)


def test_a_withdrawn_assignment_is_not_found(reading, coordinator):
    assignment = _assignment(reading, Task.EQUIVALENCE)
    withdraw_assignment(assignment.public_id, actor=coordinator)

    with pytest.raises(NoSuchWork):
        _submit(assignment, RatingChoice.EQUIVALENT, "")

    assert not Annotation.objects.exists()


def test_a_voided_assignment_is_not_found(reading, coordinator):
    assignment = _assignment(reading, Task.EQUIVALENCE)
    rate(assignment, RatingChoice.EQUIVALENT, "")
    void_annotation(assignment.annotation.public_id, actor=coordinator, reason="Wrong case.")

    with pytest.raises(NoSuchWork):
        _submit(assignment, RatingChoice.MAJOR_DISCREPANCY, "Second try.")

    assert Annotation.objects.count() == 1


def test_an_unknown_assignment_is_not_found(reading, reader):
    with pytest.raises(NoSuchWork):
        submit_annotation(
            reader=reader,
            assignment_id=uuid.uuid4(),
            rating=RatingChoice.REALISTIC,
            rationale="",
            form_token=uuid.uuid4(),
        )


# --- what is recorded ---------------------------------------------------------------------------


def test_the_duration_is_measured_from_when_the_example_was_first_shown(reading):
    assignment = _assignment(reading, Task.REALISM)
    Assignment.objects.filter(pk=assignment.pk).update(first_shown_at=timezone.now() - timedelta(seconds=90))

    before = timezone.now()
    annotation = _submit(assignment, RatingChoice.REALISTIC, "").annotation
    elapsed_ms = (timezone.now() - before).total_seconds() * 1000

    assert 90_000 <= annotation.duration_ms <= 90_000 + elapsed_ms + 1000
    assert Annotation.objects.get().duration_ms == annotation.duration_ms


def test_without_a_first_shown_time_the_duration_is_empty(reading):
    assignment = _assignment(reading, Task.REALISM)
    assert assignment.first_shown_at is None
    _submit(assignment, RatingChoice.REALISTIC, "")
    assert Annotation.objects.get().duration_ms is None


def test_a_submission_is_audited(reading):
    assignment = _assignment(reading, Task.REALISM, slot=2)
    _submit(assignment, RatingChoice.MAJOR_ISSUES, "Incoherent impression.")

    event = AuditEvent.objects.get(action=AuditAction.SUBMITTED)
    assert (event.study, event.example_id) == (reading, assignment.example_id)
    assert event.actor == event.subject == assignment.reader
    assert event.after == {"assignment": str(assignment.public_id), "slot": 2, "rating": RatingChoice.MAJOR_ISSUES}


# --- the same rules in the database --------------------------------------------------------------


def _annotation(assignment: Assignment, **fields) -> Annotation:
    values = {
        "assignment": assignment,
        "example": assignment.example,
        "reader": assignment.reader,
        "task": assignment.example.task,
        "rating": RatingChoice.REALISTIC if assignment.example.task == Task.REALISM else RatingChoice.EQUIVALENT,
        "rationale": "",
        "form_token": uuid.uuid4(),
    }
    values.update(fields)
    return Annotation.objects.create(**values)


def _refused_by_the_database(create) -> None:
    with pytest.raises(IntegrityError), transaction.atomic():
        create()


@pytest.mark.parametrize(
    ("task", "rating"),
    [
        (Task.REALISM, RatingChoice.EQUIVALENT),
        (Task.EQUIVALENCE, RatingChoice.MAJOR_ISSUES),
        (Task.REALISM, "excellent"),
    ],
)
def test_the_database_refuses_an_annotation_whose_rating_does_not_fit_its_task(reading, task, rating):
    assignment = _assignment(reading, task)
    _refused_by_the_database(lambda: _annotation(assignment, rating=rating, rationale="Why."))
    assert not Annotation.objects.exists()


@pytest.mark.parametrize("rating", NEEDS_RATIONALE)
def test_the_database_refuses_an_annotation_without_a_rationale_unless_realistic_or_equivalent(reading, rating):
    assignment = _for_rating(reading, rating)
    _refused_by_the_database(lambda: _annotation(assignment, rating=rating, rationale=""))
    _annotation(assignment, rating=rating, rationale="Why.")
    assert Annotation.objects.count() == 1


def test_the_database_keeps_one_annotation_per_example_and_reader(reading):
    first = _assignment(reading, Task.EQUIVALENCE, slot=1)
    second = _assignment(reading, Task.EQUIVALENCE, slot=2)
    _annotation(first)
    # Another assignment of the same example, recorded as the same reader's.
    _refused_by_the_database(lambda: _annotation(second, reader=first.reader))
    assert Annotation.objects.count() == 1


def test_the_database_keeps_one_annotation_per_form_token(reading):
    token = uuid.uuid4()
    _annotation(_assignment(reading, Task.EQUIVALENCE, slot=1), form_token=token)
    _refused_by_the_database(lambda: _annotation(_assignment(reading, Task.EQUIVALENCE, slot=2), form_token=token))
    assert Annotation.objects.count() == 1


def _outsiders(example: Example) -> list[int]:
    """Readers of the study who have no assignment on the example."""
    outsiders = list(
        Assignment.objects.exclude(reader__in=example.assignments.values("reader"))
        .order_by("reader")
        .values_list("reader", flat=True)
        .distinct()
    )
    assert len(outsiders) >= 2
    return outsiders


@pytest.mark.parametrize("status", [AssignmentStatus.OPEN, AssignmentStatus.DONE])
def test_the_database_keeps_one_active_assignment_per_example_and_slot(reading, status):
    example = Example.objects.get(study=reading, task=Task.EQUIVALENCE)
    taken = example.assignments.get(slot=1)
    Assignment.objects.filter(pk=taken.pk).update(status=status)
    outsider = _outsiders(example)[0]
    _refused_by_the_database(lambda: Assignment.objects.create(example=example, reader_id=outsider, slot=1))

    # A voided assignment frees its slot.
    Assignment.objects.filter(pk=taken.pk).update(status=AssignmentStatus.VOIDED)
    Assignment.objects.create(example=example, reader_id=outsider, slot=1)
    assert example.assignments.filter(slot=1).count() == 2


def test_the_database_keeps_one_active_third_read_per_example(reading):
    example = Example.objects.get(study=reading, task=Task.EQUIVALENCE)
    outsiders = _outsiders(example)
    third = Assignment.objects.create(example=example, reader_id=outsiders[0], slot=3)
    _refused_by_the_database(lambda: Assignment.objects.create(example=example, reader_id=outsiders[1], slot=3))

    Assignment.objects.filter(pk=third.pk).update(status=AssignmentStatus.VOIDED)
    Assignment.objects.create(example=example, reader_id=outsiders[1], slot=3)
    assert example.assignments.active().filter(slot=3).count() == 1


def test_the_database_keeps_one_active_adjudication_per_example(reading):
    example = Example.objects.get(study=reading, task=Task.EQUIVALENCE)
    adjudicator = StudyMember.objects.get(study=reading, role=MemberRole.ADJUDICATOR).user
    first = Adjudication.objects.create(example=example, adjudicator=adjudicator, task=example.task)
    _refused_by_the_database(
        lambda: Adjudication.objects.create(example=example, adjudicator=adjudicator, task=example.task)
    )
    done = {"status": AdjudicationStatus.DONE, "rating": RatingChoice.EQUIVALENT, "rationale": "Same findings."}
    Adjudication.objects.filter(pk=first.pk).update(**done)
    _refused_by_the_database(
        lambda: Adjudication.objects.create(example=example, adjudicator=adjudicator, task=example.task)
    )

    Adjudication.objects.filter(pk=first.pk).update(status=AdjudicationStatus.VOIDED)
    Adjudication.objects.create(example=example, adjudicator=adjudicator, task=example.task)
    assert example.adjudications.active().count() == 1


@pytest.mark.parametrize(
    ("task", "labels"),
    [
        (Task.REALISM, "Realistic, Minor Issues, Major Issues"),
        (Task.EQUIVALENCE, "Equivalent, Minor Discrepancy, Major Discrepancy"),
    ],
)
def test_a_rating_of_another_task_is_refused_naming_the_field_and_the_choices(task, labels):
    with pytest.raises(SubmissionRefused) as refused:
        validate_rating(task, "not-a-rating", "Because.")

    assert str(refused.value) == f"Choose one of: {labels}."
    assert refused.value.field == "rating"


# The atomic block's savepoint, its rollback and release, and the stored rating with its item.
QUERIES_TO_ANSWER_A_LOST_RACE = 4


# --- What a submit does when a concurrent one got there first ---------------------------------------
# Two requests race only on PostgreSQL, and then rarely in the window these branches answer; here the
# race's outcome is made to happen, to check the answer.


def test_a_concurrent_request_that_stored_the_same_form_first_is_answered_with_its_rating(reading, monkeypatch):
    from consensus import services

    assignment = _assignment(reading, Task.EQUIVALENCE)
    token = uuid.uuid4()
    stored = _submit(assignment, RatingChoice.EQUIVALENT, "", token=token).annotation

    def lost_the_race(*args):
        raise IntegrityError("duplicate key value violates unique constraint (form_token)")

    monkeypatch.setattr(services, "_store_annotation", lost_the_race)
    again = _submit(assignment, RatingChoice.EQUIVALENT, "", token=token)

    assert (again.annotation, again.created) == (stored, False)


def test_a_submit_starts_again_when_another_tab_moved_the_unsettled_rating(reading, monkeypatch):
    from consensus import services

    assignment = _assignment(reading, Task.EQUIVALENCE)
    store, calls = services._store_annotation, []

    def moved_once(*args):
        calls.append(args)
        if len(calls) == 1:
            raise services._UnsettledRatingMoved
        return store(*args)

    monkeypatch.setattr(services, "_store_annotation", moved_once)
    result = _submit(assignment, RatingChoice.EQUIVALENT, "")

    assert (result.created, len(calls)) == (True, 2)


def test_the_answer_to_a_lost_race_reads_the_stored_rating_and_its_item_in_one_query(
    reading, monkeypatch, django_assert_num_queries
):
    from consensus import services

    assignment = _assignment(reading, Task.EQUIVALENCE)
    token = uuid.uuid4()
    _submit(assignment, RatingChoice.EQUIVALENT, "", token=token)

    def lost_the_race(*args):
        raise IntegrityError("duplicate key value violates unique constraint (form_token)")

    monkeypatch.setattr(services, "_store_annotation", lost_the_race)
    with django_assert_num_queries(QUERIES_TO_ANSWER_A_LOST_RACE):
        _submit(assignment, RatingChoice.EQUIVALENT, "", token=token)


def test_a_submit_whose_unsettled_rating_keeps_moving_is_refused_after_three_tries(reading, monkeypatch):
    from consensus import services

    assignment = _assignment(reading, Task.EQUIVALENCE)
    calls = []

    def always_moved(*args):
        calls.append(args)
        raise services._UnsettledRatingMoved

    monkeypatch.setattr(services, "_store_annotation", always_moved)
    with pytest.raises(SubmissionRefused) as refused:
        _submit(assignment, RatingChoice.EQUIVALENT, "")

    assert str(refused.value) == (
        "Your rating could not be stored: another of your tabs was saving at once. Submit again."
    )
    assert len(calls) == services.SUBMIT_ATTEMPTS == 3
    assert not Annotation.objects.filter(assignment=assignment).exists()


@pytest.mark.parametrize("failures, stored", [(2, True), (3, False)])
def test_a_submit_refused_by_the_one_unsettled_rating_rule_is_tried_three_times(reading, monkeypatch, failures, stored):
    # Another tab of the reader stored its unsettled rating first: the database refuses this one.
    from consensus import services

    assignment = _assignment(reading, Task.EQUIVALENCE)
    store, calls = services._store_annotation, []

    def refused(*args):
        calls.append(args)
        if len(calls) <= failures:
            raise IntegrityError("one unsettled rating per reader")
        return store(*args)

    monkeypatch.setattr(services, "_store_annotation", refused)
    if stored:
        assert _submit(assignment, RatingChoice.EQUIVALENT, "").created
    else:
        with pytest.raises(IntegrityError):
            _submit(assignment, RatingChoice.EQUIVALENT, "")
    assert len(calls) == min(failures + 1, services.SUBMIT_ATTEMPTS)
