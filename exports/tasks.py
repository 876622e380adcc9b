"""Release builds on Django's Tasks framework, run by `manage.py db_worker`, never in a web request."""

import logging
import os
import tempfile
from pathlib import Path

from django.conf import settings
from django.tasks import task
from django.utils import timezone

from exports.models import Release, ReleaseStatus
from exports.services import ReleaseRefused, build_release, zip_release

logger = logging.getLogger("readingroom.exports")

# Progress is written at most once per this many percent: a few UPDATEs per build, whatever its size.
PROGRESS_STEP = 5
# Building the files is most of the work; the rest of the bar is the zip.
BUILD_SHARE = 95


@task()
def build_release_task(release_public_id: str) -> dict:
    """Build a queued Release: the folder, then the zip in RELEASES_DIR, its SHA-256 and row counts.

    Runs once per release: a release that is no longer queued (built, failed, or taken by another
    worker) is left alone. Every outcome is written on the Release; a failure says why, in words
    for the data manager, while the traceback goes to the log.
    """
    claimed = Release.objects.filter(public_id=release_public_id, status=ReleaseStatus.QUEUED).update(
        status=ReleaseStatus.RUNNING, progress=0, error=""
    )
    if not claimed:
        logger.warning("Release %s is not queued (any more); nothing to build.", release_public_id)
        return {"release": release_public_id, "status": "skipped"}
    release = Release.objects.select_related("study").get(public_id=release_public_id)
    try:
        _build(release)
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


def _build(release: Release) -> None:
    releases_dir = Path(settings.RELEASES_DIR)
    releases_dir.mkdir(parents=True, exist_ok=True)
    reported = 0

    def progress(done: int, total: int) -> None:
        nonlocal reported
        percent = BUILD_SHARE * done // total if total else BUILD_SHARE
        if percent >= reported + PROGRESS_STEP:
            reported = percent
            Release.objects.filter(pk=release.pk).update(progress=percent)

    # Built beside the zips (same disk, not a RAM-backed /tmp), removed whatever happens.
    with tempfile.TemporaryDirectory(prefix=".build-", dir=releases_dir) as work:
        folder = Path(work) / release.root_folder
        summary = build_release(
            release.study,
            folder,
            license_text=release.license_text,
            version=release.version,
            datasets=release.datasets or None,
            include_unfinished=release.include_unfinished,
            progress=progress,
        )
        name = f"{release.public_id}.zip"
        partial = Path(work) / name
        sha256 = zip_release(folder, partial, root=release.root_folder)
        os.replace(partial, releases_dir / name)
    Release.objects.filter(pk=release.pk).update(
        status=ReleaseStatus.DONE,
        progress=100,
        sha256=sha256,
        row_counts=summary.row_counts,
        zip_path=name,
        finished_at=timezone.now(),
    )


def _fail(release: Release, error: str) -> None:
    Release.objects.filter(pk=release.pk).update(status=ReleaseStatus.FAILED, error=error, finished_at=timezone.now())
