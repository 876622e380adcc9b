"""Release builds on Django's Tasks framework, run by `manage.py db_worker`, never in a web request."""

import logging
import queue
import shutil
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

from django.conf import settings
from django.db import connection, connections
from django.tasks import task
from django.utils import timezone

from exports.building import (
    Progress,
    ReleaseRefused,
    ReleaseSummary,
    build_dir,
    build_release,
    remove_build_files,
    store_zip,
    zip_name,
    zip_release,
)
from exports.models import HEARTBEAT_INTERVAL, Release, ReleaseStatus
from exports.recovery import fail_stale_releases

logger = logging.getLogger("readingroom.exports")

# Progress is written at most once per this many percent: a few UPDATEs per build, whatever its size.
PROGRESS_STEP = 5
# Building the files is most of the work; the rest of the bar is the zip.
BUILD_SHARE = 95
# How long a progress write may wait for the monitor's thread before the build gives up on it.
WRITE_WAIT_SECONDS = 60


class BuildAbandoned(Exception):
    """The release was marked Failed by someone else while this build ran."""


class WorkerLost(Exception):
    """Recorded on the task queue's result of a build whose worker stopped without a word (see fail_stale_releases)."""


@task()
def build_release_task(release_public_id: str) -> dict:
    """Build a queued Release: the folder, then the zip in the releases storage, its SHA-256 and row counts.

    First marks Failed any build whose worker died (fail_stale_releases): a restarted worker
    cleans up after the one it replaces as soon as it has work.
    """
    fail_stale_releases()
    return run_release_build(release_public_id)


def run_release_build(
    release_public_id: str,
    *,
    folder_only: Path | None = None,
    on_progress: Progress | None = None,
    on_summary: Callable[[ReleaseSummary], None] | None = None,
) -> dict:
    """Build a queued Release in this process (the worker's task, and the export_release command).

    Runs once per release: a release that is no longer queued (built, failed, or taken by another
    worker) is left alone. Every outcome is written on the Release; a failure says why, in words
    for the data manager, while the traceback goes to the log, and leaves no file behind.
    folder_only: write the release folder there instead of a zip (the command's --out);
    on_progress and on_summary: the command's progress bar and report.
    """
    claimed = Release.objects.filter(public_id=release_public_id, status=ReleaseStatus.QUEUED).update(
        status=ReleaseStatus.RUNNING, progress=0, error="", heartbeat_at=timezone.now()
    )
    if not claimed:
        logger.warning("Release %s is not queued (any more); nothing to build.", release_public_id)
        return {"release": release_public_id, "status": "skipped"}
    release = Release.objects.select_related("study").get(public_id=release_public_id)
    monitor = BuildMonitor(release.pk)
    try:
        with monitor:
            summary = _build(release, monitor, folder_only, on_progress)
        if on_summary:
            on_summary(summary)
    except BuildAbandoned:
        logger.warning("Release %s was marked failed during its build; its files are removed.", release.public_id)
        remove_build_files(release)
    except ReleaseRefused as refused:
        _fail(release, str(refused))
    except Exception:
        logger.exception("Release %s failed to build", release.public_id)
        _fail(
            release,
            "The build failed unexpectedly; the error is in the server log. Try again, or ask an administrator.",
        )
    except BaseException:
        # The worker is being stopped (a second Ctrl+C, SIGTERM while busy): don't leave it "Building".
        _fail(release, "The worker was stopped during the build. Build it again.")
        raise
    release.refresh_from_db()
    return {"release": release_public_id, "status": release.status}


class BuildMonitor:
    """Writes a job's progress and heartbeat where the people waiting for it see them at once.

    For a release build by default; another job's row (a results computation) through model,
    running (the status its row has while it runs) and label (for the log).

    A build reads one snapshot of the database, in a transaction that stays open until its
    last file is written (exports.rows.snapshot). The monitor therefore writes from a thread of
    its own, on that thread's own connection, so that every write commits at once; progress()
    waits for its write. Between writes, the thread writes a heartbeat every HEARTBEAT_INTERVAL,
    however long a query takes: when the heartbeats stop, the worker is gone.

    Inside a transaction already (a test, a caller's atomic block) no snapshot is taken and
    another connection could not see the release: progress is written on this connection and
    no heartbeat thread runs.
    """

    def __init__(
        self, release_pk: int, *, model=Release, running: str = ReleaseStatus.RUNNING, label: str = "Release"
    ) -> None:
        self.release_pk = release_pk
        self.model, self.running, self.label = model, running, label
        self.threaded = not connection.in_atomic_block
        self._writes: queue.Queue = queue.Queue()
        self._thread: threading.Thread | None = None

    def __enter__(self) -> "BuildMonitor":
        if self.threaded:
            self._start()
        return self

    def __exit__(self, *exc_info) -> None:
        self._stop()

    @property
    def thread(self) -> threading.Thread | None:
        return self._thread

    @contextmanager
    def paused(self) -> Iterator[None]:
        """The heartbeat's thread stopped for a moment (while the analysis forks its processes:
        analysis.parallel.stopped_for_forks), then started again."""
        running = self._thread is not None
        self._stop()
        try:
            yield
        finally:
            if running:
                self._start()

    def _start(self) -> None:
        self._thread = threading.Thread(
            target=self._run, name=f"{self.label.lower()}-{self.release_pk}-heartbeat", daemon=True
        )
        self._thread.start()

    def _stop(self) -> None:
        if self._thread is not None:
            self._writes.put(None)
            self._thread.join()
            self._thread = None

    def progress(self, percent: int) -> None:
        if not self.threaded:
            self._write(percent)
            return
        written = threading.Event()
        self._writes.put((percent, written))
        if not written.wait(WRITE_WAIT_SECONDS):
            logger.warning("%s %s: progress %s%% not written in time", self.label, self.release_pk, percent)

    def _run(self) -> None:
        try:
            while True:
                try:
                    item = self._writes.get(timeout=HEARTBEAT_INTERVAL.total_seconds())
                except queue.Empty:
                    self._write(None)
                    continue
                if item is None:
                    return
                percent, written = item
                self._write(percent)
                written.set()
        finally:
            connections.close_all()

    def _write(self, percent: int | None) -> None:
        fields = {"heartbeat_at": timezone.now()}
        if percent is not None:
            fields["progress"] = percent
        try:
            self.model.objects.filter(pk=self.release_pk, status=self.running).update(**fields)
        except Exception:
            # A missed beat is not worth failing the build over; the next one may get through.
            if not self.threaded:
                raise
            logger.exception("%s %s: could not write progress or heartbeat", self.label, self.release_pk)


def _build(
    release: Release, monitor: BuildMonitor, folder_only: Path | None, on_progress: Progress | None
) -> ReleaseSummary:
    releases_dir = Path(settings.RELEASES_DIR)
    releases_dir.mkdir(parents=True, exist_ok=True)
    reported = 0

    def progress(done: int, total: int) -> None:
        nonlocal reported
        if on_progress:
            on_progress(done, total)
        percent = BUILD_SHARE * done // total if total else BUILD_SHARE
        if percent >= reported + PROGRESS_STEP:
            reported = percent
            monitor.progress(percent)

    options = {
        "license_text": release.license_text,
        "version": release.version,
        "datasets": release.datasets or None,
        "include_unfinished": release.include_unfinished,
        "include_guide": release.include_guide,
        "include_judges": release.include_judges,
        "progress": progress,
    }
    if folder_only is not None:
        # export_release: the folder is what was asked for (build_release writes it next to its
        # destination and moves it into place whole); no zip.
        summary = build_release(release.study, folder_only, **options)
        name, sha256 = "", ""
    else:
        # Built beside the zips (same disk, not a RAM-backed /tmp), in a folder named after the
        # release, so that the partial files of a worker killed mid-build can be found and removed.
        # From here on a failure anywhere leaves the clean-up to _fail (remove_build_files), the
        # same clean-up as for a build whose worker died.
        work = build_dir(release)
        shutil.rmtree(work, ignore_errors=True)
        work.mkdir()
        folder = work / release.root_folder
        summary = build_release(release.study, folder, **options)
        name = zip_name(release)
        partial = work / name
        sha256 = zip_release(folder, partial, root=release.root_folder)
        store_zip(partial, name, sha256)
        shutil.rmtree(work)
    finished = Release.objects.filter(pk=release.pk, status=ReleaseStatus.RUNNING).update(
        status=ReleaseStatus.DONE,
        progress=100,
        sha256=sha256,
        row_counts=summary.row_counts,
        zip_path=name,
        finished_at=timezone.now(),
        heartbeat_at=timezone.now(),
    )
    if not finished:
        # Marked Failed meanwhile (its heartbeats stopped reaching the database for too long):
        # that verdict stands, and a Failed release has no zip.
        raise BuildAbandoned(f"Release {release.public_id} was marked failed during its build.")
    return summary


def _fail(release: Release, error: str) -> None:
    # Whatever the build got as far as: its folder, or its zip moved into place just before the error.
    remove_build_files(release)
    # Only a running build: one already marked Failed (its worker taken for lost) keeps that reason.
    Release.objects.filter(pk=release.pk, status=ReleaseStatus.RUNNING).update(
        status=ReleaseStatus.FAILED, error=error, finished_at=timezone.now()
    )
