"""annotation.serializers.reading_item_data: the reader's item exactly as ReadingItemSerializer gives it."""

import uuid
from collections.abc import Iterator

import pytest
from rest_framework import serializers as drf
from rest_framework.renderers import JSONRenderer

from annotation.models import AssignmentStatus, ReportType, Task
from annotation.reading import api_payload, present
from annotation.serializers import ReadingItemSerializer, reading_item_data
from tests.factories import make_pair, make_study
from tests.module_data import rolled_back

pytestmark = pytest.mark.django_db


def _declared(serializer: drf.Serializer) -> dict:
    """The serializer's field names, nested ones with their own."""
    shape = {}
    for name, field in serializer.fields.items():
        child = field.child if isinstance(field, drf.ListSerializer) else field
        shape[name] = _declared(child) if isinstance(child, drf.Serializer) else None
    return shape


def _shape(value) -> dict | None:
    if isinstance(value, list):
        value = value[0]
    if isinstance(value, dict) and not set(value) <= {"indication", "comparison", "technique"}:
        return {name: _shape(inner) for name, inner in value.items()}
    return None


@pytest.fixture(scope="module")
def payloads(django_db_setup, django_db_blocker) -> Iterator[list[dict]]:
    """Built once for the module and rolled back after it."""
    with rolled_back(django_db_blocker):
        yield _payloads()


def _payloads() -> list[dict]:
    study = make_study(name='Study <"one"> & \u00e9')
    # Text a serializer might treat differently: markup, quotes, non-ASCII, empty and missing parts.
    pair = make_pair(
        study,
        indication="<b>Cough</b> & \u201cfever\u201d",
        comparison="",
        original_impression="",
        alternative_findings="Line\nbreaks\tand \u00e9\u00e8.",
    )
    open_realism = api_payload(
        present(Task.REALISM, pair, report_type=ReportType.ALTERNATIVE),
        uuid.uuid4(),
        study,
        position=1,
        status=AssignmentStatus.OPEN,
        form_token=uuid.uuid4(),
    )
    rated_equivalence = api_payload(
        present(Task.EQUIVALENCE, pair, report_a_type=ReportType.ALTERNATIVE),
        uuid.uuid4(),
        study,
        rating="minor_discrepancy",
        rationale="Different <wording>.",
        position=None,
        status=AssignmentStatus.DONE,
        form_token=None,
    )
    # An automated judge's item: its status a plain string, its rating stored as given.
    judge = api_payload(
        present(Task.EQUIVALENCE, pair),
        uuid.uuid4(),
        study,
        rating="equivalent",
        rationale="",
        position=7,
        status="done",
        form_token=None,
    )
    voided = {**open_realism, "status": AssignmentStatus.VOIDED, "form_token": None, "position": None}
    return [open_realism, rated_equivalence, judge, voided]


def test_every_kind_of_item_is_byte_for_byte_what_the_serializer_gives(payloads):
    renderer = JSONRenderer()
    for payload in payloads:
        direct = reading_item_data(payload)
        assert direct == ReadingItemSerializer(payload).data
        assert renderer.render(direct) == renderer.render(ReadingItemSerializer(payload).data)


def test_it_has_exactly_the_serializers_fields_in_their_order(payloads):
    # A field added to the serializer (the schema) and not to the builder, or the other way, fails here.
    shape = _shape(reading_item_data(payloads[0]))
    declared = _declared(ReadingItemSerializer())
    assert shape == declared
    assert list(shape) == list(declared)
