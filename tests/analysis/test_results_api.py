"""GET /api/studies/<slug>/results/: the Results page's document, computed off the request."""

import pytest
from django.tasks import default_task_backend
from rest_framework.test import APIClient

from analysis.live import reader_key
from analysis.services import Scope, results_state
from analysis.tasks import compute_results_task
from annotation.models import Annotation, Role
from tests.exports.release_helpers import rated_study
from tests.factories import make_user

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def results_dir(settings, tmp_path):
    settings.RESULTS_DIR = tmp_path / "results"
    default_task_backend.clear()


def run_queued() -> None:
    for queued in default_task_backend.results:
        compute_results_task.call(*queued.args)
    default_task_backend.clear()


@pytest.fixture
def api():
    client = APIClient()
    client.force_authenticate(make_user(Role.DATA_MANAGER))
    return client


def test_it_answers_202_while_computing_then_the_document(api, django_capture_on_commit_callbacks):
    study = rated_study()

    with django_capture_on_commit_callbacks(execute=True):
        waiting = api.get(f"/api/studies/{study.slug}/results/")
    assert waiting.status_code == 202
    assert waiting["Retry-After"] == "2"
    assert waiting.json()["status"] == "queued" and waiting.json()["progress"] == 0

    run_queued()
    done = api.get(f"/api/studies/{study.slug}/results/")

    assert done.status_code == 200
    assert done.json() == results_state(study, Scope()).document()
    assert done.json()["source"] == "live"
    assert set(done.json()["tables"]) >= {"task1_ratings", "task1_degradation", "task2_proportions", "agreement"}


def test_the_api_holds_no_reader_quality(api, django_capture_on_commit_callbacks):
    study = rated_study()
    with django_capture_on_commit_callbacks(execute=True):
        api.get(f"/api/studies/{study.slug}/results/")
    run_queued()

    body = api.get(f"/api/studies/{study.slug}/results/").content.decode()

    # Aggregates over readers (the mixed model's reader variance) are results; nothing names a reader.
    readers = Annotation.objects.filter(example__study=study).values_list("reader", flat=True)
    keys = {reader_key(study, pk) for pk in readers}
    assert keys and not any(key in body for key in keys)
    assert "reader_quality" not in body and "quality" not in body.lower()
    assert "var_reader" in body


def test_it_filters_like_the_page(api, django_capture_on_commit_callbacks):
    study = rated_study()
    with django_capture_on_commit_callbacks(execute=True):
        api.get(f"/api/studies/{study.slug}/results/?task=task1&dataset=mimic-cxr")
    run_queued()

    document = api.get(f"/api/studies/{study.slug}/results/?task=task1&dataset=mimic-cxr").json()

    assert document["filters"] == {"dataset": "mimic-cxr", "task": "task1"}
    assert set(document["counts"]) == {"task1"}


@pytest.mark.parametrize(
    ("query", "message"),
    [
        ("task=both", "task: unknown task 'both'."),
        ("dataset=chexpert-plus", "dataset: the study has no dataset 'chexpert-plus'. Use one of: mimic-cxr."),
    ],
)
def test_it_refuses_an_unknown_filter_with_the_choices(api, query, message):
    study = rated_study()

    response = api.get(f"/api/studies/{study.slug}/results/?{query}")

    assert response.status_code == 400
    assert response.json()["detail"].startswith(message)
    assert default_task_backend.results == []


def test_a_failed_computation_is_503_until_posted_again(api, django_capture_on_commit_callbacks, monkeypatch):
    study = rated_study()
    with django_capture_on_commit_callbacks(execute=True):
        api.get(f"/api/studies/{study.slug}/results/")
    monkeypatch.setattr("analysis.computing.study_frames", lambda *a, **k: 1 / 0)
    run_queued()

    failed = api.get(f"/api/studies/{study.slug}/results/")
    assert failed.status_code == 503
    assert failed.json()["detail"].startswith("The computation failed unexpectedly")
    assert default_task_backend.results == []

    monkeypatch.undo()
    with django_capture_on_commit_callbacks(execute=True):
        assert api.post(f"/api/studies/{study.slug}/results/").status_code == 202
    run_queued()
    assert api.get(f"/api/studies/{study.slug}/results/").status_code == 200
