"""A judge's rating is stored exactly once under real concurrency (PostgreSQL: threads, own connections)."""

import uuid

import pytest

from annotation.models import AuditAction, AuditEvent, RatingChoice, Task
from judges.models import JudgeRead
from judges.services import JudgeAlreadyRated, show_judge_read, submit_judge_rating
from tests.consensus.test_concurrency import Racer
from tests.factories import make_reading_study
from tests.judges.helpers import enrol, make_judge

pytestmark = [pytest.mark.postgres, pytest.mark.django_db(transaction=True)]

ROUNDS = 30


def test_concurrent_ratings_of_one_read_store_one():
    study, _, _ = make_reading_study(pairs=ROUNDS // 3 + 1, assign=False)
    judge = make_judge()
    enrol(study, judge, tasks=[Task.REALISM])
    racer = Racer(threads=4)
    try:
        for read in list(JudgeRead.objects.select_related("example__study").filter(judge=judge))[:ROUNDS]:
            show_judge_read(read)
            same = uuid.uuid4()
            tokens = [same, same, uuid.uuid4(), uuid.uuid4()]
            ratings = [
                RatingChoice.REALISTIC,
                RatingChoice.REALISTIC,
                RatingChoice.MINOR_ISSUES,
                RatingChoice.MAJOR_ISSUES,
            ]

            def submit(token, rating, read_id=read.public_id):
                return lambda: submit_judge_rating(
                    judge=judge, read_id=read_id, rating=rating, rationale="Why.", form_token=token
                )

            outcomes = racer.race(*(submit(t, r) for t, r in zip(tokens, ratings, strict=True)))
            created = [o for o in outcomes if isinstance(o, tuple) and o[1]]
            assert len(created) == 1, outcomes
            assert all(isinstance(o, tuple | JudgeAlreadyRated) for o in outcomes), outcomes
            stored = JudgeRead.objects.get(pk=read.pk)
            assert stored.rating == created[0][0].rating
            events = AuditEvent.objects.filter(action=AuditAction.SUBMITTED, after__judge_read=str(read.public_id))
            assert events.count() == 1
    finally:
        racer.close()
