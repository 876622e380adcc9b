import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.urls import reverse

from annotation.models import Role, Study
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
