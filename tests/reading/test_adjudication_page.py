import uuid

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.urls import reverse

from annotation.models import Example, RatingChoice, ReportType, Role, Task
from consensus.models import Adjudication, AdjudicationStatus, ConsensusLabel, LabelSource
from tests.factories import make_reading_study, make_user, rate

pytestmark = pytest.mark.django_db
HTMX = {"HTTP_HX_REQUEST": "true"}


def _split(study, task: str = Task.REALISM) -> Adjudication:
    labels = {
        Task.REALISM: (RatingChoice.REALISTIC, RatingChoice.MINOR_ISSUES, RatingChoice.MAJOR_ISSUES),
        Task.EQUIVALENCE: (RatingChoice.EQUIVALENT, RatingChoice.MINOR_DISCREPANCY, RatingChoice.MAJOR_DISCREPANCY),
    }[task]
    example = Example.objects.filter(study=study, task=task, adjudications__isnull=True).order_by("pk").first()
    first, second = example.assignments.select_related("reader").order_by("slot")
    rate(first, labels[0], "First reader's reason.")
    rate(second, labels[1], "Second reader's reason.")
    rate(example.assignments.select_related("reader").get(slot=3), labels[2], "Third reader's reason.")
    return Adjudication.objects.select_related("adjudicator").get(example=example)


def test_it_shows_the_three_ratings_with_rationales_and_no_names(client):
    study, readers, _ = make_reading_study()
    adjudication = _split(study)
    client.force_login(adjudication.adjudicator)
    html = client.get(reverse("adjudication_page", args=[adjudication.public_id])).content.decode()
    for text in ("First reader&#x27;s reason.", "Second reader&#x27;s reason.", "Third reader&#x27;s reason."):
        assert text in html
    for label in ("Realistic", "Minor Issues", "Major Issues"):
        assert f"<strong>{label}</strong>" in html
    for reader in readers:
        assert reader.username not in html
    for leak in ("original", "alternative", "hedging", "mimic-cxr"):
        assert leak not in html.lower().replace("alternative_", "")


def test_the_order_of_the_ratings_is_shuffled_not_the_order_of_reading(client):
    study, _, _ = make_reading_study(pairs=6)
    orders = []
    for _ in range(6):
        adjudication = _split(study)
        client.force_login(adjudication.adjudicator)
        html = client.get(reverse("adjudication_page", args=[adjudication.public_id])).content.decode()
        positions = [html.index(f"{who} reader&#x27;s reason.") for who in ("First", "Second", "Third")]
        orders.append(tuple(sorted(range(3), key=positions.__getitem__)))
    assert len(set(orders)) > 1


def test_the_rationale_is_always_required(client):
    study, _, _ = make_reading_study()
    adjudication = _split(study)
    client.force_login(adjudication.adjudicator)
    url = reverse("adjudication_page", args=[adjudication.public_id])
    client.get(url)
    response = client.post(
        url, {"rating": RatingChoice.REALISTIC, "rationale": " ", "form_token": uuid.uuid4()}, **HTMX
    )
    assert response.status_code == 422
    assert "A rationale is required" in response.content.decode()
    adjudication.refresh_from_db()
    assert adjudication.status == AdjudicationStatus.OPEN


def test_the_decision_becomes_the_consensus(client):
    study, _, _ = make_reading_study()
    adjudication = _split(study)
    client.force_login(adjudication.adjudicator)
    url = reverse("adjudication_page", args=[adjudication.public_id])
    client.get(url)
    response = client.post(
        url,
        {"rating": RatingChoice.MINOR_ISSUES, "rationale": "Unusual but correct.", "form_token": uuid.uuid4()},
        **HTMX,
    )
    assert response.status_code == 200
    consensus = ConsensusLabel.objects.get(example=adjudication.example)
    assert (consensus.rating, consensus.label_source) == (RatingChoice.MINOR_ISSUES, LabelSource.ADJUDICATED)
    # Back: the decision read-only.
    html = client.get(url).content.decode()
    assert "Your final rating" in html and "Unusual but correct." in html
    assert 'name="rating"' not in html


def test_a_decision_on_an_adjudication_never_shown_is_refused_then_shown(client):
    study, _, _ = make_reading_study()
    adjudication = _split(study)
    client.force_login(adjudication.adjudicator)
    url = reverse("adjudication_page", args=[adjudication.public_id])
    data = {"rating": RatingChoice.MINOR_ISSUES, "rationale": "Unusual but correct.", "form_token": uuid.uuid4()}

    response = client.post(url, data, **HTMX)

    assert response.status_code == 422
    assert "This adjudication had not been opened, so the decision was not stored." in response.content.decode()
    adjudication.refresh_from_db()
    assert adjudication.status == AdjudicationStatus.OPEN and adjudication.first_shown_at is not None
    assert not ConsensusLabel.objects.filter(example=adjudication.example).exists()
    # Shown by that answer: the same decision, submitted again, is stored.
    assert client.post(url, {**data, "form_token": uuid.uuid4()}, **HTMX).status_code == 200
    adjudication.refresh_from_db()
    assert adjudication.status == AdjudicationStatus.DONE


def test_task_2_notes_readers_who_saw_the_other_order(client):
    study, _, _ = make_reading_study()
    adjudication = _split(study, Task.EQUIVALENCE)
    client.force_login(adjudication.adjudicator)
    html = client.get(reverse("adjudication_page", args=[adjudication.public_id])).content.decode()
    adjudication.refresh_from_db()
    assert adjudication.report_a_type in ReportType.values
    differing = adjudication.example.annotations.exclude(report_a_type=adjudication.report_a_type).count()
    assert html.count("saw Report A and Report B the other way round") == differing
    assert "Report A" in html and "Report B" in html


def test_another_adjudicator_gets_404(client):
    study, _, _ = make_reading_study()
    adjudication = _split(study)
    client.force_login(make_user(Role.ADJUDICATOR))
    assert client.get(reverse("adjudication_page", args=[adjudication.public_id])).status_code == 404


def test_readers_cannot_adjudicate(client):
    study, readers, _ = make_reading_study()
    adjudication = _split(study)
    client.force_login(readers[0])
    assert client.get(reverse("adjudication_page", args=[adjudication.public_id])).status_code == 403


def test_its_query_count_does_not_grow_with_the_study(client):
    counts = []
    for pairs in (2, 12):
        study, _, _ = make_reading_study(pairs=pairs)
        adjudication = _split(study)
        client.force_login(adjudication.adjudicator)
        url = reverse("adjudication_page", args=[adjudication.public_id])
        client.get(url)
        with CaptureQueriesContext(connection) as queries:
            client.get(url)
        counts.append(len(queries))
    assert counts[0] == counts[1]


def test_the_progress_bar_fills_as_adjudications_are_decided_not_as_they_are_opened(client):
    study, _, _ = make_reading_study()
    adjudication = _split(study)
    client.force_login(adjudication.adjudicator)

    html = client.get(reverse("adjudication_page", args=[adjudication.public_id])).content.decode()

    assert "Item 1 of 1" in html
    assert '<progress max="1" value="0" aria-hidden="true">' in html
