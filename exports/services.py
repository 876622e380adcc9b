"""Building a study's PhysioNet release: six CSVs, a generated README, LICENSE and SHA256SUMS.

The files follow ../shared/spec/RELEASE.md to the byte. Everything is streamed from the
database in key order and written row by row, so memory does not grow with the study. The
same database state and options always give the same bytes: nothing depends on time,
primary keys or who rated what; annotation_index is a seeded shuffle within each example.
"""

import hashlib
import logging
import os
import re
import shutil
import tempfile
import uuid
import zipfile
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import timedelta
from functools import partial
from pathlib import Path

from django.conf import settings
from django.contrib.auth.models import AbstractBaseUser
from django.db import IntegrityError, transaction
from django.db.models import Count, OuterRef, Q, Subquery
from django.tasks import TaskResultStatus
from django.template.loader import render_to_string
from django.utils import timezone
from django_tasks_db.models import DBTaskResult

from annotation.models import Annotation, Dataset, Example, ExampleState, GuideVersion, RatingChoice, Study, Task
from consensus.models import LabelSource
from exports import models as release_models
from exports import rows
from exports.columns import JUDGE_FILES, RELEASE_FILES
from exports.models import Release, ReleaseAction, ReleaseEvent, ReleaseStatus

logger = logging.getLogger("readingroom.exports")

# ASCII digits only, and \Z: "$" would let a trailing newline through.
VERSION_PATTERN = re.compile(r"^[0-9]+(\.[0-9]+)*\Z")
CHUNK = 2000

# Every file's columns, in file order: exports.columns, the one definition the queries share.
COLUMNS = RELEASE_FILES
JUDGE_COLUMNS = JUDGE_FILES

Progress = Callable[[int, int], None]


class ReleaseRefused(Exception):
    """The options do not make a valid release; nothing was written. field names the option at fault."""

    def __init__(self, message: str, *, field: str | None = None) -> None:
        super().__init__(message)
        self.field = field


class ReleaseConflict(Exception):
    """The release is not in a state that allows this (e.g. delete while building); nothing changed."""


@dataclass
class TaskCounts:
    annotations: int = 0
    with_two: int = 0
    with_three: int = 0
    adjudicated: int = 0
    disagreed_rows: int = 0
    by_label: Counter = field(default_factory=Counter)
    by_source: Counter = field(default_factory=Counter)
    left_out: int = 0


@dataclass
class ReleaseSummary:
    version: str
    datasets: list[str]
    include_unfinished: bool
    counts: dict[str, TaskCounts]
    row_counts: dict[str, int]
    guide_version: int | None = None
    include_judges: bool = False
    judges: int = 0  # judges in judges/*.csv (include_judges)


class _CsvFile:
    """An RFC 4180 CSV: UTF-8 without BOM, CRLF, quoted only when needed, text as stored.

    The header is written here; the records come finished from the database (exports.rows).
    """

    def __init__(self, path: Path, columns: tuple[str, ...]) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        self.handle = path.open("wb")
        self.handle.write((",".join(columns) + "\r\n").encode("ascii"))
        self.rows = 0

    def write(self, record: bytes) -> None:
        self.handle.write(record)
        self.rows += 1

    def close(self) -> None:
        self.handle.close()


def check_release_options(*, version: str, license_text: str, datasets: list[str] | None) -> list[str]:
    """The datasets to release (sorted, without repeats; empty = all), or ReleaseRefused naming the bad option."""
    if not VERSION_PATTERN.match(version):
        raise ReleaseRefused(f"Version '{version}' is not digits and dots (e.g. 1.0.0).", field="version")
    if not license_text.strip():
        raise ReleaseRefused(
            "A release needs its licence text: supply a licence file, or set the study's licence.", field="license_text"
        )
    known = set(Dataset.objects.values_list("key", flat=True))
    datasets = sorted(set(datasets or []))
    unknown = [d for d in datasets if d not in known]
    if unknown:
        raise ReleaseRefused(
            f"Unknown dataset(s): {', '.join(unknown)}. Use one of: {', '.join(sorted(known))}.", field="datasets"
        )
    return datasets


NO_GUIDE = "This study has no reader guide to include. Write one, or build without it."


def check_guide_option(study: Study) -> None:
    """ReleaseRefused unless the study has a reader guide to add as guide.md."""
    if not GuideVersion.objects.filter(study=study).exists():
        raise ReleaseRefused(NO_GUIDE)


def build_release(
    study: Study,
    out_dir: Path,
    *,
    license_text: str,
    version: str = "1.0.0",
    datasets: list[str] | None = None,
    include_unfinished: bool = False,
    include_guide: bool = False,
    include_judges: bool = False,
    progress: Progress | None = None,
) -> ReleaseSummary:
    """Write the release folder of a study into out_dir (which must not exist yet).

    Only examples with a consensus are released, unless include_unfinished, which adds the
    others with an empty consensus rating. datasets restricts the release to some datasets.
    include_guide adds guide.md: the study's reader guide (its newest version, as stored).
    include_judges adds judges/task1_judges.csv and judges/task2_judges.csv (the automated
    judges' ratings of the released examples); without it nothing of the judges is written.
    Every query of the build reads one snapshot of the database (rows.snapshot()), so ratings
    submitted meanwhile cannot make the files disagree; progress is called inside it and must
    write through another connection (the worker's BuildMonitor does).
    """
    datasets = check_release_options(version=version, license_text=license_text, datasets=datasets)
    if include_guide:
        check_guide_option(study)
    out_dir = Path(out_dir)
    if out_dir.exists() and any(out_dir.iterdir()):
        raise ReleaseRefused(f"{out_dir} is not empty. Give a new folder for the release.")

    with rows.snapshot():
        return _build_in_snapshot(
            study,
            out_dir,
            license_text,
            version,
            datasets,
            include_unfinished=include_unfinished,
            include_guide=include_guide,
            include_judges=include_judges,
            progress=progress,
        )


def _build_in_snapshot(
    study: Study,
    out_dir: Path,
    license_text: str,
    version: str,
    datasets: list[str],
    *,
    include_unfinished: bool,
    include_guide: bool = False,
    include_judges: bool = False,
    progress: Progress | None,
) -> ReleaseSummary:
    in_study = Example.objects.filter(study=study)
    if datasets:
        in_study = in_study.filter(pair__dataset__key__in=datasets)
    released = in_study if include_unfinished else in_study.filter(consensus__isnull=False)

    # A rating still in its undo window is not in a release (its reader may take it back).
    rated = Annotation.objects.filter(example__in=released, voided_at__isnull=True, settled_at__isnull=False)
    total_rows = rated.count() + released.count()
    done = 0

    def advance(rows: int) -> None:
        nonlocal done
        done += rows
        if progress:
            progress(min(done, total_rows), total_rows)

    # Build next to the destination and move into place at the end: never a half-written release.
    out_dir.parent.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix=".release-", dir=out_dir.parent))
    try:
        counts = {}
        row_counts: dict[str, int] = {}
        for task, prefix in ((Task.REALISM, "task1"), (Task.EQUIVALENCE, "task2")):
            task_counts = TaskCounts()
            task_counts.left_out = in_study.filter(task=task).count() - released.filter(task=task).count()
            selection = rows.Selection(study.pk, task, datasets, include_unfinished)
            row_counts.update(_write_task(study, selection, work, prefix, task_counts, advance))
            counts[task] = task_counts
        judges = 0
        if include_judges:
            judges = _write_judges(study, rows.Selection(study.pk, "", datasets, include_unfinished), work, row_counts)

        summary = ReleaseSummary(
            version=version,
            datasets=datasets or sorted(set(in_study.values_list("pair__dataset__key", flat=True))),
            include_unfinished=include_unfinished,
            counts=counts,
            row_counts=row_counts,
            include_judges=include_judges,
            judges=judges,
        )
        if include_guide:
            # Read in the build's snapshot, like every file of it.
            guide = GuideVersion.objects.current(study)
            if guide is None:
                raise ReleaseRefused(NO_GUIDE)
            _write_utf8(work / "guide.md", guide.text)
            summary.guide_version = guide.number
        _write_utf8(work / "LICENSE.txt", license_text)
        readme = render_to_string("exports/release_readme.md", _readme_context(study, summary))
        _write_utf8(work / "README.md", readme)
        _write_checksums(work)
        out_dir.mkdir(parents=True, exist_ok=True)
        out_dir.rmdir()
        os.replace(work, out_dir)
    except BaseException:
        shutil.rmtree(work, ignore_errors=True)
        raise
    if progress:
        progress(total_rows, total_rows)
    return summary


def _write_task(
    study: Study, selection: rows.Selection, work: Path, prefix: str, counts: TaskCounts, advance: Callable
) -> dict[str, int]:
    """The full, disagreed and consensus files of one task; their row counts by path."""
    full = _CsvFile(work / f"{prefix}/{prefix}_full.csv", COLUMNS[f"{prefix}/{prefix}_full.csv"])
    for (record,) in rows.stream(*rows.full_query(selection, study.seed)):
        full.write(record)
        if full.rows % CHUNK == 0:
            advance(CHUNK)
    advance(full.rows % CHUNK)
    full.close()
    counts.annotations = full.rows

    disagreed = _CsvFile(work / f"{prefix}/{prefix}_disagreed.csv", COLUMNS[f"{prefix}/{prefix}_disagreed.csv"])
    for (record,) in rows.stream(*rows.disagreed_query(selection)):
        disagreed.write(record)
    disagreed.close()
    counts.disagreed_rows = disagreed.rows

    consensus = _CsvFile(work / f"{prefix}/{prefix}_consensus.csv", COLUMNS[f"{prefix}/{prefix}_consensus.csv"])
    for record, rating, source, annotations in rows.stream(*rows.consensus_query(selection), ("text", "text", "int8")):
        consensus.write(record)
        counts.with_two += annotations == 2
        counts.with_three += annotations == 3
        if rating:
            counts.by_label[RatingChoice(rating).label] += 1
            counts.by_source[source] += 1
            counts.adjudicated += source == LabelSource.ADJUDICATED
    advance(consensus.rows)
    consensus.close()

    return {
        f"{prefix}/{prefix}_full.csv": full.rows,
        f"{prefix}/{prefix}_disagreed.csv": disagreed.rows,
        f"{prefix}/{prefix}_consensus.csv": consensus.rows,
    }


def _write_judges(study: Study, selection: rows.Selection, work: Path, row_counts: dict[str, int]) -> int:
    """judges/task1_judges.csv and judges/task2_judges.csv; returns how many judges they hold."""
    judge_index = rows.judge_indexes(selection, study.seed)
    for task, path in ((Task.REALISM, "judges/task1_judges.csv"), (Task.EQUIVALENCE, "judges/task2_judges.csv")):
        out = _CsvFile(work / path, JUDGE_COLUMNS[path])
        if judge_index:
            task_selection = rows.Selection(study.pk, task, selection.datasets, selection.include_unfinished)
            for (record,) in rows.stream(*rows.judges_query(task_selection, judge_index)):
                out.write(record)
        out.close()
        row_counts[path] = out.rows
    return len(judge_index)


def _write_checksums(folder: Path) -> None:
    """SHA256SUMS.txt in PhysioNet's format: "<hex> <path>\\n", one space, paths in byte order."""
    # Every file written so far (this one comes last). Python orders strings by code point, which
    # is the byte order of their UTF-8.
    paths = sorted(p.relative_to(folder).as_posix() for p in folder.rglob("*") if p.is_file())
    lines = [f"{_sha256(folder / path)} {path}\n" for path in paths]
    _write_utf8(folder / "SHA256SUMS.txt", "".join(lines))


def _write_utf8(path: Path, text: str) -> None:
    """The text as UTF-8 bytes, its newlines as given: the same file whatever the platform or locale."""
    path.write_bytes(text.encode("utf-8"))


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def zip_release(folder: Path, zip_path: Path, *, root: str) -> str:
    """Zip a release folder reproducibly (fixed timestamps and order) and return the zip's SHA-256."""
    files = sorted((p for p in Path(folder).rglob("*") if p.is_file()), key=lambda p: p.as_posix().encode())
    with zipfile.ZipFile(zip_path, "w") as archive:
        for path in files:
            info = zipfile.ZipInfo(f"{root}/{path.relative_to(folder).as_posix()}", date_time=(1980, 1, 1, 0, 0, 0))
            info.compress_type = zipfile.ZIP_DEFLATED
            info.external_attr = 0o644 << 16
            with path.open("rb") as source, archive.open(info, "w") as target:
                shutil.copyfileobj(source, target, 1 << 20)
    return _sha256(zip_path)


def _readme_context(study: Study, summary: ReleaseSummary) -> dict:
    tasks = []
    for task, name in ((Task.REALISM, "Task 1: Realism"), (Task.EQUIVALENCE, "Task 2: Clinical Equivalence")):
        counts = summary.counts[task]
        labels = [RatingChoice(r).label for r in (
            (RatingChoice.REALISTIC, RatingChoice.MINOR_ISSUES, RatingChoice.MAJOR_ISSUES)
            if task == Task.REALISM
            else (RatingChoice.EQUIVALENT, RatingChoice.MINOR_DISCREPANCY, RatingChoice.MAJOR_DISCREPANCY)
        )]  # fmt: skip
        prefix = "task1" if task == Task.REALISM else "task2"
        tasks.append(
            {
                "name": name,
                "short": name.split(":")[0],
                "prefix": prefix,
                "counts": counts,
                "labels": [(label, counts.by_label.get(label, 0)) for label in labels],
                "sources": [(s.value, counts.by_source.get(s.value, 0)) for s in LabelSource],
                "full_rows": summary.row_counts[f"{prefix}/{prefix}_full.csv"],
                "disagreed_rows": summary.row_counts[f"{prefix}/{prefix}_disagreed.csv"],
                "consensus_rows": summary.row_counts[f"{prefix}/{prefix}_consensus.csv"],
            }
        )
    return {
        "study": study,
        "summary": summary,
        "tasks": tasks,
        "judge_files": [(path, summary.row_counts[path]) for path in JUDGE_COLUMNS if path in summary.row_counts],
        "taxonomy": list(study.variations.order_by("position", "key")),
        "datasets": Dataset.objects.filter(key__in=summary.datasets).order_by("key"),
    }


# --- Release builds in the background -------------------------------------------------------


def next_free_version(study: Study, version: str) -> str:
    """The first version after this one, counting up its last number, that no build of the study holds."""
    parts = version.split(".")
    held = Release.objects.filter(study=study).exclude(status=ReleaseStatus.FAILED)
    taken = set(held.values_list("version", flat=True))
    number = int(parts[-1])
    while True:
        number += 1
        candidate = ".".join([*parts[:-1], str(number)])
        if candidate not in taken:
            return candidate


def _version_taken(study: Study, version: str) -> ReleaseRefused:
    return ReleaseRefused(
        f"Version {version} of {study.slug} is already built or building, and a version names one content "
        f"for ever (even once its zip is deleted; only a failed build gives it back). "
        f"Use the next free version, {next_free_version(study, version)}.",
        field="version",
    )


def request_release(
    study: Study,
    *,
    user: AbstractBaseUser | None,
    version: str,
    datasets: list[str] | None,
    include_unfinished: bool,
    license_text: str,
    include_guide: bool = False,
    include_judges: bool = False,
    enqueue: bool = True,
) -> Release:
    """Queue a release build of a study; the worker (manage.py db_worker) builds it, never a request.

    Bad options are refused at once with ReleaseRefused (the same checks as build_release) and
    nothing is stored; so is a version the study already has (built, building, or built and
    deleted), naming the next free one. The database holds that rule too (a partial unique
    constraint), so two requests racing for one version cannot both win. The build is enqueued
    when the transaction commits, so the worker never looks for a Release row that is not there
    yet. enqueue=False reserves the version for a build run in this process (export_release).
    """
    datasets = check_release_options(version=version, license_text=license_text, datasets=datasets)
    if include_guide:
        check_guide_option(study)
    limit = Release._meta.get_field("version").max_length
    if len(version) > limit:
        raise ReleaseRefused(f"Version '{version}' is longer than {limit} characters.", field="version")
    if Release.objects.holding_version(study, version).exists():
        raise _version_taken(study, version)
    try:
        with transaction.atomic():
            release = Release.objects.create(
                study=study,
                requested_by=user,
                version=version,
                datasets=datasets,
                include_unfinished=include_unfinished,
                include_guide=include_guide,
                include_judges=include_judges,
                license_text=license_text,
            )
            _record(release, ReleaseAction.REQUESTED, user)
            if enqueue:
                transaction.on_commit(partial(_enqueue_build, release.pk, str(release.public_id)))
    except IntegrityError:
        if Release.objects.holding_version(study, version).exists():
            raise _version_taken(study, version) from None
        raise
    return release


def retry_release(release: Release, *, user: AbstractBaseUser) -> Release:
    """Queue a failed build again, with the same options and version (if no other build took it since)."""
    try:
        with transaction.atomic():
            locked = Release.objects.select_for_update().select_related("study").get(pk=release.pk)
            if not locked.can_retry:
                raise ReleaseConflict(
                    f"Release {locked.version} is {locked.get_status_display().lower()}"
                    f"{' and deleted' if locked.is_deleted else ''}: only a failed build can be built again."
                )
            Release.objects.filter(pk=locked.pk).update(
                status=ReleaseStatus.QUEUED, progress=0, error="", finished_at=None, heartbeat_at=None, task_id=""
            )
            _record(locked, ReleaseAction.RETRIED, user, detail=locked.error)
            transaction.on_commit(partial(_enqueue_build, locked.pk, str(locked.public_id)))
    except IntegrityError:
        raise _version_taken(release.study, release.version) from None
    locked.refresh_from_db()
    return locked


def delete_release(release: Release, *, user: AbstractBaseUser) -> Release:
    """Delete a finished build's zip from the disk. The row stays, marked deleted (by whom, when).

    A built version stays taken after its zip is deleted: a later build of the same version could
    hold other content under the same name. Nothing is ever deleted otherwise (no pruning).
    """
    with transaction.atomic():
        locked = Release.objects.select_for_update().get(pk=release.pk)
        if locked.is_deleted:
            raise ReleaseConflict(f"Release {locked.version} was already deleted.")
        if locked.is_building:
            raise ReleaseConflict(
                f"Release {locked.version} is still {locked.get_status_display().lower()}: "
                "delete it once it is done or has failed."
            )
        path = locked.zip_file()
        Release.objects.filter(pk=locked.pk).update(deleted_at=timezone.now(), deleted_by=user, zip_path="")
        _record(locked, ReleaseAction.DELETED, user, detail=locked.zip_path)
        if path is not None:
            # After the commit: a rolled-back deletion must not lose the file.
            transaction.on_commit(partial(_remove, path))
    locked.refresh_from_db()
    return locked


def fail_stale_releases() -> list[Release]:
    """Mark Failed every build whose worker is gone; remove its files.

    Gone: no heartbeat for HEARTBEAT_TIMEOUT while building, or still Queued though a worker took
    its task more than HEARTBEAT_TIMEOUT ago (it died between taking the task and starting the
    build, which no other worker will ever take again). Called when the releases are read (page,
    API) and when a worker starts a build. A build that is alive writes a heartbeat every
    HEARTBEAT_INTERVAL from a thread of its own, however slow its queries, so only a dead worker
    (kill -9, a machine gone) is caught here.
    """
    failed = []
    timeout = release_models.HEARTBEAT_TIMEOUT  # read here: a test may shorten it
    minutes = int(timeout.total_seconds() // 60)
    errors = {
        ReleaseStatus.RUNNING: (
            f"The worker building this release stopped (no sign of life for {minutes} minutes); "
            "its partial files were removed. Build it again."
        ),
        ReleaseStatus.QUEUED: (
            f"The worker that took this build stopped before starting it ({minutes} minutes ago). Build it again."
        ),
    }
    # One query when nothing is stale (every page poll asks); the lock and re-check only when something is.
    queued_long = Q(status=ReleaseStatus.QUEUED, created_at__lt=timezone.now() - timeout)
    candidates = list(
        Release.objects.filter(Q(pk__in=Release.objects.stale().values("pk")) | queued_long).values_list(
            "pk", "status", "task_id"
        )
    )
    if not candidates:
        return []
    dropped = tasks_taken_and_dropped([task_id for _, status, task_id in candidates if status == ReleaseStatus.QUEUED])
    stale = [pk for pk, status, task_id in candidates if status == ReleaseStatus.RUNNING or task_id in dropped]
    if not stale:
        return []
    with transaction.atomic():
        for release in Release.objects.filter(pk__in=stale).select_for_update(skip_locked=True):
            if release.status == ReleaseStatus.RUNNING:
                if not Release.objects.stale().filter(pk=release.pk).exists():
                    continue  # a heartbeat came meanwhile
                detail = f"last heartbeat {release.heartbeat_at}"
            elif release.status == ReleaseStatus.QUEUED and release.task_id in dropped:
                detail = f"task {release.task_id} taken by a worker that never started it"
            else:
                continue
            release.status, release.error, release.finished_at = (
                ReleaseStatus.FAILED,
                errors[release.status],
                timezone.now(),
            )
            release.save(update_fields=["status", "error", "finished_at"])
            _record(release, ReleaseAction.WORKER_LOST, None, detail=detail)
            fail_task_result(release.task_id, release.error)
            failed.append(release)
    for release in failed:
        when = "before the build started" if release.task_id in dropped else "during the build"
        logger.warning("Release %s: worker lost %s, marked failed", release.public_id, when)
        remove_build_files(release)
    return failed


def tasks_taken_and_dropped(task_ids: list[str]) -> set[str]:
    """Of these task ids, those a worker took more than HEARTBEAT_TIMEOUT ago and still holds as
    running in the queue: a job whose own row still says Queued was never started, its worker died.

    Ids of another backend (the test settings' Dummy, the Immediate backend) are left out.
    """
    ids = {}
    for task_id in task_ids:
        try:
            ids[uuid.UUID(task_id)] = task_id
        except (ValueError, TypeError):
            continue
    if not ids:
        return set()
    taken = DBTaskResult.objects.filter(
        id__in=list(ids),
        status=TaskResultStatus.RUNNING,
        started_at__lt=timezone.now() - release_models.HEARTBEAT_TIMEOUT,
    ).values_list("id", flat=True)
    return {ids[pk] for pk in taken}


def build_dir(release: Release) -> Path:
    """Where a build writes before its zip is complete; named after the release so a crashed build's can be found."""
    return Path(settings.RELEASES_DIR) / f".build-{release.public_id}"


def remove_build_files(release: Release) -> None:
    """A failed build's partial folder and zip (if it got as far as moving the zip into place)."""
    shutil.rmtree(build_dir(release), ignore_errors=True)
    _remove(Path(settings.RELEASES_DIR) / f"{release.public_id}.zip")


def _remove(path: Path) -> None:
    path.unlink(missing_ok=True)


def _record(release: Release, action: str, user: AbstractBaseUser | None, *, detail: str = "") -> None:
    actor = user if user is not None and user.is_authenticated else None
    ReleaseEvent.objects.create(release=release, action=action, actor=actor, detail=detail)


def fail_task_result(task_id: str, error: str) -> None:
    """The queue's own record of a job, left "running" by the dead worker (database queue only)."""
    try:
        task_uuid = uuid.UUID(task_id)
    except (ValueError, TypeError):
        return  # no task id, or another backend's (the test settings' Dummy, the Immediate backend)
    DBTaskResult.objects.filter(id=task_uuid, status=TaskResultStatus.RUNNING).update(
        status=TaskResultStatus.FAILED,
        finished_at=timezone.now(),
        exception_class_path="exports.tasks.WorkerLost",
        traceback=error,
    )


def _enqueue_build(release_pk: int, public_id: str) -> None:
    from exports.tasks import build_release_task

    try:
        result = build_release_task.enqueue(public_id)
    except Exception:
        # Otherwise the release would wait for ever in the list: say so there instead.
        logger.exception("Could not queue the build of release %s", public_id)
        Release.objects.filter(pk=release_pk, status=ReleaseStatus.QUEUED).update(
            status=ReleaseStatus.FAILED,
            error="The build could not be queued (the error is in the server log). Try again later.",
            finished_at=timezone.now(),
        )
        return
    Release.objects.filter(pk=release_pk).update(task_id=str(result.id))


# A task that has waited this long while none runs means no worker is taking tasks.
WORKER_SILENCE = timedelta(minutes=1)


def worker_seems_stopped() -> bool:
    """True when a background task (a release build, a results computation) has waited more than
    WORKER_SILENCE to start while none is running: the worker process is not running.

    The worker leaves no other trace, so this can tell only once something waits for it.
    """
    waiting = DBTaskResult.objects.filter(
        status=TaskResultStatus.READY, run_after__lte=timezone.now() - WORKER_SILENCE
    ).exists()
    return waiting and not DBTaskResult.objects.filter(status=TaskResultStatus.RUNNING).exists()


def studies_with_last_release() -> list[Study]:
    """Every study with its reading state (examples, with a consensus) and its last release build.

    One query: counts and the last build are subqueries, so the rows do not multiply.
    """
    examples = Example.objects.filter(study=OuterRef("pk")).order_by().values("study")
    last = Release.objects.filter(study=OuterRef("pk"), deleted_at__isnull=True).order_by("-created_at", "-pk")
    studies = Study.objects.annotate(
        n_examples=Subquery(examples.annotate(n=Count("pk")).values("n")[:1]),
        n_consensus=Subquery(examples.filter(state=ExampleState.CONSENSUS).annotate(n=Count("pk")).values("n")[:1]),
        last_version=Subquery(last.values("version")[:1]),
        last_status=Subquery(last.values("status")[:1]),
        last_release_at=Subquery(last.values("created_at")[:1]),
    ).order_by("name")
    studies = list(studies)
    for study in studies:
        study.last_status_label = ReleaseStatus(study.last_status).label if study.last_status else ""
    return studies
