import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.urls import reverse

from annotation.models import Role, Verdict
from tests.factories import make_pair, make_study, make_user

pytestmark = pytest.mark.django_db


def _populate(study, n: int) -> None:
    variations = ["hedging", "terminology", "negation--explicit"]
    for i in range(n):
        make_pair(
            study,
            dataset=["mimic-cxr", "iu-xray"][i % 2],
            study_id=f"{i:08d}" if i % 2 == 0 else f"CXR{i}",
            variation=variations[i % 3],
            verdict=Verdict.ACCEPTED if i % 4 else Verdict.REJECTED,
        )


def test_it_shows_candidates_by_verdict_per_dataset_and_variation(client, coordinator):
    study = make_study()
    make_pair(study, dataset="mimic-cxr", variation="hedging")
    make_pair(study, dataset="mimic-cxr", variation="hedging", verdict=Verdict.INFEASIBLE)
    make_pair(study, dataset="iu-xray", variation="terminology", verdict=Verdict.ALREADY_IN_TARGET_FORM)
    client.force_login(coordinator)
    response = client.get(reverse("study_detail", args=[study.slug]))
    assert response.status_code == 200
    rows = {(row["dataset"], row["variation"]): row for row in response.context["summary"]}
    assert rows[("mimic-cxr", "hedging")]["verdicts"] == {
        "accepted": 1,
        "rejected": 0,
        "already_in_target_form": 0,
        "infeasible": 1,
    }
    assert rows[("iu-xray", "terminology")]["total"] == 1
    assert b"Import candidate pairs" in response.content
    assert b"Draw the study sample" in response.content


def test_its_query_count_does_not_grow_with_the_study(client, coordinator):
    client.force_login(coordinator)
    counts = []
    for size in (3, 60):
        study = make_study()
        _populate(study, size)
        url = reverse("study_detail", args=[study.slug])
        client.get(url)  # warm the session and permission caches
        with CaptureQueriesContext(connection) as queries:
            response = client.get(url)
        assert response.status_code == 200
        counts.append(len(queries))
    assert counts[0] == counts[1]
    assert counts[1] <= 8


def test_it_requires_the_coordinator_role(client):
    study = make_study()
    client.force_login(make_user(Role.READER))
    assert client.get(reverse("study_detail", args=[study.slug])).status_code == 403


def test_it_redirects_anonymous_users_to_login(client):
    study = make_study()
    response = client.get(reverse("study_detail", args=[study.slug]))
    assert response.status_code == 302
    assert response.url.startswith(reverse("login"))


def test_it_404s_for_an_unknown_study(client, coordinator):
    client.force_login(coordinator)
    assert client.get(reverse("study_detail", args=["nope"])).status_code == 404
