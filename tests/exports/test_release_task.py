"""The release build task, end to end through django.tasks: queued on commit, built by a worker."""

import io
import logging
import threading
import zipfile

import pytest
from django.core.management import call_command
from django.db import connection, connections
from django.tasks import TaskResultStatus, default_task_backend
from django.test import override_settings
from django.test.utils import CaptureQueriesContext
from django.utils import timezone
from django_tasks_db.models import DBTaskResult

from annotation.models import Role
from exports import tasks
from exports.building import ReleaseRefused, ReleaseSummary, build_dir
from exports.models import Release, ReleaseAction, ReleaseStatus
from exports.services import request_release
from exports.tasks import build_release_task
from tests.exports.release_helpers import ROW_COUNTS, make_release, rated_study, sha256_of
from tests.factories import make_study, make_user

IMMEDIATE = {"default": {"BACKEND": "django.tasks.backends.immediate.ImmediateBackend", "QUEUES": ["default"]}}
DATABASE = {"default": {"BACKEND": "django_tasks_db.DatabaseBackend", "QUEUES": ["default"]}}


@pytest.fixture(autouse=True)
def releases_dir(settings, tmp_path):
    settings.RELEASES_DIR = tmp_path / "releases"
    default_task_backend.clear()
    return settings.RELEASES_DIR


def _request(study, **options) -> Release:
    return request_release(
        study,
        user=make_user(Role.DATA_MANAGER),
        version=options.get("version", "1.0.0"),
        datasets=options.get("datasets"),
        include_unfinished=options.get("include_unfinished", False),
        license_text=options.get("license_text", "CC BY 4.0\n"),
    )


@pytest.mark.django_db
def test_it_is_enqueued_only_when_the_transaction_commits(django_capture_on_commit_callbacks):
    study = rated_study()

    with django_capture_on_commit_callbacks(execute=False) as callbacks:
        release = _request(study)
    assert default_task_backend.results == []

    callbacks[0]()
    [queued] = default_task_backend.results
    assert queued.args == [str(release.public_id)]


@pytest.mark.django_db
def test_request_release_refuses_what_build_release_refuses_and_stores_nothing(django_capture_on_commit_callbacks):
    study = rated_study()

    with django_capture_on_commit_callbacks(execute=True):
        with pytest.raises(ReleaseRefused, match="not digits and dots"):
            _request(study, version="1.0.x")
        with pytest.raises(ReleaseRefused, match="needs its licence text"):
            _request(study, license_text=" \n")
        with pytest.raises(ReleaseRefused, match=r"Unknown dataset\(s\): nope"):
            _request(study, datasets=["nope", "mimic-cxr"])
        with pytest.raises(ReleaseRefused) as too_long:
            _request(study, version="1." + "0" * 31)

    assert (str(too_long.value), too_long.value.field) == (
        f"Version '1.{'0' * 31}' is longer than 32 characters.",
        "version",
    )
    assert not Release.objects.exists()
    assert default_task_backend.results == []


@pytest.mark.django_db
def test_a_version_of_the_longest_length_is_taken_and_the_request_recorded():
    user = make_user(Role.DATA_MANAGER)
    version = "1." + "0" * 30

    release = request_release(
        rated_study(), user=user, version=version, datasets=None, include_unfinished=False, license_text="Text.\n"
    )

    assert release.version == version
    [event] = release.events.all()
    assert (event.action, event.actor, event.detail) == (ReleaseAction.REQUESTED, user, "")


@pytest.mark.django_db
def test_request_release_stores_the_datasets_as_build_release_reads_them():
    release = _request(rated_study(), datasets=["mimic-cxr", "iu-xray", "mimic-cxr"])

    assert release.datasets == ["iu-xray", "mimic-cxr"]


@pytest.mark.django_db
def test_the_immediate_backend_runs_the_build_through_django_tasks(django_capture_on_commit_callbacks):
    study = rated_study()

    with override_settings(TASKS=IMMEDIATE), django_capture_on_commit_callbacks(execute=True):
        release = _request(study)

    release.refresh_from_db()
    assert release.status == ReleaseStatus.DONE
    assert release.row_counts == ROW_COUNTS
    assert release.sha256 == sha256_of(release.zip_file())


@pytest.mark.django_db(transaction=True)
def test_the_database_worker_builds_a_queued_release():
    study = rated_study()

    with override_settings(TASKS=DATABASE):
        release = _request(study)  # autocommit: enqueued at once, as after a web request
        task_result = DBTaskResult.objects.get()
        assert task_result.status == TaskResultStatus.READY
        assert task_result.task_path == "exports.tasks.build_release_task"
        assert Release.objects.get().status == ReleaseStatus.QUEUED

        call_command(
            "db_worker", batch=True, reload=False, startup_delay=False, interval=0, verbosity=0, stdout=io.StringIO()
        )

    task_result.refresh_from_db()
    assert task_result.status == TaskResultStatus.SUCCESSFUL
    assert task_result.return_value == {"release": str(release.public_id), "status": ReleaseStatus.DONE}
    release.refresh_from_db()
    assert release.status == ReleaseStatus.DONE
    assert release.sha256 == sha256_of(release.zip_file())
    # Its last sign of life (shown in the admin) is its finish.
    assert release.heartbeat_at is not None and release.heartbeat_at >= release.finished_at


@pytest.mark.django_db
def test_the_same_ratings_and_options_give_the_same_files():
    study = rated_study()
    first, second = make_release(study, version="1.0.0"), make_release(study, version="1.0.1")

    build_release_task.call(str(first.public_id))
    build_release_task.call(str(second.public_id))

    first.refresh_from_db()
    second.refresh_from_db()
    assert first.zip_path != second.zip_path
    with zipfile.ZipFile(first.zip_file()) as one, zipfile.ZipFile(second.zip_file()) as other:
        # Only the README names the version (and the folder inside the zip is named after it).
        names = sorted(name.removeprefix("s1-1.0.0/") for name in one.namelist())
        assert names == sorted(name.removeprefix("s1-1.0.1/") for name in other.namelist())
        for name in names:
            if name not in ("README.md", "SHA256SUMS.txt"):
                assert one.read(f"s1-1.0.0/{name}") == other.read(f"s1-1.0.1/{name}"), name


@pytest.mark.django_db
def test_the_options_reach_the_build():
    study = rated_study()
    release = make_release(study, version="3.0", datasets=["iu-xray"], license_text="Mine.\n")

    build_release_task.call(str(release.public_id))

    release.refresh_from_db()
    assert release.status == ReleaseStatus.DONE
    assert release.row_counts["task1/task1_full.csv"] == 0  # nothing from iu-xray in this study
    with zipfile.ZipFile(release.zip_file()) as archive:
        assert archive.read("s1-3.0/LICENSE.txt") == b"Mine.\n"


@pytest.mark.django_db
def test_a_release_is_built_once(caplog):
    study = rated_study()
    release = make_release(study)
    build_release_task.call(str(release.public_id))
    release.refresh_from_db()

    again = build_release_task.call(str(release.public_id))

    assert again == {"release": str(release.public_id), "status": "skipped"}
    assert f"Release {release.public_id} is not queued (any more); nothing to build." in caplog.messages
    built = Release.objects.get()
    assert (built.status, built.sha256, built.finished_at) == (ReleaseStatus.DONE, release.sha256, release.finished_at)


@pytest.mark.django_db
def test_progress_is_written_at_most_every_five_percent(monkeypatch):
    release = make_release(make_study("s1"))
    seen = []

    def build(study, out_dir, *, progress, **options):
        for done in range(0, 1001):
            progress(done, 1000)
            seen.append(Release.objects.values_list("progress", flat=True).get(pk=release.pk))
        out_dir.mkdir(parents=True)
        (out_dir / "README.md").write_text("x")
        return ReleaseSummary("1.0.0", [], False, {}, {"task1/task1_full.csv": 0})

    monkeypatch.setattr(tasks, "build_release", build)
    with CaptureQueriesContext(connection) as queries:
        build_release_task.call(str(release.public_id))

    updates = [q["sql"] for q in queries if q["sql"].startswith('UPDATE "exports_release"')]
    assert len(updates) <= 2 + 100 // tasks.PROGRESS_STEP  # claim, each step, done
    assert sorted(seen) == seen
    assert seen[-1] == tasks.BUILD_SHARE  # 100 only once the zip is written too
    release.refresh_from_db()
    assert (release.status, release.progress) == (ReleaseStatus.DONE, 100)


@pytest.mark.django_db
def test_a_failed_build_leaves_no_files_behind(monkeypatch, caplog, releases_dir):
    release = make_release(make_study("s1"))
    # Another worker's build, alive: this failure is not its failure.
    elsewhere = make_release(make_study("s2"), status=ReleaseStatus.RUNNING, heartbeat_at=timezone.now())

    def half_built(study, out_dir, **options):
        out_dir.mkdir(parents=True)
        (out_dir / "task1").mkdir()
        raise OSError("No space left on device")

    monkeypatch.setattr(tasks, "build_release", half_built)
    build_release_task.call(str(release.public_id))

    release.refresh_from_db()
    assert release.status == ReleaseStatus.FAILED
    # The data manager's words; the traceback goes to the log.
    assert release.error == (
        "The build failed unexpectedly; the error is in the server log. Try again, or ask an administrator."
    )
    [logged] = [r for r in caplog.records if r.name == "readingroom.exports"]
    assert (logged.getMessage(), logged.exc_info[0]) == (f"Release {release.public_id} failed to build", OSError)
    assert (release.zip_path, release.sha256) == ("", "")
    assert list(releases_dir.iterdir()) == []
    elsewhere.refresh_from_db()
    assert (elsewhere.status, elsewhere.error) == (ReleaseStatus.RUNNING, "")


@pytest.mark.django_db
def test_a_worker_stopped_mid_build_marks_the_release_failed(monkeypatch):
    release = make_release(make_study("s1"))

    def interrupted(*args, **kwargs):
        raise SystemExit(1)

    monkeypatch.setattr(tasks, "build_release", interrupted)
    with pytest.raises(SystemExit):
        build_release_task.call(str(release.public_id))

    release.refresh_from_db()
    assert release.status == ReleaseStatus.FAILED
    assert release.error == "The worker was stopped during the build. Build it again."


@pytest.mark.django_db
def test_a_build_that_cannot_be_queued_says_so(monkeypatch, caplog, django_capture_on_commit_callbacks):
    class Broken:
        def enqueue(self, *args):
            raise ConnectionError("queue unavailable")

    monkeypatch.setattr("exports.services.build_release_task", Broken())
    study = rated_study()
    waiting = make_release(study, version="0.9.0")  # another build, queued before: left alone
    with django_capture_on_commit_callbacks(execute=True), caplog.at_level(logging.ERROR, logger="exports.services"):
        release = _request(study)

    release.refresh_from_db()
    assert release.status == ReleaseStatus.FAILED
    assert release.error == "The build could not be queued (the error is in the server log). Try again later."
    assert release.finished_at is not None
    assert [r.getMessage() for r in caplog.records] == [f"Could not queue the build of release {release.public_id}"]
    waiting.refresh_from_db()
    assert (waiting.status, waiting.finished_at) == (ReleaseStatus.QUEUED, None)


@pytest.mark.parametrize(
    "committed",
    [
        pytest.param(False, marks=pytest.mark.django_db, id="in-a-test-transaction"),
        pytest.param(True, marks=pytest.mark.django_db(transaction=True), id="committed-as-in-a-worker"),
    ],
)
def test_progress_is_written_while_the_rows_are_still_streaming(monkeypatch, caplog, committed):
    # A real build reporting progress after every row: the worker writes it to the database while
    # the build is still reading a file (on PostgreSQL, in the middle of a COPY).
    monkeypatch.setattr("exports.building.CHUNK", 1)
    monkeypatch.setattr(tasks, "PROGRESS_STEP", 1)
    release = make_release(rated_study())
    written, seen_elsewhere = [], []
    write = tasks.BuildMonitor._write

    def write_and_look(monitor, percent):
        write(monitor, percent)
        if percent is not None:
            written.append(percent)
            if committed:
                seen_elsewhere.append(_progress_seen_by_another_connection(release.pk))

    monkeypatch.setattr(tasks.BuildMonitor, "_write", write_and_look)
    with CaptureQueriesContext(connection) as queries:
        build_release_task.call(str(release.public_id))

    release.refresh_from_db()
    assert (release.status, release.error) == (ReleaseStatus.DONE, "")
    assert release.row_counts == ROW_COUNTS
    if committed:
        # The worker's case: the build reads its snapshot in an open transaction, so progress is
        # written by the monitor's thread on a connection of its own, committed as it happens:
        # another connection saw each value while the rows were still streaming.
        assert len(seen_elsewhere) > 10
        assert seen_elsewhere == sorted(seen_elsewhere)
        assert set(seen_elsewhere) == set(written)
        # Each write was confirmed in time: no warning.
        assert "not written in time" not in caplog.text
    else:
        progress = [
            q["sql"] for q in queries if q["sql"].startswith('UPDATE "exports_release"') and "progress" in q["sql"]
        ]
        assert len(progress) > 10


@pytest.mark.django_db
def test_a_progress_write_the_monitor_never_confirms_is_given_up_on_with_a_warning(monkeypatch, caplog):
    # The monitor's thread is stuck (here: never started): the build goes on after the wait,
    # and the log says which write was lost.
    monkeypatch.setattr(tasks, "WRITE_WAIT_SECONDS", 0.01)
    monitor = tasks.BuildMonitor(release_pk=41)
    monitor.threaded = True

    monitor.progress(35)

    assert [r.getMessage() for r in caplog.records] == ["Release 41: progress 35% not written in time"]


@pytest.mark.django_db
def test_the_monitor_writes_to_its_own_release_while_it_is_building_only():
    mine = make_release(make_study("s1"), status=ReleaseStatus.RUNNING)
    other = make_release(make_study("s2"), status=ReleaseStatus.RUNNING)
    monitor = tasks.BuildMonitor(mine.pk)
    assert not monitor.threaded  # inside the test's transaction: written on this connection

    monitor.progress(40)
    Release.objects.filter(pk=mine.pk).update(status=ReleaseStatus.FAILED)
    monitor.progress(60)

    assert dict(Release.objects.values_list("pk", "progress")) == {mine.pk: 40, other.pk: 0}


@pytest.mark.django_db
def test_the_releases_folder_is_made_on_first_use_with_its_parents(settings, tmp_path):
    settings.RELEASES_DIR = tmp_path / "not" / "made" / "yet"
    release = make_release(rated_study())

    assert build_release_task.call(str(release.public_id))["status"] == ReleaseStatus.DONE
    assert [p.name for p in settings.RELEASES_DIR.iterdir()] == [f"{release.public_id}.zip"]


@pytest.mark.django_db
def test_a_build_replaces_what_an_earlier_attempt_left_and_finishes_only_its_own_release(releases_dir):
    release = make_release(rated_study())
    leftover = build_dir(release) / "task1" / "half_written.csv"
    leftover.parent.mkdir(parents=True)
    leftover.write_text("study_id\n1")
    elsewhere = make_release(make_study("s2"), status=ReleaseStatus.RUNNING, heartbeat_at=timezone.now())

    build_release_task.call(str(release.public_id))

    release.refresh_from_db()
    assert release.status == ReleaseStatus.DONE and release.finished_at is not None
    assert not build_dir(release).exists()
    with zipfile.ZipFile(releases_dir / release.zip_path) as built:
        assert not [name for name in built.namelist() if "half_written" in name]
    elsewhere.refresh_from_db()
    assert (elsewhere.status, elsewhere.zip_path, elsewhere.finished_at) == (ReleaseStatus.RUNNING, "", None)


@pytest.mark.django_db
def test_a_build_starts_from_nothing_whatever_an_earlier_attempt_left(monkeypatch):
    # A release queued again after a failure: its bar starts at 0 and the old error is gone.
    release = make_release(make_study("s1"), progress=60, error="The worker was stopped during the build.")
    seen = []

    def look(study, out_dir, **options):
        seen.append(Release.objects.values_list("status", "progress", "error").get(pk=release.pk))
        raise ReleaseRefused("stop here")

    monkeypatch.setattr(tasks, "build_release", look)
    build_release_task.call(str(release.public_id))

    assert seen == [(ReleaseStatus.RUNNING, 0, "")]
    # A refusal found during the build is the release's error, word for word.
    release.refresh_from_db()
    assert (release.status, release.error) == (ReleaseStatus.FAILED, "stop here")


@pytest.mark.django_db
def test_a_write_that_fails_stops_an_inline_build_but_only_logs_on_the_monitors_thread(monkeypatch, caplog):
    def database_gone(*args, **kwargs):
        raise ConnectionError("the database went away")

    monkeypatch.setattr(Release.objects, "filter", database_gone)
    inline = tasks.BuildMonitor(release_pk=41)
    with pytest.raises(ConnectionError):
        inline.progress(50)
    assert caplog.records == []

    on_thread = tasks.BuildMonitor(release_pk=41)
    on_thread.threaded = True
    on_thread._write(50)  # what the monitor's thread runs: the next beat may get through
    [record] = caplog.records
    assert record.getMessage() == "Release 41: could not write progress or heartbeat"
    assert record.exc_info[0] is ConnectionError


def _progress_seen_by_another_connection(release_pk: int) -> int:
    seen = []

    def look():
        try:
            seen.append(Release.objects.values_list("progress", flat=True).get(pk=release_pk))
        finally:
            connections.close_all()

    thread = threading.Thread(target=look)
    thread.start()
    thread.join()
    return seen[0]
