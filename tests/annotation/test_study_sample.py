import pytest
from django.urls import reverse

from annotation.models import Assignment, CandidatePair, Example, Role
from annotation.services import sample_pairs
from tests.factories import make_pair, make_study, make_user

HTMX = {"HTTP_HX_REQUEST": "true"}

pytestmark = pytest.mark.django_db


def _study_with_candidates():
    study = make_study()
    for i in range(4):
        make_pair(study, dataset="mimic-cxr", variation="hedging", study_id=str(51_000_000 + i))
    return study


def test_it_samples_from_the_page(client, coordinator):
    study = _study_with_candidates()
    client.force_login(coordinator)
    response = client.post(reverse("study_sample", args=[study.slug]), {"per_variation": 2, "seed": 5}, **HTMX)
    assert response.status_code == 200
    assert b"Sampled 2 pairs" in response.content
    assert b'id="sample-panel"' in response.content
    assert b"hx-swap-oob" in response.content
    assert b"<html" not in response.content
    assert CandidatePair.objects.filter(study=study, sampled=True).count() == 2


def test_it_lists_short_cells(client, coordinator):
    study = _study_with_candidates()
    client.force_login(coordinator)
    response = client.post(reverse("study_sample", args=[study.slug]), {"per_variation": 10}, **HTMX)
    html = response.content.decode()
    assert "mimic-cxr / hedging: 4 accepted candidates, 10 asked for; took all 4." in html
    assert "Of the" in html and "1 is short (all their accepted candidates taken)" in html
    assert "only 0" not in html


def test_the_header_says_sampled_without_a_reload(client, coordinator):
    study = _study_with_candidates()
    client.force_login(coordinator)
    assert "not sampled yet" in client.get(study.get_absolute_url()).content.decode()

    response = client.post(reverse("study_sample", args=[study.slug]), {"per_variation": 2, "seed": 5}, **HTMX)

    html = response.content.decode()
    assert '<p class="meta" id="study-meta" hx-swap-oob="true">' in html
    assert "sample: 2 per dataset and variation, seed 5" in html
    assert "not sampled yet" not in html


def test_it_shows_form_errors_in_place(client, coordinator):
    study = _study_with_candidates()
    client.force_login(coordinator)
    response = client.post(reverse("study_sample", args=[study.slug]), {"per_variation": 0}, **HTMX)
    assert response.status_code == 422
    assert b"greater than or equal to 1" in response.content
    assert not Example.objects.exists()


def test_it_explains_a_refusal_in_place(client, coordinator):
    study = _study_with_candidates()
    sample_pairs(study, per_variation=1, seed=1)
    Assignment.objects.create(example=Example.objects.first(), reader=make_user(Role.READER), slot=1)
    client.force_login(coordinator)
    response = client.post(reverse("study_sample", args=[study.slug]), {"per_variation": 2}, **HTMX)
    assert response.status_code == 422
    assert b"Reading has started" in response.content
    assert CandidatePair.objects.filter(study=study, sampled=True).count() == 1


def test_it_works_without_javascript(client, coordinator):
    study = _study_with_candidates()
    client.force_login(coordinator)
    response = client.post(reverse("study_sample", args=[study.slug]), {"per_variation": 1})
    assert response.status_code == 200
    assert b"<html" in response.content
    assert b"Sampled 1 pair (1 per dataset and variation" in response.content


def test_it_requires_the_coordinator_role(client):
    study = _study_with_candidates()
    client.force_login(make_user(Role.READER))
    assert client.post(reverse("study_sample", args=[study.slug]), {"per_variation": 1}).status_code == 403
    assert not Example.objects.exists()


def test_the_full_page_has_one_summary_table(client, coordinator):
    study = _study_with_candidates()
    client.force_login(coordinator)
    response = client.post(reverse("study_sample", args=[study.slug]), {"per_variation": 1})
    assert response.content.count(b'id="summary"') == 1


def _exams_in_two_variations():
    study = make_study()
    for i in range(3):
        for variation in ("hedging", "terminology"):
            make_pair(study, dataset="mimic-cxr", variation=variation, study_id=str(51_100_000 + i))
    return study


def test_the_page_can_draw_at_most_one_pair_per_exam(client, coordinator):
    study = _exams_in_two_variations()
    client.force_login(coordinator)
    response = client.post(
        reverse("study_sample", args=[study.slug]), {"per_variation": 2, "seed": 5, "one_pair_per_exam": "on"}, **HTMX
    )
    assert response.status_code == 200
    assert "At most one pair per exam: 2 candidates passed over" in response.content.decode()
    exams = list(CandidatePair.objects.filter(study=study, sampled=True).values_list("source_study_id", flat=True))
    assert sorted(exams) == sorted(set(exams)) and len(exams) == 3


def test_the_api_can_draw_at_most_one_pair_per_exam(client, coordinator):
    study = _exams_in_two_variations()
    client.force_login(coordinator)
    response = client.post(
        f"/api/studies/{study.slug}/sample/",
        {"per_variation": 2, "seed": 5, "one_pair_per_exam": True},
        content_type="application/json",
    )
    assert response.status_code == 200, response.content
    body = response.json()
    assert body["one_pair_per_exam"] is True
    assert body["skipped"] == 2 == sum(cell["skipped"] for cell in body["cells"])
    assert client.get(f"/api/studies/{study.slug}/").json()["sample_one_pair_per_exam"] is True
