"""A rationale is at most RATIONALE_MAX_LENGTH characters: page, API, service and database agree."""

import uuid

import pytest
from django.db import IntegrityError, transaction
from django.test import Client
from django.urls import reverse

from annotation.models import (
    RATIONALE_MAX_LENGTH,
    Annotation,
    AuditEvent,
    Example,
    RatingChoice,
    Task,
)
from consensus.models import Adjudication, AdjudicationStatus
from consensus.services import SubmissionRefused, show_assignment, submit_adjudication, submit_annotation
from tests.factories import make_reading_study, rate

pytestmark = pytest.mark.django_db

TOO_LONG = "x" * (RATIONALE_MAX_LENGTH + 1)
LONGEST = "y" * RATIONALE_MAX_LENGTH
HTMX = {"HTTP_HX_REQUEST": "true"}


@pytest.fixture
def assignment():
    study, _, _ = make_reading_study(pairs=1, readers=4)
    example = Example.objects.filter(study=study, task=Task.REALISM).order_by("pk").first()
    found = example.assignments.select_related("reader", "example__study", "example__pair").get(slot=1)
    return show_assignment(found)


def _split() -> Adjudication:
    # One reader beyond the initial need: the third read of a kept-apart exam finds one.
    study, _, _ = make_reading_study(pairs=1, readers_beyond_initial=1)
    example = Example.objects.filter(study=study, task=Task.REALISM).order_by("pk").first()
    for rating in (RatingChoice.REALISTIC, RatingChoice.MINOR_ISSUES, RatingChoice.MAJOR_ISSUES):
        reads = example.assignments.open().select_related("reader").order_by("slot")
        rate(reads.first(), rating, "A reason.")
    return Adjudication.objects.select_related("adjudicator").get(example=example)


def _submit(assignment, rationale: str):
    return submit_annotation(
        reader=assignment.reader,
        assignment_id=assignment.public_id,
        rating=RatingChoice.MAJOR_ISSUES,
        rationale=rationale,
        form_token=uuid.uuid4(),
    )


def test_the_service_refuses_a_rationale_over_the_limit_naming_the_field(assignment):
    events = AuditEvent.objects.count()

    with pytest.raises(SubmissionRefused) as refused:
        _submit(assignment, TOO_LONG)

    assert refused.value.field == "rationale"
    assert str(refused.value) == "The rationale is 10,001 characters long; the limit is 10,000. Shorten it."
    assert not Annotation.objects.exists()
    assert AuditEvent.objects.count() == events


def test_the_service_stores_a_rationale_at_the_limit_and_counts_after_stripping(assignment):
    result = _submit(assignment, f"  {LONGEST}\n\n")

    assert result.annotation.rationale == LONGEST


def test_the_service_refuses_an_adjudication_rationale_over_the_limit():
    adjudication = _split()

    with pytest.raises(SubmissionRefused) as refused:
        submit_adjudication(
            adjudicator=adjudication.adjudicator,
            adjudication_id=adjudication.public_id,
            rating=RatingChoice.MINOR_ISSUES,
            rationale=TOO_LONG,
            form_token=uuid.uuid4(),
        )

    assert refused.value.field == "rationale"
    adjudication.refresh_from_db()
    assert (adjudication.status, adjudication.rationale) == (AdjudicationStatus.OPEN, "")


def test_the_database_refuses_an_annotation_rationale_over_the_limit(assignment):
    _submit(assignment, "Short.")

    with pytest.raises(IntegrityError), transaction.atomic():
        Annotation.objects.filter(assignment=assignment).update(rationale=TOO_LONG)
    Annotation.objects.filter(assignment=assignment).update(rationale=LONGEST)


def test_the_database_refuses_an_adjudication_rationale_over_the_limit():
    adjudication = _split()

    with pytest.raises(IntegrityError), transaction.atomic():
        Adjudication.objects.filter(pk=adjudication.pk).update(rationale=TOO_LONG)
    Adjudication.objects.filter(pk=adjudication.pk).update(rationale=LONGEST)


def test_the_api_refuses_a_rationale_over_the_limit_naming_the_field(assignment):
    client = Client()
    client.force_login(assignment.reader)
    body = {"rating": RatingChoice.MAJOR_ISSUES, "rationale": TOO_LONG, "form_token": str(uuid.uuid4())}

    response = client.post(f"/api/reading/{assignment.public_id}/rating/", body, content_type="application/json")

    assert response.status_code == 400
    assert response.json() == {
        "detail": "The rationale is longer than 10,000 characters. Shorten it.",
        "field": "rationale",
    }
    assert not Annotation.objects.exists()


def test_the_schema_documents_the_limit(assignment):
    client = Client()
    client.force_login(assignment.reader)

    schema = client.get("/api/schema/", {"format": "json"}).json()

    assert schema["components"]["schemas"]["RatingRequest"]["properties"]["rationale"]["maxLength"] == (
        RATIONALE_MAX_LENGTH
    )


@pytest.mark.parametrize("headers", [{}, HTMX], ids=["page", "htmx"])
def test_the_reading_form_refuses_a_rationale_over_the_limit(client, assignment, headers):
    client.force_login(assignment.reader)
    url = reverse("reading_page", args=[assignment.public_id])
    body = {"rating": RatingChoice.MAJOR_ISSUES, "rationale": TOO_LONG, "form_token": uuid.uuid4()}

    response = client.post(url, body, **headers)

    assert response.status_code == 422
    html = response.content.decode()
    assert "The rationale is 10001 characters long; the limit is 10,000. Shorten it." in html
    assert 'id="rationale-error"' in html
    assert not Annotation.objects.exists()


def test_the_reading_form_tells_the_browser_the_limit(client, assignment):
    client.force_login(assignment.reader)

    html = client.get(reverse("reading_page", args=[assignment.public_id])).content.decode()

    assert f'maxlength="{RATIONALE_MAX_LENGTH}"' in html


def test_the_adjudication_form_refuses_a_rationale_over_the_limit(client):
    adjudication = _split()
    client.force_login(adjudication.adjudicator)
    url = reverse("adjudication_page", args=[adjudication.public_id])
    assert f'maxlength="{RATIONALE_MAX_LENGTH}"' in client.get(url).content.decode()

    response = client.post(
        url, {"rating": RatingChoice.MINOR_ISSUES, "rationale": TOO_LONG, "form_token": uuid.uuid4()}
    )

    assert response.status_code == 422
    assert "the limit is 10,000" in response.content.decode()
    adjudication.refresh_from_db()
    assert adjudication.status == AdjudicationStatus.OPEN
