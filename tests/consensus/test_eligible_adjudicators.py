"""eligible_adjudicators: who may adjudicate an example, and in which order."""

import pytest

from annotation.models import Example, MemberRole, RatingChoice, Role, Study, StudyMember, Task, tiebreak
from consensus.models import Adjudication, AdjudicationStatus
from consensus.services import eligible_adjudicators
from tests.factories import make_assignment, make_reading_study, make_user

pytestmark = pytest.mark.django_db


def test_the_least_loaded_in_this_study_comes_first_and_a_past_adjudicator_of_the_example_never():
    study, _, (light, middle, heavy, before) = make_reading_study(pairs=3, readers=4, adjudicators=4)
    example = Example.objects.filter(study=study, task=Task.EQUIVALENCE).order_by("pk").first()
    others = list(Example.objects.filter(study=study).exclude(pk=example.pk).order_by("pk"))
    elsewhere, _, _ = make_reading_study(
        pairs=1, readers=2, adjudicators=0, slug="elsewhere", keep_versions_apart=False
    )
    other_study_examples = list(Example.objects.filter(study=elsewhere).order_by("pk"))
    StudyMember.objects.create(study=elsewhere, user=light, role=MemberRole.ADJUDICATOR)

    def adjudication(target, adjudicator, status=AdjudicationStatus.OPEN):
        decided = {
            "rating": RatingChoice.MINOR_DISCREPANCY if target.task == Task.EQUIVALENCE else RatingChoice.MINOR_ISSUES
        }
        decided = {**decided, "rationale": "Decided."} if status == AdjudicationStatus.DONE else {}
        Adjudication.objects.create(example=target, adjudicator=adjudicator, task=target.task, status=status, **decided)

    # Open work in this study is the load; finished, withdrawn and other studies' work are not.
    adjudication(others[0], middle)
    adjudication(others[0], heavy, AdjudicationStatus.VOIDED)
    adjudication(others[1], heavy)
    adjudication(others[2], heavy)
    adjudication(others[3], light, AdjudicationStatus.DONE)
    adjudication(others[5], light, AdjudicationStatus.DONE)
    adjudication(other_study_examples[0], light)
    adjudication(other_study_examples[1], light)
    # Reading another example of the study bars nobody; having adjudicated this one (voided) does.
    make_assignment(others[4], light, slot=3)
    adjudication(example, before, AdjudicationStatus.VOIDED)
    # A study seed whose tie-break alone would order them otherwise: only the loads give this order.
    by_load = [light, middle, heavy]

    def tie_break_order(seed):
        return sorted(by_load, key=lambda user: tiebreak(seed, "adjudicate", example.public_id, user.pk))

    seed = next(seed for seed in range(100) if tie_break_order(seed) != by_load)
    Study.objects.filter(pk=study.pk).update(seed=seed)
    example = Example.objects.select_related("study").get(pk=example.pk)

    assert eligible_adjudicators(example) == by_load


def test_a_reader_of_the_example_is_never_its_adjudicator():
    study, _, (adjudicator,) = make_reading_study(pairs=1, readers=4, adjudicators=1)
    example = Example.objects.filter(study=study, task=Task.EQUIVALENCE).get()
    both = make_user(Role.ADJUDICATOR, subspecialty="cardiothoracic")
    StudyMember.objects.create(study=study, user=both, role=MemberRole.ADJUDICATOR)
    make_assignment(example, both, slot=3)

    assert eligible_adjudicators(example) == [adjudicator]


def test_it_asks_one_query_however_many_adjudicators(django_assert_num_queries):
    study, _, _ = make_reading_study(pairs=1, readers=2, adjudicators=4, keep_versions_apart=False)
    example = Example.objects.get(study=study, task=Task.EQUIVALENCE)
    example = Example.objects.select_related("study").get(pk=example.pk)

    # The members with their accounts and subspecialties, and their loads, in one query.
    with django_assert_num_queries(1):
        assert len(eligible_adjudicators(example)) == 4


def test_an_adjudicator_without_a_reader_profile_is_eligible_after_the_cardiothoracic_ones():
    # The role given through the admin's groups creates no profile: the subspecialty is unknown.
    study, _, (general,) = make_reading_study(pairs=1, readers=4, adjudicators=1)
    example = Example.objects.select_related("study").filter(study=study, task=Task.EQUIVALENCE).get()
    general.reader_profile.delete()
    chest = make_user(Role.ADJUDICATOR, subspecialty="cardiothoracic")
    StudyMember.objects.create(study=study, user=chest, role=MemberRole.ADJUDICATOR)
    # A seed whose tie-break alone would put the general adjudicator first.
    study.seed = next(
        seed
        for seed in range(100)
        if tiebreak(seed, "adjudicate", example.public_id, general.pk)
        < tiebreak(seed, "adjudicate", example.public_id, chest.pk)
    )
    Study.objects.filter(pk=study.pk).update(seed=study.seed)
    example = Example.objects.select_related("study").get(pk=example.pk)

    assert eligible_adjudicators(example) == [chest, general]
