"""submit_adjudication: the adjudicator's final rating of a three-way split."""

import uuid

import pytest
from django.db import IntegrityError, transaction

from annotation.models import AuditAction, AuditEvent, Example, ExampleState, MemberRole, RatingChoice, Task
from consensus.models import Adjudication, AdjudicationStatus, ConsensusLabel, LabelSource
from consensus.services import (
    AlreadySubmitted,
    NoSuchWork,
    SubmissionRefused,
    submit_adjudication,
    void_annotation,
)
from tests.factories import make_reading_study, rate

pytestmark = pytest.mark.django_db

SPLITS = {
    Task.REALISM: (RatingChoice.REALISTIC, RatingChoice.MINOR_ISSUES, RatingChoice.MAJOR_ISSUES),
    Task.EQUIVALENCE: (RatingChoice.EQUIVALENT, RatingChoice.MINOR_DISCREPANCY, RatingChoice.MAJOR_DISCREPANCY),
}


def _three_way_split(task: str = Task.EQUIVALENCE, *, adjudicators: int = 2) -> Adjudication:
    """An example whose three reads all differ, and the open adjudication routed for it."""
    # The default readers: enough for a third reader with no other item of the exam.
    study, _, _ = make_reading_study(pairs=1, adjudicators=adjudicators)
    example = Example.objects.filter(study=study, task=task).order_by("pk").first()
    for rating in SPLITS[task]:
        assignment = example.assignments.open().select_related("reader").order_by("slot").first()
        rate(assignment, rating, "" if rating in (RatingChoice.REALISTIC, RatingChoice.EQUIVALENT) else "A reason.")
    return Adjudication.objects.select_related("adjudicator", "example").get(example=example)


def _decide(adjudication: Adjudication, rating: str, rationale: str = "Settled.", *, token=None, adjudicator=None):
    return submit_adjudication(
        adjudicator=adjudicator or adjudication.adjudicator,
        adjudication_id=adjudication.public_id,
        rating=rating,
        rationale=rationale,
        form_token=token or uuid.uuid4(),
    )


def _undecided(adjudication: Adjudication) -> None:
    stored = Adjudication.objects.get(pk=adjudication.pk)
    assert (stored.status, stored.rating, stored.rationale, stored.form_token) == (
        AdjudicationStatus.OPEN,
        "",
        "",
        None,
    )
    assert not ConsensusLabel.objects.filter(example=adjudication.example).exists()
    assert not AuditEvent.objects.filter(action=AuditAction.ADJUDICATED).exists()


@pytest.mark.parametrize("task", Task.values)
@pytest.mark.parametrize("rationale", ["", "   ", "\n\t"])
def test_a_rationale_is_always_required_even_for_realistic_or_equivalent(task, rationale):
    adjudication = _three_way_split(task)
    for rating in SPLITS[task]:
        with pytest.raises(SubmissionRefused, match="rationale is required") as refused:
            _decide(adjudication, rating, rationale)
        assert refused.value.field == "rationale"
    _undecided(adjudication)


@pytest.mark.parametrize(
    ("task", "rating"),
    [
        (Task.REALISM, RatingChoice.EQUIVALENT),
        (Task.REALISM, RatingChoice.MAJOR_DISCREPANCY),
        (Task.EQUIVALENCE, RatingChoice.REALISTIC),
        (Task.EQUIVALENCE, RatingChoice.MINOR_ISSUES),
        (Task.EQUIVALENCE, "undecided"),
    ],
)
def test_the_label_must_fit_the_task(task, rating):
    adjudication = _three_way_split(task)
    with pytest.raises(SubmissionRefused) as refused:
        _decide(adjudication, rating)
    assert refused.value.field == "rating"
    _undecided(adjudication)


@pytest.mark.parametrize("task", Task.values)
def test_the_decision_becomes_the_adjudicated_consensus_of_three(task):
    adjudication = _three_way_split(task)
    rating = SPLITS[task][0]

    decided = _decide(adjudication, rating, "  Reads as routine practice.  ")

    assert decided.pk == adjudication.pk
    stored = Adjudication.objects.get(pk=adjudication.pk)
    assert (stored.status, stored.rating, stored.rationale) == (
        AdjudicationStatus.DONE,
        rating,
        "Reads as routine practice.",
    )
    assert stored.decided_at is not None
    consensus = ConsensusLabel.objects.get(example=adjudication.example)
    assert (consensus.task, consensus.rating, consensus.label_source, consensus.n_annotations) == (
        task,
        rating,
        LabelSource.ADJUDICATED,
        3,
    )
    assert Example.objects.get(pk=adjudication.example_id).state == ExampleState.CONSENSUS
    # The adjudicator's rating is not one of the individual annotations.
    assert adjudication.example.annotations.count() == 3


def test_a_decision_is_audited():
    adjudication = _three_way_split()

    _decide(adjudication, RatingChoice.MINOR_DISCREPANCY, "Only the wording differs.")

    event = AuditEvent.objects.get(action=AuditAction.ADJUDICATED)
    assert event.example == adjudication.example
    assert event.actor == event.subject == adjudication.adjudicator
    assert event.after == {"adjudication": str(adjudication.public_id), "rating": RatingChoice.MINOR_DISCREPANCY}
    consensus_event = AuditEvent.objects.get(action=AuditAction.CONSENSUS, example=adjudication.example)
    assert consensus_event.after["label_source"] == LabelSource.ADJUDICATED


def test_the_same_form_token_twice_gives_the_same_result_and_one_decision():
    adjudication = _three_way_split()
    token = uuid.uuid4()
    first = _decide(adjudication, RatingChoice.MINOR_DISCREPANCY, "Only the wording differs.", token=token)

    again = _decide(adjudication, RatingChoice.MAJOR_DISCREPANCY, "Changed my mind.", token=token)

    assert again.pk == first.pk
    assert (again.rating, again.rationale) == (RatingChoice.MINOR_DISCREPANCY, "Only the wording differs.")
    stored = Adjudication.objects.get(pk=adjudication.pk)
    assert (stored.rating, stored.form_token) == (RatingChoice.MINOR_DISCREPANCY, token)
    assert AuditEvent.objects.filter(action=AuditAction.ADJUDICATED).count() == 1
    assert ConsensusLabel.objects.get(example=adjudication.example).rating == RatingChoice.MINOR_DISCREPANCY


def test_a_second_decision_is_refused_and_the_first_kept():
    adjudication = _three_way_split()
    _decide(adjudication, RatingChoice.EQUIVALENT, "Same findings, same decisions.")

    with pytest.raises(AlreadySubmitted) as refused:
        _decide(adjudication, RatingChoice.MAJOR_DISCREPANCY, "Second thoughts.")

    assert refused.value.annotation.pk == adjudication.pk
    assert refused.value.annotation.rating == RatingChoice.EQUIVALENT
    stored = Adjudication.objects.get(pk=adjudication.pk)
    assert (stored.rating, stored.rationale) == (RatingChoice.EQUIVALENT, "Same findings, same decisions.")
    assert AuditEvent.objects.filter(action=AuditAction.ADJUDICATED).count() == 1
    assert ConsensusLabel.objects.get(example=adjudication.example).rating == RatingChoice.EQUIVALENT


def test_another_adjudicator_is_not_found():
    adjudication = _three_way_split(adjudicators=2)
    other = (
        adjudication.example.study.members.filter(role=MemberRole.ADJUDICATOR)
        .exclude(user=adjudication.adjudicator)
        .get()
        .user
    )

    with pytest.raises(NoSuchWork):
        _decide(adjudication, RatingChoice.EQUIVALENT, "Not mine to decide.", adjudicator=other)

    _undecided(adjudication)


def test_one_of_the_readers_is_not_found():
    adjudication = _three_way_split()
    reader = adjudication.example.annotations.first().reader

    with pytest.raises(NoSuchWork):
        _decide(adjudication, RatingChoice.EQUIVALENT, "I read it myself.", adjudicator=reader)

    _undecided(adjudication)


def test_an_adjudication_voided_before_its_decision_is_not_found(coordinator):
    adjudication = _three_way_split()
    annotation = adjudication.example.annotations.order_by("pk").last()
    void_annotation(annotation.public_id, actor=coordinator, reason="Rated the wrong case.")
    assert Adjudication.objects.get(pk=adjudication.pk).status == AdjudicationStatus.VOIDED

    with pytest.raises(NoSuchWork):
        _decide(adjudication, RatingChoice.EQUIVALENT, "Too late.")

    assert not ConsensusLabel.objects.filter(example=adjudication.example).exists()


def test_an_unknown_adjudication_is_not_found():
    adjudication = _three_way_split()
    with pytest.raises(NoSuchWork):
        submit_adjudication(
            adjudicator=adjudication.adjudicator,
            adjudication_id=uuid.uuid4(),
            rating=RatingChoice.EQUIVALENT,
            rationale="Why.",
            form_token=uuid.uuid4(),
        )


# --- the same rules in the database --------------------------------------------------------------


def _refused_by_the_database(**fields) -> None:
    with pytest.raises(IntegrityError), transaction.atomic():
        Adjudication.objects.filter(pk=fields.pop("pk")).update(**fields)


def test_the_database_refuses_a_decision_that_does_not_fit_the_task_or_lacks_a_rationale():
    adjudication = _three_way_split(Task.REALISM)
    done = {"pk": adjudication.pk, "status": AdjudicationStatus.DONE}
    _refused_by_the_database(**done, rating=RatingChoice.EQUIVALENT, rationale="Why.")
    _refused_by_the_database(**done, rating="", rationale="Why.")
    _refused_by_the_database(**done, rating=RatingChoice.REALISTIC, rationale="")
    _undecided(adjudication)


def test_the_database_accepts_an_adjudication_voided_before_its_decision():
    adjudication = _three_way_split()
    Adjudication.objects.filter(pk=adjudication.pk).update(status=AdjudicationStatus.VOIDED)
    assert Adjudication.objects.get(pk=adjudication.pk).rating == ""


def test_a_token_already_used_for_another_adjudication_is_refused():
    from consensus.models import Adjudication
    from consensus.services import SubmissionRefused, submit_adjudication
    from tests.factories import make_reading_study, rate

    study, _, _ = make_reading_study(pairs=2, adjudicators=1)
    labels = (RatingChoice.REALISTIC, RatingChoice.MINOR_ISSUES, RatingChoice.MAJOR_ISSUES)
    for example in Example.objects.filter(study=study, task=Task.REALISM).order_by("pk")[:2]:
        first, second = example.assignments.select_related("reader").order_by("slot")
        rate(first, labels[0], "")
        rate(second, labels[1])
        rate(example.assignments.select_related("reader").get(slot=3), labels[2])
    done, other = Adjudication.objects.select_related("adjudicator").order_by("pk")
    token = uuid.uuid4()
    submit_adjudication(
        adjudicator=done.adjudicator, adjudication_id=done.public_id, rating=labels[0], rationale="x", form_token=token
    )
    with pytest.raises(SubmissionRefused) as refused:
        submit_adjudication(
            adjudicator=other.adjudicator,
            adjudication_id=other.public_id,
            rating=labels[0],
            rationale="x",
            form_token=token,
        )
    assert str(refused.value) == "This form was already used for another example. Reload the page."
