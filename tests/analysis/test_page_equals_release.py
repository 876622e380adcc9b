"""The Results page, its API and its download give the numbers analyze_release gives on the study's release."""

import json

import pytest
from django.core.management import call_command
from django.tasks import default_task_backend
from rest_framework.test import APIClient

from analysis.computing import compute_results
from analysis.services import Scope
from annotation.models import Role, Study
from exports.building import build_release
from tests.exports.test_build_release import hostile_study
from tests.factories import make_user
from tests.module_data import rolled_back
from tests.replay import build_published_replay

pytestmark = pytest.mark.django_db


@pytest.fixture(scope="module")
def replay(django_db_setup, django_db_blocker):
    with rolled_back(django_db_blocker):
        study, _ = build_published_replay(slug="results-replay")
        yield study


@pytest.fixture(autouse=True)
def results_dir(settings, tmp_path):
    settings.RESULTS_DIR = tmp_path / "results"
    default_task_backend.clear()


def analyze_release_document(study: Study, folder, *options: str) -> dict:
    """Build the study's default release and run `manage.py analyze_release` on the folder."""
    build_release(Study.objects.get(pk=study.pk), folder / "release", license_text="CC0\n")
    call_command("analyze_release", str(folder / "release"), "--out", str(folder / "analysed"), *options)
    return json.loads((folder / "analysed" / "results.json").read_text(encoding="utf-8"))


def live_only_removed(document: dict, released: dict) -> dict:
    """What only a live study knows: the agreement of the two initial reads (slots are not in a release) and the
    mixed model (readers are not in a release), which a release's table says it cannot give."""
    tables = dict(document["tables"])
    tables["agreement"] = [row for row in tables["agreement"] if row["source"] != "initial_reads"]
    if "task1_mixed_model" in tables:
        assert any(row["var_reader"] is not None for row in tables["task1_mixed_model"])
        tables["task1_mixed_model"] = released["tables"]["task1_mixed_model"]
        tables["task1_realistic_mixed_model"] = released["tables"]["task1_realistic_mixed_model"]
    return {**document, "source": "release", "tables": tables}


def api_document(study: Study, query: str = "") -> dict:
    client = APIClient()
    client.force_authenticate(make_user(Role.COORDINATOR))
    response = client.get(f"/api/studies/{study.slug}/results/{query}")
    assert response.status_code == 200, response.content
    return response.json()


def test_the_replays_page_and_api_equal_analyze_release_on_its_release(replay, tmp_path):
    compute_results(replay, Scope())
    released = analyze_release_document(replay, tmp_path)

    live = api_document(replay)

    assert live["source"] == "live"
    assert {row["source"] for row in live["tables"]["agreement"]} == {"initial_reads", "release"}
    assert live_only_removed(live, released) == released
    shares = {
        row["task"]: row["value"]
        for row in live["tables"]["agreement"]
        if row["measure"] == "two_reads_agreed" and row["level"] == "overall"
    }
    assert shares == {"task1": 147 / 240, "task2": 78 / 120}


def test_a_filtered_page_equals_analyze_release_with_the_same_filters(replay, tmp_path):
    compute_results(replay, Scope(dataset="mimic-cxr", task="task1"))
    released = analyze_release_document(replay, tmp_path, "--dataset", "mimic-cxr", "--task", "task1")

    assert live_only_removed(api_document(replay, "?dataset=mimic-cxr&task=task1"), released) == released


def test_the_hostile_text_study_too(tmp_path):
    study = hostile_study()
    compute_results(study, Scope())

    released = analyze_release_document(study, tmp_path)
    assert live_only_removed(api_document(study), released) == released
