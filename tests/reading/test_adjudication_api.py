"""The adjudicator's API: the page's adjudications through /api/, with the same blinding and the
same exactly-once rule."""

import uuid

import pytest
from django.test import Client

from annotation.models import RatingChoice, Task
from consensus.models import AdjudicationStatus, ConsensusLabel, LabelSource
from tests.factories import make_reading_study, make_token
from tests.reading.test_adjudication_page import _split

pytestmark = pytest.mark.django_db
JSON = "application/json"


def _api(user) -> Client:
    return Client(HTTP_AUTHORIZATION=f"Token {make_token(user)}")


def test_next_gives_the_split_blinded_with_the_three_ratings_and_no_names():
    study, readers, _ = make_reading_study()
    adjudication = _split(study)
    client = _api(adjudication.adjudicator)

    data = client.get("/api/adjudications/next/").json()

    assert data["id"] == str(adjudication.public_id)
    assert data["study"] == {"slug": study.slug, "name": study.name}
    assert (data["status"], data["position"], data["total"], data["rating"]) == ("open", 1, 1, None)
    assert sorted(prior["rationale"] for prior in data["priors"]) == [
        "First reader's reason.", "Second reader's reason.", "Third reader's reason."
    ]  # fmt: skip
    assert sorted(prior["label"] for prior in data["priors"]) == ["Major Issues", "Minor Issues", "Realistic"]
    text = str(data).lower()
    for leak in ("original", "alternative", "hedging", "mimic-cxr", *(r.username for r in readers)):
        assert leak not in text
    adjudication.refresh_from_db()
    assert adjudication.first_shown_at is not None  # fetched: shown, as the page does


def test_a_decision_is_stored_once_and_becomes_the_consensus():
    study, _, _ = make_reading_study()
    adjudication = _split(study)
    client = _api(adjudication.adjudicator)
    token = client.get(f"/api/adjudications/{adjudication.public_id}/").json()["form_token"]
    body = {"rating": RatingChoice.MINOR_ISSUES, "rationale": "Two readers saw the slip.", "form_token": token}
    url = f"/api/adjudications/{adjudication.public_id}/decision/"

    first = client.post(url, body, content_type=JSON)
    again = client.post(url, body, content_type=JSON)  # a retry, a double click
    other = client.post(url, {**body, "form_token": str(uuid.uuid4())}, content_type=JSON)

    assert (first.status_code, first.json()["created"]) == (201, True)
    assert (again.status_code, again.json()["created"]) == (200, False)
    assert other.status_code == 409 and other.json()["rating"] == RatingChoice.MINOR_ISSUES
    adjudication.refresh_from_db()
    assert (adjudication.status, adjudication.rating) == (AdjudicationStatus.DONE, RatingChoice.MINOR_ISSUES)
    label = ConsensusLabel.objects.get(example=adjudication.example)
    assert (label.rating, label.label_source) == (RatingChoice.MINOR_ISSUES, LabelSource.ADJUDICATED)
    assert client.get("/api/adjudications/next/").status_code == 204
    done = client.get(f"/api/adjudications/{adjudication.public_id}/").json()
    assert (done["status"], done["rating"], done["form_token"]) == ("done", RatingChoice.MINOR_ISSUES, None)


def test_a_decision_needs_a_rationale_and_the_adjudication_fetched_first():
    study, _, _ = make_reading_study()
    adjudication = _split(study, Task.EQUIVALENCE)
    client = _api(adjudication.adjudicator)
    url = f"/api/adjudications/{adjudication.public_id}/decision/"
    body = {"rating": RatingChoice.EQUIVALENT, "rationale": "", "form_token": str(uuid.uuid4())}

    unseen = client.post(url, {**body, "rationale": "Fine."}, content_type=JSON)
    client.get(f"/api/adjudications/{adjudication.public_id}/")
    no_reason = client.post(url, body, content_type=JSON)

    assert unseen.status_code == 400 and "Fetch the adjudication first" in unseen.json()["detail"]
    assert no_reason.status_code == 400 and no_reason.json()["field"] == "rationale"
    adjudication.refresh_from_db()
    assert adjudication.status == AdjudicationStatus.OPEN


def test_another_adjudicators_adjudication_is_404():
    study, _, adjudicators = make_reading_study(adjudicators=2)
    adjudication = _split(study)
    other = next(a for a in adjudicators if a != adjudication.adjudicator)

    assert _api(other).get(f"/api/adjudications/{adjudication.public_id}/").status_code == 404
