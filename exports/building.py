"""Building a study's PhysioNet release: six CSVs, a generated README, LICENSE and SHA256SUMS.

The files follow ../shared/spec/RELEASE.md to the byte. Everything is streamed from the
database in key order and written row by row, so memory does not grow with the study. The
same database state and options always give the same bytes: nothing depends on time,
primary keys or who rated what; annotation_index is a seeded shuffle within each example.

The worker's build (exports.tasks) writes in build_dir(release), a local folder, then puts the zip in
the releases storage (store_zip): a local folder on one host, an S3-compatible object store on several.
"""

import hashlib
import os
import re
import shutil
import tempfile
import zipfile
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from django.conf import settings
from django.core.files import File
from django.core.files.storage import FileSystemStorage, storages
from django.template.loader import render_to_string

from annotation.models import Annotation, Dataset, Example, GuideVersion, RatingChoice, Study, Task
from consensus.models import LabelSource
from exports import rows
from exports.columns import JUDGE_FILES, RELEASE_FILES
from exports.models import Release

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


def build_dir(release: Release) -> Path:
    """Where a build writes before its zip is stored: a local folder of the worker's host, in
    RELEASES_DIR, named after the release so that a crashed build's can be found."""
    return Path(settings.RELEASES_DIR) / f".build-{release.public_id}"


def zip_name(release: Release) -> str:
    """The zip's name in the releases storage (Release.zip_path once it is stored)."""
    return f"{release.public_id}.zip"


class StoredZipMismatch(Exception):
    """The zip read back from the releases storage is not the zip that was built."""


def store_zip(zip_path: Path, name: str, sha256: str) -> None:
    """Put a built zip into the releases storage under name, once, and check it there.

    On one host (a local folder) it is moved into place: the same disk, a rename. In an object store
    it is uploaded in one go (in parts when large, by django-storages and boto3). Either way it is
    then read back from the storage and its SHA-256 compared with the build's; a mismatch removes it
    and raises StoredZipMismatch. A failed store leaves nothing under name.
    """
    storage = storages["releases"]
    storage.delete(name)  # what an earlier attempt of this build may have left
    try:
        if isinstance(storage, FileSystemStorage):
            target = Path(storage.path(name))
            target.parent.mkdir(parents=True, exist_ok=True)
            os.replace(zip_path, target)
        else:
            with zip_path.open("rb") as handle:
                stored = storage.save(name, File(handle, name=name))
            if stored != name:
                storage.delete(stored)
                raise StoredZipMismatch(f"The storage kept the zip as {stored}, not {name}.")
        found = stored_sha256(name)
        if found != sha256:
            raise StoredZipMismatch(f"The stored zip's SHA-256 is {found}; the build's is {sha256}.")
    except BaseException:
        storage.delete(name)
        raise


def stored_sha256(name: str) -> str:
    """The SHA-256 of a zip in the releases storage, read from there in blocks."""
    digest = hashlib.sha256()
    with storages["releases"].open(name, "rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def remove_build_files(release: Release) -> None:
    """A failed build's partial folder, and its zip if it got as far as storing it."""
    shutil.rmtree(build_dir(release), ignore_errors=True)
    storages["releases"].delete(zip_name(release))
