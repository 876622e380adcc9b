"""Submitting and routing use a number of queries that does not grow with the study."""

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from annotation.models import Example, Rating, Task
from tests.factories import make_reading_study, rate

pytestmark = pytest.mark.django_db


def _queries(call) -> int:
    with CaptureQueriesContext(connection) as captured:
        call()
    return len(captured)


def _measure(pairs: int) -> dict[str, int]:
    study, _, _ = make_reading_study(pairs=pairs, readers=6, adjudicators=2)
    examples = list(Example.objects.filter(study=study, task=Task.REALISM).order_by("pk")[:2])
    agreeing, splitting = (list(e.assignments.select_related("reader").order_by("slot")) for e in examples)
    counts = {
        "first read": _queries(lambda: rate(agreeing[0], Rating.REALISTIC, "")),
        "second read, consensus": _queries(lambda: rate(agreeing[1], Rating.REALISTIC, "")),
    }
    rate(splitting[0], Rating.REALISTIC, "")
    counts["second read, third read routed"] = _queries(lambda: rate(splitting[1], Rating.MINOR_ISSUES))
    third = examples[1].assignments.select_related("reader").get(slot=3)
    counts["third read, adjudication routed"] = _queries(lambda: rate(third, Rating.MAJOR_ISSUES))
    return counts


def test_submitting_and_routing_do_not_grow_with_the_study():
    small, large = _measure(2), _measure(30)
    assert small == large
    assert max(large.values()) <= 25, large
