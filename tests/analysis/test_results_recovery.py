"""A results computation keeps its status, progress and heartbeat in the database; one whose worker
died (kill -9 mid-run, or between taking the task and starting it) ends failed, saying why, and
can be computed again. The same for a release left Queued by a worker that died before starting."""

import io
import time
from datetime import timedelta
from pathlib import Path

import pytest
from django.core.management import call_command
from django.tasks import TaskResultStatus, default_task_backend
from django.test import override_settings
from django.utils import timezone
from django_tasks_db.models import DBTaskResult
from rest_framework.test import APIClient

from analysis.models import ComputationStatus, ResultsComputation
from analysis.queueing import request_results
from analysis.services import Scope, results_state
from annotation.models import Role
from exports import models as release_models
from exports.models import Release, ReleaseAction, ReleaseStatus
from exports.recovery import fail_stale_releases
from tests.exports.release_helpers import rated_study
from tests.factories import make_user
from tests.workers import kill_a_worker_held_at_its_first_read

ROOT = Path(__file__).resolve().parents[2]
DATABASE = {"default": {"BACKEND": "django_tasks_db.DatabaseBackend", "QUEUES": ["default"]}}


@pytest.fixture(autouse=True)
def results_dir(settings, tmp_path):
    settings.RESULTS_DIR = tmp_path / "results"
    default_task_backend.clear()
    return settings.RESULTS_DIR


@pytest.fixture
def api():
    client = APIClient()
    client.force_authenticate(make_user(Role.DATA_MANAGER))
    return client


def _a_task_taken_long_ago() -> DBTaskResult:
    """The queue's record of a task a worker took three minutes ago and still holds as running."""
    with override_settings(TASKS=DATABASE):
        from analysis.tasks import compute_results_task

        result = compute_results_task.enqueue("no-such-study", "", "", "v")
    DBTaskResult.objects.filter(id=result.id).update(
        status=TaskResultStatus.RUNNING, started_at=timezone.now() - timedelta(minutes=3), worker_ids=["gone"]
    )
    return DBTaskResult.objects.get(id=result.id)


@pytest.mark.django_db
def test_the_state_is_one_row_in_the_database_and_nothing_on_disk(results_dir, django_capture_on_commit_callbacks):
    study = rated_study()
    with django_capture_on_commit_callbacks(execute=True):
        first = request_results(study, Scope())
        again = request_results(study, Scope())  # another server asking at the same moment

    assert (first.status, again.status) == ("queued", "queued")
    assert len(default_task_backend.results) == 1
    computation = ResultsComputation.objects.get()
    assert (computation.status, computation.version) == (ComputationStatus.QUEUED, first.version)
    assert computation.task_id == str(default_task_backend.results[0].id)
    assert list(results_dir.rglob("*.json")) == []


@pytest.mark.django_db
def test_a_running_computation_without_a_heartbeat_fails_and_can_be_posted_again(
    api, django_capture_on_commit_callbacks
):
    study = rated_study()
    version = results_state(study, Scope()).version
    ResultsComputation.objects.create(
        study=study,
        version=version,
        status=ComputationStatus.RUNNING,
        progress=5,
        heartbeat_at=timezone.now() - timedelta(minutes=3),
    )

    failed = api.get(f"/api/studies/{study.slug}/results/")

    assert failed.status_code == 503
    assert "worker computing these results stopped (no sign of life for 2 minutes)" in failed.json()["detail"]
    with django_capture_on_commit_callbacks(execute=True):
        assert api.post(f"/api/studies/{study.slug}/results/").status_code == 202
    assert ResultsComputation.objects.get().status == ComputationStatus.QUEUED
    assert len(default_task_backend.results) == 1


@pytest.mark.django_db
def test_a_computation_with_a_recent_heartbeat_is_left_running(api):
    study = rated_study()
    version = results_state(study, Scope()).version
    ResultsComputation.objects.create(
        study=study, version=version, status=ComputationStatus.RUNNING, progress=50, heartbeat_at=timezone.now()
    )
    response = api.get(f"/api/studies/{study.slug}/results/")
    assert response.status_code == 202
    assert (response.json()["status"], response.json()["progress"]) == ("running", 50)


@pytest.mark.django_db
def test_a_computation_left_queued_by_a_worker_that_took_it_and_died_fails_saying_so(api):
    study = rated_study()
    task = _a_task_taken_long_ago()
    version = results_state(study, Scope()).version
    computation = ResultsComputation.objects.create(study=study, version=version, task_id=str(task.id))
    ResultsComputation.objects.filter(pk=computation.pk).update(created_at=timezone.now() - timedelta(minutes=3))

    failed = api.get(f"/api/studies/{study.slug}/results/")

    assert failed.status_code == 503
    assert "worker that took this computation stopped before starting it" in failed.json()["detail"]
    task.refresh_from_db()
    assert task.status == TaskResultStatus.FAILED


@pytest.mark.django_db
def test_a_queued_computation_whose_task_waits_for_a_worker_stays_queued(api):
    study = rated_study()
    with override_settings(TASKS=DATABASE):
        api.get(f"/api/studies/{study.slug}/results/")  # queued; no worker has taken the task
    ResultsComputation.objects.update(created_at=timezone.now() - timedelta(minutes=30))
    assert api.get(f"/api/studies/{study.slug}/results/").json()["status"] == "queued"


@pytest.mark.django_db
def test_a_release_left_queued_by_a_worker_that_took_its_task_and_died_fails_with_a_reason(settings, tmp_path):
    settings.RELEASES_DIR = tmp_path / "releases"
    study = rated_study()
    task = _a_task_taken_long_ago()
    release = Release.objects.create(
        study=study, requested_by=make_user(), version="1.0.0", license_text="CC0\n", task_id=str(task.id)
    )
    waiting = Release.objects.create(study=study, requested_by=make_user(), version="1.0.1", license_text="CC0\n")
    Release.objects.update(created_at=timezone.now() - timedelta(minutes=3))

    assert [r.pk for r in fail_stale_releases()] == [release.pk]

    release.refresh_from_db()
    assert release.status == ReleaseStatus.FAILED
    assert "worker that took this build stopped before starting it" in release.error
    assert release.events.filter(action=ReleaseAction.WORKER_LOST).exists()
    task.refresh_from_db()
    assert task.status == TaskResultStatus.FAILED
    waiting.refresh_from_db()
    assert waiting.status == ReleaseStatus.QUEUED  # its task was never taken: a worker may still come


@pytest.mark.postgres
@pytest.mark.django_db(transaction=True)
def test_a_worker_killed_mid_computation_leaves_failed_results_that_can_be_computed_again(
    api, results_dir, monkeypatch
):
    study = rated_study()
    with override_settings(TASKS=DATABASE):
        assert api.post(f"/api/studies/{study.slug}/results/").status_code == 202
    computation = ResultsComputation.objects.get()

    # The computation is held still at its first read of the ratings, while a real worker runs it.
    kill_a_worker_held_at_its_first_read(
        lambda: ResultsComputation.objects.get(pk=computation.pk).progress >= 5,
        READINGROOM_RESULTS_DIR=str(results_dir),
    )

    # What the review found: "running, 5%" for ever, on every server (the state is in the database).
    running = api.get(f"/api/studies/{study.slug}/results/")
    assert running.status_code == 202
    assert (running.json()["status"], running.json()["progress"]) == ("running", 5)
    task = DBTaskResult.objects.get(id=computation.task_id)
    assert task.status == TaskResultStatus.RUNNING

    # The heartbeat timeout passes (shortened here: the worker beat every 10 s while it lived).
    monkeypatch.setattr(release_models, "HEARTBEAT_TIMEOUT", timedelta(seconds=1))
    time.sleep(1.5)
    failed = api.get(f"/api/studies/{study.slug}/results/")
    assert failed.status_code == 503
    assert "worker computing these results stopped" in failed.json()["detail"]
    task.refresh_from_db()
    assert task.status == TaskResultStatus.FAILED

    # Asked again, a fresh worker computes them.
    with override_settings(TASKS=DATABASE):
        assert api.post(f"/api/studies/{study.slug}/results/").status_code == 202
        call_command(
            "db_worker", batch=True, reload=False, startup_delay=False, interval=0, verbosity=0, stdout=io.StringIO()
        )
    done = api.get(f"/api/studies/{study.slug}/results/")
    assert done.status_code == 200
    assert not ResultsComputation.objects.exists()
