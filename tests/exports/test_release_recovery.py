"""A build that breaks, or whose worker dies, ends Failed with a reason and leaves no file behind."""

import threading
import time
import uuid
import zipfile
from datetime import timedelta

import pytest
from django.db import connections
from django.tasks import TaskResultStatus, default_task_backend
from django.test import override_settings
from django.urls import reverse
from django.utils import timezone
from django_tasks_db.models import DBTaskResult

from annotation.models import Role
from exports import building, models, recovery, rows, services, tasks
from exports.models import Release, ReleaseAction, ReleaseStatus
from exports.tasks import build_release_task
from tests.exports.release_helpers import make_release, rated_study
from tests.factories import make_study, make_user

POLL = {"HTTP_HX_REQUEST": "true", "HTTP_HX_TARGET": "releases"}
DATABASE = {"default": {"BACKEND": "django_tasks_db.DatabaseBackend", "QUEUES": ["default"]}}


@pytest.fixture(autouse=True)
def releases_dir(settings, tmp_path):
    settings.RELEASES_DIR = tmp_path / "releases"
    default_task_backend.clear()
    return settings.RELEASES_DIR


def _everything_under(folder) -> list[str]:
    return sorted(p.relative_to(folder).as_posix() for p in folder.rglob("*")) if folder.exists() else []


# --- A build that breaks half-way --------------------------------------------------------------


@pytest.mark.django_db
def test_a_build_broken_half_way_through_its_files_fails_and_leaves_nothing(monkeypatch, releases_dir):
    release = make_release(rated_study())
    on_disk_when_it_broke = []
    consensus_query = rows.consensus_query

    def break_on_task2(selection):
        if selection.task == "equivalence":
            on_disk_when_it_broke.extend(_everything_under(releases_dir))
            raise OSError("No space left on device")
        return consensus_query(selection)

    monkeypatch.setattr(rows, "consensus_query", break_on_task2)
    build_release_task.call(str(release.public_id))

    release.refresh_from_db()
    assert release.status == ReleaseStatus.FAILED
    assert "failed unexpectedly" in release.error
    assert release.finished_at is not None
    assert (release.zip_path, release.sha256, release.row_counts) == ("", "", {})
    # It did break half-way: Task 1's files were written by then.
    assert any(name.endswith("task1/task1_consensus.csv") for name in on_disk_when_it_broke)
    assert _everything_under(releases_dir) == []


@pytest.mark.django_db
def test_a_build_broken_while_zipping_fails_and_leaves_no_partial_zip(monkeypatch, releases_dir):
    release = make_release(rated_study())
    zip_release = building.zip_release

    def half_a_zip(folder, zip_path, *, root):
        zip_release(folder, zip_path, root=root)
        with zipfile.ZipFile(zip_path) as archive:
            assert archive.namelist()
        raise OSError("Disk quota exceeded")

    monkeypatch.setattr(tasks, "zip_release", half_a_zip)
    build_release_task.call(str(release.public_id))

    release.refresh_from_db()
    assert release.status == ReleaseStatus.FAILED
    assert _everything_under(releases_dir) == []


@pytest.mark.django_db
def test_a_build_broken_after_its_zip_was_moved_into_place_removes_the_zip(monkeypatch, releases_dir):
    release = make_release(rated_study())
    replace = building.os.replace

    def moved_then_broken(source, destination):
        replace(source, destination)
        if str(destination).endswith(".zip"):
            raise OSError("Input/output error")

    monkeypatch.setattr(building.os, "replace", moved_then_broken)
    build_release_task.call(str(release.public_id))

    release.refresh_from_db()
    assert release.status == ReleaseStatus.FAILED
    assert "failed unexpectedly" in release.error
    assert _everything_under(releases_dir) == []


# --- A worker that died mid-build ----------------------------------------------------------------


def _task(status, *, waited: timedelta = timedelta(0), task_path: str = "exports.tasks.build_release_task", **fields):
    """A row of the database task queue, waiting since `waited` ago."""
    return DBTaskResult.objects.create(
        status=status,
        args_kwargs={"args": [], "kwargs": {}},
        task_path=task_path,
        backend_name="default",
        run_after=timezone.now() - waited,
        **fields,
    )


def _left_by_a_dead_worker(study, releases_dir, *, minutes_ago: int = 5) -> Release:
    """What kill -9 of db_worker mid-build leaves: Building, an old heartbeat, a partial folder, a running task."""
    task = _task(TaskResultStatus.RUNNING, started_at=timezone.now() - timedelta(minutes=minutes_ago))
    release = make_release(
        study,
        status=ReleaseStatus.RUNNING,
        progress=40,
        heartbeat_at=timezone.now() - timedelta(minutes=minutes_ago),
        task_id=str(task.id),
    )
    partial = building.build_dir(release) / release.root_folder / "task1"
    partial.mkdir(parents=True)
    (partial / "task1_full.csv").write_bytes(b"dataset,study_id\r\nmimic-cxr,1")
    return release


@pytest.mark.django_db
def test_the_page_fails_a_build_whose_worker_died_and_stops_polling(client, releases_dir, caplog):
    study = make_study("s1")
    release = _left_by_a_dead_worker(study, releases_dir)
    heartbeat = release.heartbeat_at
    client.force_login(make_user(Role.DATA_MANAGER))

    html = client.get(reverse("release_list", args=[study.slug]), **POLL).content.decode()

    release.refresh_from_db()
    assert release.status == ReleaseStatus.FAILED
    # HEARTBEAT_TIMEOUT, in the data manager's words.
    assert release.error == (
        "The worker building this release stopped (no sign of life for 2 minutes); "
        "its partial files were removed. Build it again."
    )
    assert f"Release {release.public_id}: worker lost during the build, marked failed" in caplog.messages
    assert release.error in html
    assert "hx-trigger" not in html  # no more polling
    assert reverse("release_retry", args=[release.public_id]) in html
    assert reverse("release_delete", args=[release.public_id]) in html
    assert _everything_under(releases_dir) == []
    task = DBTaskResult.objects.get(id=release.task_id)
    assert (task.status, task.exception_class_path, task.traceback) == (
        TaskResultStatus.FAILED,
        "exports.tasks.WorkerLost",
        release.error,
    )
    assert task.finished_at is not None
    [event] = release.events.all()
    assert (event.action, event.actor, event.detail) == (ReleaseAction.WORKER_LOST, None, f"last heartbeat {heartbeat}")


@pytest.mark.django_db
def test_failing_a_dead_workers_build_leaves_the_queues_other_running_tasks_alone(releases_dir):
    release = _left_by_a_dead_worker(make_study("s1"), releases_dir)
    other = _task(TaskResultStatus.RUNNING, task_path="analysis.tasks.compute_results_task", started_at=timezone.now())

    recovery.fail_stale_releases()

    assert DBTaskResult.objects.get(id=release.task_id).status == TaskResultStatus.FAILED
    other.refresh_from_db()
    assert (other.status, other.finished_at) == (TaskResultStatus.RUNNING, None)


@pytest.mark.django_db
def test_the_api_fails_a_build_whose_worker_died(client, releases_dir):
    release = _left_by_a_dead_worker(make_study("s1"), releases_dir)
    client.force_login(make_user(Role.DATA_MANAGER))

    body = client.get(f"/api/releases/{release.public_id}/").json()

    assert body["status"] == "failed"
    assert "worker building this release stopped" in body["error"]
    assert _everything_under(releases_dir) == []


@pytest.mark.django_db
def test_the_next_build_a_worker_starts_fails_the_one_whose_worker_died(releases_dir):
    study = rated_study()
    dead = _left_by_a_dead_worker(study, releases_dir)
    queued = make_release(study)

    build_release_task.call(str(queued.public_id))

    dead.refresh_from_db()
    queued.refresh_from_db()
    assert (dead.status, queued.status) == (ReleaseStatus.FAILED, ReleaseStatus.DONE)
    assert [p.name for p in releases_dir.iterdir()] == [queued.zip_path]


@pytest.mark.django_db
def test_a_queued_build_whose_task_was_taken_and_dropped_fails_and_one_taken_just_now_does_not(releases_dir, caplog):
    study = make_study("s1")
    long_ago = timezone.now() - timedelta(minutes=5)
    dropped = make_release(study, task_id=str(_task(TaskResultStatus.RUNNING, started_at=long_ago).id))
    just_taken = make_release(study, task_id=str(_task(TaskResultStatus.RUNNING, started_at=timezone.now()).id))
    Release.objects.filter(pk__in=[dropped.pk, just_taken.pk]).update(created_at=long_ago)
    # Another job's task, taken long ago and still running: not a build's, left alone.
    other = _task(TaskResultStatus.RUNNING, task_path="analysis.tasks.compute_results_task", started_at=long_ago)

    failed = recovery.fail_stale_releases()

    assert [release.pk for release in failed] == [dropped.pk]
    dropped.refresh_from_db()
    just_taken.refresh_from_db()
    assert dropped.status == ReleaseStatus.FAILED
    assert (
        dropped.error == "The worker that took this build stopped before starting it (2 minutes ago). Build it again."
    )
    assert just_taken.status == ReleaseStatus.QUEUED
    [event] = dropped.events.all()
    assert event.detail == f"task {dropped.task_id} taken by a worker that never started it"
    assert f"Release {dropped.public_id}: worker lost before the build started, marked failed" in caplog.messages
    other.refresh_from_db()
    assert other.status == TaskResultStatus.RUNNING


@pytest.mark.django_db
def test_a_build_with_a_recent_heartbeat_is_left_alone(client, releases_dir):
    study = make_study("s1")
    alive = _left_by_a_dead_worker(study, releases_dir, minutes_ago=1)
    client.force_login(make_user(Role.DATA_MANAGER))

    html = client.get(reverse("release_list", args=[study.slug]), **POLL).content.decode()

    alive.refresh_from_db()
    assert alive.status == ReleaseStatus.RUNNING
    assert 'hx-trigger="every 2s"' in html
    assert _everything_under(releases_dir) != []
    assert not alive.events.exists()


@pytest.mark.django_db
def test_a_build_without_any_heartbeat_counts_from_its_request(client):
    study = make_study("s1")
    old = make_release(study, status=ReleaseStatus.RUNNING)
    Release.objects.filter(pk=old.pk).update(created_at=timezone.now() - timedelta(hours=1))
    fresh = make_release(study, status=ReleaseStatus.RUNNING)

    failed = recovery.fail_stale_releases()

    assert [release.pk for release in failed] == [old.pk]
    fresh.refresh_from_db()
    assert fresh.status == ReleaseStatus.RUNNING


@pytest.mark.django_db(transaction=True)
def test_a_build_keeps_its_heartbeat_while_a_long_query_runs(monkeypatch):
    # The heartbeat comes from a thread of the worker, not from the rows: a slow query (or a
    # stalled COPY) cannot make a live build look dead, and a dead worker stops beating at once.
    monkeypatch.setattr(tasks, "HEARTBEAT_INTERVAL", timedelta(seconds=0.05))
    release = make_release(rated_study())
    beats = []
    stream = rows.stream

    def slow_stream(*args, **kwargs):
        first = _heartbeat_seen_elsewhere(release.pk)
        time.sleep(0.25)  # five heartbeat intervals
        beats.append((first, _heartbeat_seen_elsewhere(release.pk)))
        yield from stream(*args, **kwargs)

    monkeypatch.setattr(rows, "stream", slow_stream)
    build_release_task.call(str(release.public_id))

    release.refresh_from_db()
    assert release.status == ReleaseStatus.DONE
    assert len(beats) == 6
    assert all(later > earlier for earlier, later in beats)
    assert not any(thread.name.startswith("release-") for thread in threading.enumerate())


def _heartbeat_seen_elsewhere(release_pk: int):
    seen = []

    def look():
        try:
            seen.append(Release.objects.values_list("heartbeat_at", flat=True).get(pk=release_pk))
        finally:
            connections.close_all()

    thread = threading.Thread(target=look)
    thread.start()
    thread.join()
    return seen[0]


@pytest.mark.django_db(transaction=True)
def test_a_database_worker_records_the_task_of_the_build(releases_dir):
    # The task id links a release to the queue's record, which fail_stale_releases closes too.
    study = rated_study()
    with override_settings(TASKS=DATABASE):
        release = services.request_release(
            study,
            user=make_user(Role.DATA_MANAGER),
            version="1.0.0",
            datasets=None,
            include_unfinished=False,
            license_text="CC0\n",
        )
    release.refresh_from_db()
    assert uuid.UUID(release.task_id) == DBTaskResult.objects.get().id


def test_the_documented_timeout_is_several_heartbeats():
    assert models.HEARTBEAT_TIMEOUT >= 6 * models.HEARTBEAT_INTERVAL


@pytest.mark.django_db
@pytest.mark.parametrize("when", ["while zipping", "just before it is marked done"])
def test_a_build_marked_failed_while_it_ran_stays_failed_without_a_zip(monkeypatch, caplog, releases_dir, when):
    # A worker frozen (not dead) past the timeout, then resumed: the verdict "Failed" stands.
    release = make_release(rated_study())
    zip_release, rmtree = building.zip_release, tasks.shutil.rmtree

    def freeze():
        Release.objects.filter(pk=release.pk).update(heartbeat_at=timezone.now() - timedelta(hours=1))
        assert recovery.fail_stale_releases()

    def frozen_while_zipping(folder, zip_path, *, root):
        freeze()
        return zip_release(folder, zip_path, root=root)

    def frozen_after_the_last_file_step(path, *args, **kwargs):
        rmtree(path, *args, **kwargs)
        if path == building.build_dir(release) and not args and not kwargs:
            freeze()

    if when == "while zipping":
        monkeypatch.setattr(tasks, "zip_release", frozen_while_zipping)
    else:
        monkeypatch.setattr(tasks.shutil, "rmtree", frozen_after_the_last_file_step)
    outcome = build_release_task.call(str(release.public_id))

    release.refresh_from_db()
    assert outcome["status"] == release.status == ReleaseStatus.FAILED
    assert "worker building this release stopped" in release.error
    assert release.zip_path == ""
    assert _everything_under(releases_dir) == []
    if when == "just before it is marked done":
        # Its files all written, it finds its verdict when it would mark itself done.
        abandoned = f"Release {release.public_id} was marked failed during its build; its files are removed."
        assert abandoned in caplog.messages


@pytest.mark.django_db
def test_a_task_id_of_another_backend_is_left_alone(releases_dir):
    release = _left_by_a_dead_worker(make_study("s1"), releases_dir)
    Release.objects.filter(pk=release.pk).update(task_id="x" * 32)  # the Dummy and Immediate backends' ids

    [failed] = recovery.fail_stale_releases()

    assert failed.status == ReleaseStatus.FAILED


@pytest.mark.django_db
def test_the_worker_seems_stopped_only_when_a_task_waited_a_minute_and_none_runs():
    _task(TaskResultStatus.SUCCESSFUL, waited=timedelta(hours=1))
    _task(TaskResultStatus.FAILED, waited=timedelta(hours=1))
    assert not services.worker_seems_stopped()  # nothing waits

    _task(TaskResultStatus.READY, waited=timedelta(seconds=30))
    assert not services.worker_seems_stopped()  # it has not waited long yet

    _task(TaskResultStatus.READY, waited=timedelta(minutes=2))
    assert services.worker_seems_stopped()

    _task(TaskResultStatus.RUNNING, waited=timedelta(minutes=3))
    assert not services.worker_seems_stopped()  # a worker is busy: the wait is a queue
