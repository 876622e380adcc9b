import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.urls import reverse
from rest_framework.test import APIClient

from annotation.models import CREATED_SETTINGS, AuditAction, AuditEvent, Role, Study
from annotation.services import sample_pairs
from tests.factories import make_pair, make_study, make_user

pytestmark = pytest.mark.django_db


def test_it_lists_studies(client, coordinator):
    make_study("alpha", name="Alpha study")
    client.force_login(coordinator)
    response = client.get(reverse("study_list"))
    assert response.status_code == 200
    assert b"Alpha study" in response.content


def test_it_creates_a_study_with_the_default_taxonomy(client, coordinator):
    client.force_login(coordinator)
    response = client.post(
        reverse("study_list"), {"name": "ReRef 2026", "slug": "reref-2026", "keep_versions_apart": "on"}
    )
    study = Study.objects.get(slug="reref-2026")
    assert response.status_code == 302
    assert response.url == reverse("study_detail", args=["reref-2026"])
    assert study.variations.count() == 12
    assert study.reads_per_example == 2


def test_a_study_created_by_page_or_api_is_audited_with_its_settings(client, coordinator):
    client.force_login(coordinator)
    client.post(reverse("study_list"), {"name": "Page", "slug": "page", "undo_window_seconds": "30"})
    api = APIClient()
    api.force_authenticate(coordinator)
    api.post("/api/studies/", {"slug": "api", "name": "Api", "reserve_percent": 50}, format="json")

    events = {e.study.slug: e for e in AuditEvent.objects.filter(action=AuditAction.STUDY_CREATED)}
    assert events.keys() == {"page", "api"}
    assert events["page"].actor == events["api"].actor == coordinator
    page, by_api = Study.objects.get(slug="page"), Study.objects.get(slug="api")
    for study in (page, by_api):
        expected = {"slug": study.slug, "name": study.name} | {f: getattr(study, f) for f in CREATED_SETTINGS}
        assert events[study.slug].after == expected
    assert events["page"].after["undo_window_seconds"] == 30
    assert events["api"].after["reserve_percent"] == 50


def test_it_shows_form_errors_for_a_taken_slug(client, coordinator):
    make_study("taken")
    client.force_login(coordinator)
    response = client.post(reverse("study_list"), {"name": "Again", "slug": "taken"})
    assert response.status_code == 200
    assert b"already exists" in response.content
    assert Study.objects.count() == 1


def test_its_query_count_does_not_grow_with_the_number_of_studies(client, coordinator):
    client.force_login(coordinator)
    counts = []
    for n in (1, 20):
        while Study.objects.count() < n:
            make_study()
        client.get(reverse("study_list"))
        with CaptureQueriesContext(connection) as queries:
            client.get(reverse("study_list"))
        counts.append(len(queries))
    assert counts[0] == counts[1]


def test_it_requires_the_coordinator_role(client):
    client.force_login(make_user(Role.DATA_MANAGER))
    assert client.get(reverse("study_list")).status_code == 403


def test_the_sample_is_worded_as_on_the_study_page(client, coordinator):
    study = make_study("worded")
    make_pair(study)
    sample_pairs(study, per_variation=10, seed=1)
    client.force_login(coordinator)

    listed = client.get(reverse("study_list")).content.decode()
    detail = client.get(study.get_absolute_url()).content.decode()

    assert "10 per dataset and variation, seed 1" in listed
    assert "10 per dataset and variation, seed 1" in detail
    assert "10 per variation," not in listed
