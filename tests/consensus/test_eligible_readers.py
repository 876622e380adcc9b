"""consensus.services.eligible_readers, written by hand, answers as the ORM's query it replaced."""

import random

import pytest
from django.db.models import Exists, F, OuterRef, Q, Subquery, Sum
from django.db.models.functions import Coalesce

from annotation.models import (
    Assignment,
    CandidatePair,
    Example,
    MemberRole,
    ReaderQueue,
    ReportType,
    Role,
    StudyMember,
    Task,
    tiebreak,
)
from consensus.services import eligible_readers
from tests.factories import make_reading_study

pytestmark = pytest.mark.django_db


def _conflicting_by_the_orm(example: Example):
    """The examples that share a conflict key with example, by the ORM (consensus.blinding's rule, as
    its query was written before): the reference of the hand-written SQL."""
    pair = example.pair
    exam_pairs = CandidatePair.objects.filter(
        source_study_id=pair.source_study_id, dataset_id=pair.dataset_id, study_id=example.study_id
    ).values("pk")
    of_exam = Example.objects.filter(pair_id__in=exam_pairs)
    if example.study.keep_versions_apart:
        return of_exam
    shows_original = Q(task=Task.EQUIVALENCE) | Q(report_type=ReportType.ORIGINAL)
    shows_rewrite = Q(task=Task.EQUIVALENCE) | Q(report_type=ReportType.ALTERNATIVE)
    wanted = Q(pk=example.pk)
    if example.task == Task.EQUIVALENCE or example.report_type == ReportType.ORIGINAL:
        wanted |= shows_original
    if example.task == Task.EQUIVALENCE or example.report_type == ReportType.ALTERNATIVE:
        wanted |= Q(pair_id=example.pair_id) & shows_rewrite
    return of_exam.filter(wanted)


def _by_the_orm(example: Example) -> list:
    """The ORM's query, as eligible_readers was written before: the reference."""
    study = example.study
    queues_of_member = ReaderQueue.objects.filter(reader=OuterRef("user_id"), study=study).values("reader")
    members = (
        StudyMember.objects.able(study, MemberRole.READER)
        .exclude(Exists(Assignment.objects.filter(example=example, reader=OuterRef("user_id"))))
        .annotate(
            load=Coalesce(Subquery(queues_of_member.annotate(n=Sum("open_count")).values("n")), 0),
            ahead=Coalesce(
                Subquery(
                    queues_of_member.filter(task=example.task).annotate(n=F("open_count") + F("held_count")).values("n")
                ),
                0,
            ),
        )
        .select_related("user")
    )
    conflicting = Assignment.objects.filter(example__in=_conflicting_by_the_orm(example)).values("reader_id")
    members = members.exclude(user_id__in=conflicting)
    if study.reserve_percent:
        ranked = sorted(members, key=lambda m: (-m.ahead, tiebreak(study.seed, "route", example.public_id, m.user_id)))
    else:
        ranked = sorted(members, key=lambda m: (m.load, tiebreak(study.seed, "route", example.public_id, m.user_id)))
    return [m.user for m in ranked]


def _fields(user) -> dict:
    return {field.attname: getattr(user, field.attname) for field in user._meta.concrete_fields}


@pytest.mark.parametrize(("keep_versions_apart", "reserve_percent"), [(True, 0), (False, 0), (True, 30), (False, 30)])
def test_every_example_gets_the_readers_the_orm_gave_in_its_order(keep_versions_apart, reserve_percent):
    study, readers, _ = make_reading_study(
        pairs=4, pairs_per_exam=2, readers_beyond_initial=4,
        keep_versions_apart=keep_versions_apart, reserve_percent=reserve_percent,
    )  # fmt: skip
    rng = random.Random(7)
    # Who may not be given work: a member made inactive, an account switched off, a reader whose role
    # was taken away (and a coordinator who is no member at all).
    StudyMember.objects.filter(study=study, user=readers[0]).update(active=False)
    type(readers[1]).objects.filter(pk=readers[1].pk).update(is_active=False)
    readers[2].groups.remove(readers[2].groups.get(name=Role(MemberRole.READER).label))
    # Loads that differ and that tie, so that both the counters and the draw order them.
    for queue in ReaderQueue.objects.filter(study=study):
        ReaderQueue.objects.filter(pk=queue.pk).update(
            open_count=rng.choice([0, 1, 1, 3]), held_count=rng.choice([0, 2]), rated_count=rng.randint(0, 3)
        )
    examples = list(Example.objects.filter(study=study).select_related("study", "pair").order_by("pk"))
    assert len(examples) == 12
    some_found = 0
    for example in examples:
        expected = _by_the_orm(example)
        found = eligible_readers(example)
        assert [user.pk for user in found] == [user.pk for user in expected]
        assert [_fields(user) for user in found] == [_fields(user) for user in expected]
        for limit in (1, 2, 3):  # the first few, their loads tied or not
            first = eligible_readers(example, limit=limit)
            assert [user.pk for user in first] == [user.pk for user in expected[:limit]]
        some_found += bool(found)
    assert some_found >= 6  # the comparison is not of empty lists
