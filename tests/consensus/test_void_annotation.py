"""void_annotation: a coordinator takes a stored rating back, and the example is routed again."""

import uuid
from datetime import timedelta

import pytest
from django.utils import timezone

from annotation.models import (
    Annotation,
    Assignment,
    AssignmentStatus,
    AuditAction,
    AuditEvent,
    Example,
    ExampleState,
    RatingChoice,
    Study,
    Task,
)
from consensus.models import Adjudication, AdjudicationStatus, ConsensusLabel, LabelSource
from consensus.services import (
    NoSuchWork,
    SubmissionRefused,
    settle_due_ratings,
    submit_adjudication,
    void_annotation,
)
from tests.factories import make_reading_study, rate
from tests.invariants import exams_given_twice

pytestmark = pytest.mark.django_db

EQUIVALENT, MINOR, MAJOR = RatingChoice.EQUIVALENT, RatingChoice.MINOR_DISCREPANCY, RatingChoice.MAJOR_DISCREPANCY


def _task2(study) -> Example:
    return Example.objects.get(study=study, task=Task.EQUIVALENCE)


def _open(example, slot: int) -> Assignment:
    return example.assignments.select_related("reader").get(slot=slot, status=AssignmentStatus.OPEN)


def _rate(example, slot: int, rating: str) -> Annotation:
    return rate(_open(example, slot), rating, "" if rating == EQUIVALENT else "A reason.").annotation


def _reads(example, *ratings: str) -> list[Annotation]:
    """Rate slots 1, 2 (and 3, routed after a disagreement) in turn."""
    return [_rate(example, slot, rating) for slot, rating in enumerate(ratings, start=1)]


def _void(annotation: Annotation, coordinator, reason: str = "Rated the wrong case.") -> Annotation:
    return void_annotation(annotation.public_id, actor=coordinator, reason=reason)


def _refreshed(example) -> Example:
    return Example.objects.get(pk=example.pk)


@pytest.mark.parametrize("reason", ["", "   ", "\n\t"])
def test_a_reason_is_required(coordinator, reason):
    study, _, _ = make_reading_study(pairs=1, readers=5)
    example = _task2(study)
    first, _ = _reads(example, EQUIVALENT, EQUIVALENT)

    with pytest.raises(SubmissionRefused) as refused:
        _void(first, coordinator, reason)

    assert (str(refused.value), refused.value.field) == ("Give a reason for voiding this rating.", "reason")
    first.refresh_from_db()
    assert first.voided_at is None
    assert ConsensusLabel.objects.filter(example=example).exists()
    assert not AuditEvent.objects.filter(action=AuditAction.VOIDED).exists()


def test_an_unknown_annotation_is_not_found(coordinator):
    with pytest.raises(NoSuchWork):
        void_annotation(uuid.uuid4(), actor=coordinator, reason="Gone.")


def test_a_voided_annotation_stays_in_the_database_marked_as_voided(coordinator):
    study, _, _ = make_reading_study(pairs=1, readers=5)
    first, _ = _reads(_task2(study), EQUIVALENT, EQUIVALENT)

    returned = _void(first, coordinator, "  Rated while the wrong prior was shown.  ")

    stored = Annotation.objects.get(pk=first.pk)
    assert returned.pk == stored.pk
    assert stored.is_voided
    assert stored.voided_at is not None
    assert stored.voided_by == coordinator
    assert stored.void_reason == "Rated while the wrong prior was shown."
    assert (stored.rating, stored.reader_id) == (first.rating, first.reader_id)
    assert Assignment.objects.get(pk=first.assignment_id).status == AssignmentStatus.VOIDED


def test_voiding_is_audited_with_the_rating_it_took_back(coordinator):
    study, _, _ = make_reading_study(pairs=1, readers=5)
    example = _task2(study)
    _, second = _reads(example, EQUIVALENT, EQUIVALENT)

    _void(second, coordinator, "Wrong case.")

    event = AuditEvent.objects.get(action=AuditAction.VOIDED)
    assert (event.study, event.example) == (study, example)
    assert event.actor == coordinator
    assert event.subject == second.reader
    assert event.before == {"annotation": str(second.public_id), "rating": EQUIVALENT}
    assert event.after == {"reason": "Wrong case."}


def test_voiding_twice_is_refused(coordinator):
    study, _, _ = make_reading_study(pairs=1, readers=5)
    first, _ = _reads(_task2(study), EQUIVALENT, EQUIVALENT)
    _void(first, coordinator, "First reason.")

    with pytest.raises(SubmissionRefused) as refused:
        _void(first, coordinator, "Second reason.")

    assert str(refused.value) == "This rating was already voided."

    assert Annotation.objects.get(pk=first.pk).void_reason == "First reason."
    assert AuditEvent.objects.filter(action=AuditAction.VOIDED).count() == 1


def test_voiding_one_of_two_agreeing_reads_reopens_the_example_for_a_new_reader(coordinator):
    # One reader beyond the six the exam's items need: the only one the refill may go to.
    study, _, _ = make_reading_study(pairs=1, readers_beyond_initial=1)
    example = _task2(study)
    first, second = _reads(example, EQUIVALENT, EQUIVALENT)
    assert ConsensusLabel.objects.filter(example=example).exists()

    _void(first, coordinator)

    example = _refreshed(example)
    assert (example.state, example.unrouted) == (ExampleState.WAITING, False)
    assert not ConsensusLabel.objects.filter(example=example).exists()
    withdrawn = AuditEvent.objects.get(action=AuditAction.CONSENSUS_WITHDRAWN, example=example)
    assert withdrawn.actor == coordinator
    assert withdrawn.before == {"rating": EQUIVALENT, "label_source": LabelSource.UNANIMOUS}
    # The freed slot went to somebody new, with no other item of the exam; the voided reader keeps
    # only their voided row.
    replacement = _open(example, 1)
    assert replacement.reader_id not in {first.reader_id, second.reader_id}
    assert exams_given_twice(study) == {}
    assert list(example.assignments.filter(reader=first.reader).values_list("status", flat=True)) == [
        AssignmentStatus.VOIDED
    ]
    assert example.assignments.active().count() == 2
    routed = AuditEvent.objects.get(action=AuditAction.ASSIGNED, example=example, subject=replacement.reader)
    assert routed.actor == coordinator


def test_the_voided_rating_no_longer_counts_towards_the_consensus(coordinator):
    study, _, _ = make_reading_study(pairs=1)
    example = _task2(study)
    first, _ = _reads(example, EQUIVALENT, EQUIVALENT)
    _void(first, coordinator)

    # Had the voided Equivalent still counted, this would be a 2-to-1 majority.
    _rate(example, 1, MAJOR)

    example = _refreshed(example)
    assert example.state == ExampleState.THIRD_READ
    assert not ConsensusLabel.objects.filter(example=example).exists()
    third = _open(example, 3)
    _rate(example, 3, MAJOR)
    consensus = ConsensusLabel.objects.get(example=example)
    assert (consensus.rating, consensus.label_source, consensus.n_annotations) == (MAJOR, LabelSource.MAJORITY, 3)
    readers = list(example.annotations.values_list("reader_id", flat=True))
    assert len(readers) == len(set(readers)) == 4
    assert third.reader_id != first.reader_id


def test_voiding_the_third_read_of_a_majority_routes_a_third_read_to_another_reader(coordinator):
    study, _, _ = make_reading_study(pairs=1)
    example = _task2(study)
    _, _, third = _reads(example, EQUIVALENT, MINOR, MINOR)
    assert ConsensusLabel.objects.get(example=example).label_source == LabelSource.MAJORITY

    _void(third, coordinator)

    example = _refreshed(example)
    assert example.state == ExampleState.THIRD_READ
    assert not example.unrouted
    assert not ConsensusLabel.objects.filter(example=example).exists()
    assert AuditEvent.objects.filter(action=AuditAction.CONSENSUS_WITHDRAWN, example=example).count() == 1
    new_third = _open(example, 3)
    earlier = set(example.annotations.values_list("reader_id", flat=True))
    assert new_third.reader_id not in earlier
    assert exams_given_twice(study) == {}
    assert AuditEvent.objects.get(action=AuditAction.THIRD_READ_ROUTED, subject=new_third.reader).actor == coordinator


def test_voiding_a_read_of_a_three_way_split_voids_the_open_adjudication_and_routes_again(coordinator):
    study, _, _ = make_reading_study(pairs=1)
    example = _task2(study)
    _, _, third = _reads(example, EQUIVALENT, MINOR, MAJOR)
    adjudication = Adjudication.objects.get(example=example, status=AdjudicationStatus.OPEN)

    _void(third, coordinator)

    adjudication.refresh_from_db()
    assert adjudication.status == AdjudicationStatus.VOIDED
    assert not example.adjudications.active().exists()
    event = AuditEvent.objects.get(action=AuditAction.WITHDRAWN, subject=adjudication.adjudicator)
    assert (event.actor, event.study, event.example) == (coordinator, study, example)
    assert event.before == {"adjudication": str(adjudication.public_id), "rating": ""}
    assert event.after == {"reason": "a rating it rested on was voided"}
    example = _refreshed(example)
    assert example.state == ExampleState.THIRD_READ
    assert _open(example, 3).reader_id not in set(example.annotations.values_list("reader_id", flat=True))


def test_voiding_a_read_of_an_adjudicated_split_withdraws_the_decision_and_routes_again(coordinator):
    study, _, _ = make_reading_study(pairs=1)
    example = _task2(study)
    first, _, _ = _reads(example, EQUIVALENT, MINOR, MAJOR)
    adjudication = Adjudication.objects.get(example=example)
    submit_adjudication(
        adjudicator=adjudication.adjudicator,
        adjudication_id=adjudication.public_id,
        rating=MINOR,
        rationale="Only the wording differs.",
        form_token=uuid.uuid4(),
    )
    assert ConsensusLabel.objects.get(example=example).label_source == LabelSource.ADJUDICATED

    _void(first, coordinator)

    adjudication.refresh_from_db()
    assert adjudication.status == AdjudicationStatus.VOIDED
    assert adjudication.rating == MINOR  # the decision is kept, as voided
    assert not ConsensusLabel.objects.filter(example=example).exists()
    withdrawn = AuditEvent.objects.get(action=AuditAction.CONSENSUS_WITHDRAWN, example=example)
    assert withdrawn.before == {"rating": MINOR, "label_source": LabelSource.ADJUDICATED}
    decision = AuditEvent.objects.get(action=AuditAction.WITHDRAWN, subject=adjudication.adjudicator)
    assert decision.before == {"adjudication": str(adjudication.public_id), "rating": MINOR}
    example = _refreshed(example)
    assert example.state == ExampleState.THIRD_READ
    # Minor and Major remain: one more reader, in the slot the voided read freed.
    replacement = example.assignments.get(status=AssignmentStatus.OPEN)
    assert replacement.slot == 1
    assert replacement.reader_id not in set(example.annotations.values_list("reader_id", flat=True))


def test_with_nobody_eligible_the_example_waits_as_unrouted(coordinator):
    study, _, _ = make_reading_study(pairs=1, readers=2, keep_versions_apart=False)
    example = _task2(study)
    first, _ = _reads(example, EQUIVALENT, EQUIVALENT)

    _void(first, coordinator)

    example = _refreshed(example)
    assert (example.state, example.unrouted) == (ExampleState.WAITING, True)
    assert example.assignments.active().count() == 1
    assert AuditEvent.objects.filter(action=AuditAction.UNROUTED, example=example).count() == 1


def test_voiding_an_initial_read_during_a_third_read_withdraws_the_third_read(coordinator):
    study, _, _ = make_reading_study(pairs=1)
    example = _task2(study)
    first, _ = _reads(example, EQUIVALENT, MAJOR)
    third = _open(example, 3)

    _void(first, coordinator)

    # One rating is left: the disagreement is gone, so the third read leaves its queue and
    # the freed initial slot gets a reader instead.
    assert not Assignment.objects.filter(pk=third.pk).exists()
    event = AuditEvent.objects.get(action=AuditAction.WITHDRAWN, subject=third.reader)
    assert (event.actor, event.example) == (coordinator, example)
    assert event.after == {"reason": "its disagreement was voided", "shown": False}
    example = _refreshed(example)
    assert example.state == ExampleState.WAITING
    assert not example.assignments.filter(slot=3).exists()
    replacement = _open(example, 1)
    assert replacement.reader_id != first.reader_id
    assert example.assignments.active().count() == 2


def test_voiding_an_initial_read_while_the_third_rating_is_in_its_undo_window_waits_for_that_rating(coordinator):
    study, _, _ = make_reading_study(pairs=1)
    example = _task2(study)
    first, second = _reads(example, EQUIVALENT, MAJOR)
    # The third reader rates in a study that now keeps ratings open to an undo for two minutes.
    Study.objects.filter(pk=study.pk).update(undo_window_seconds=120)
    third = _rate(example, 3, MAJOR)
    assert third.settled_at is None

    _void(first, coordinator)

    # The third rating still stands (it may yet settle): nobody new is given the freed slot.
    example = _refreshed(example)
    assert (example.state, example.unrouted) == (ExampleState.WAITING, False)
    assert not example.assignments.open().exists()
    assert example.assignments.active().count() == 2
    assert not Assignment.objects.filter(pk=third.assignment_id, status=AssignmentStatus.WITHDRAWN).exists()

    settle_due_ratings(now=timezone.now() + timedelta(seconds=121))

    # The second and third ratings agree.
    label = ConsensusLabel.objects.get(example=example)
    assert (label.rating, label.label_source, label.n_annotations) == (MAJOR, LabelSource.UNANIMOUS, 2)
    assert _refreshed(example).state == ExampleState.CONSENSUS
    assert {a.pk for a in Annotation.objects.filter(voided_at__isnull=True)} == {second.pk, third.pk}


def test_a_third_read_is_withdrawn_when_its_disagreement_is_voided_after_earlier_voids(coordinator):
    # Two ratings voided in all, one valid left: the third read has no disagreement to settle.
    study, _, _ = make_reading_study(pairs=1)
    example = _task2(study)
    first, second = _reads(example, EQUIVALENT, EQUIVALENT)
    _void(first, coordinator)
    example = _refreshed(example)
    _rate(example, 1, MAJOR)
    third = _open(example, 3)

    _void(second, coordinator)

    assert not Assignment.objects.filter(pk=third.pk).exists()
    example = _refreshed(example)
    assert example.state == ExampleState.WAITING
    assert example.assignments.active().count() == 2


def test_voiding_a_task_1_read_never_gives_the_example_back_to_its_reader(coordinator):
    study, _, _ = make_reading_study(pairs=1, readers_beyond_initial=1)
    example = Example.objects.filter(study=study, task=Task.REALISM).order_by("pk").first()
    first = rate(_open(example, 1), RatingChoice.REALISTIC, "").annotation
    rate(_open(example, 2), RatingChoice.REALISTIC, "")

    _void(first, coordinator)

    replacement = _open(example, 1)
    assert replacement.reader_id != first.reader_id
    assert example.assignments.filter(reader=first.reader).count() == 1
    assert exams_given_twice(study) == {}


def test_voiding_the_only_rating_while_the_other_read_is_open_routes_exactly_one_new_reader(coordinator):
    study, _, _ = make_reading_study(pairs=1, readers_beyond_initial=1)
    example = _task2(study)
    only = _rate(example, 1, EQUIVALENT)
    still_open = _open(example, 2)

    _void(only, coordinator)

    example = _refreshed(example)
    assert example.state == ExampleState.WAITING
    open_reads = list(example.assignments.open().order_by("slot"))
    assert [(a.slot, a.pk == still_open.pk) for a in open_reads] == [(1, False), (2, True)]
    assert open_reads[0].reader_id not in {only.reader_id, still_open.reader_id}


def test_voiding_uses_a_fixed_number_of_queries(coordinator):
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    counts = []
    for pairs in (1, 20):
        study, _, _ = make_reading_study(pairs=pairs, readers_beyond_initial=1)
        example = Example.objects.filter(study=study, task=Task.EQUIVALENCE).order_by("pk").first()
        first, _ = _reads(example, EQUIVALENT, EQUIVALENT)
        with CaptureQueriesContext(connection) as queries:
            _void(first, coordinator)
        counts.append(len(queries))
    # Its rating and reader in one query; a refill read routed; the audit rows.
    assert counts == [VOID_QUERIES, VOID_QUERIES], counts


def test_voiding_under_an_adjudication_uses_a_fixed_number_of_queries(coordinator, django_assert_num_queries):
    study, _, _ = make_reading_study(pairs=1)
    _, _, third = _reads(_task2(study), EQUIVALENT, MINOR, MAJOR)

    # As above, and the adjudication withdrawn with its adjudicator in one query.
    with django_assert_num_queries(VOID_UNDER_ADJUDICATION_QUERIES):
        _void(third, coordinator)


def test_voiding_during_a_third_read_uses_a_fixed_number_of_queries(coordinator, django_assert_num_queries):
    study, _, _ = make_reading_study(pairs=1)
    first, _ = _reads(_task2(study), EQUIVALENT, MAJOR)

    # As above, and the open third read withdrawn with its reader in one query.
    with django_assert_num_queries(VOID_DURING_THIRD_READ_QUERIES):
        _void(first, coordinator)


VOID_QUERIES = 23
VOID_UNDER_ADJUDICATION_QUERIES = 22
VOID_DURING_THIRD_READ_QUERIES = 24
