"""Building a study's PhysioNet release: six CSVs, a generated README, LICENSE and SHA256SUMS.

The files follow ../shared/spec/RELEASE.md to the byte. Everything is streamed from the
database in key order and written row by row, so memory does not grow with the study. The
same database state and options always give the same bytes: nothing depends on time,
primary keys or who rated what; annotation_index is a seeded shuffle within each example.
"""

import csv
import hashlib
import logging
import os
import random
import re
import shutil
import tempfile
import zipfile
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path

from django.contrib.auth.models import AbstractBaseUser
from django.db import connection, transaction
from django.db.models import Count, F, OuterRef, Q, QuerySet, Subquery
from django.db.models.functions import Collate
from django.template.loader import render_to_string
from django.utils import timezone

from annotation.models import Annotation, Dataset, Example, ExampleState, Rating, ReportType, Study, Task
from consensus.models import Adjudication, AdjudicationStatus, LabelSource
from exports.models import Release, ReleaseStatus

logger = logging.getLogger("readingroom.exports")

# ASCII digits only, and \Z: "$" would let a trailing newline through.
VERSION_PATTERN = re.compile(r"^[0-9]+(\.[0-9]+)*\Z")
CHUNK = 2000

TASK1_FULL = (
    "dataset",
    "study_id",
    "reref_variation",
    "report_type",
    "annotation_index",
    "rating",
    "rationale",
    "indication",
    "comparison",
    "technique",
    "findings",
    "impression",
)
TASK1_DISAGREED = ("dataset", "study_id", "reref_variation", "report_type", "rating", "rationale")
TASK1_CONSENSUS = ("dataset", "study_id", "reref_variation", "report_type", "rating", "label_source", "n_annotations")
TASK2_FULL = (
    "dataset",
    "study_id",
    "reref_variation",
    "annotation_index",
    "report_a_type",
    "rating",
    "rationale",
    "indication",
    "comparison",
    "technique",
    "report_a_findings",
    "report_a_impression",
    "report_b_findings",
    "report_b_impression",
)
TASK2_DISAGREED = ("dataset", "study_id", "reref_variation", "rating", "rationale")
TASK2_CONSENSUS = ("dataset", "study_id", "reref_variation", "rating", "label_source", "n_annotations")

COLUMNS = {
    "task1/task1_full.csv": TASK1_FULL,
    "task1/task1_disagreed.csv": TASK1_DISAGREED,
    "task1/task1_consensus.csv": TASK1_CONSENSUS,
    "task2/task2_full.csv": TASK2_FULL,
    "task2/task2_disagreed.csv": TASK2_DISAGREED,
    "task2/task2_consensus.csv": TASK2_CONSENSUS,
}

Progress = Callable[[int, int], None]


class ReleaseRefused(Exception):
    """The options do not make a valid release; nothing was written."""


@dataclass
class TaskCounts:
    annotations: int = 0
    examples: int = 0
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


def _label(rating: str) -> str:
    return Rating(rating).label if rating else ""


def _ordered(field_name: str) -> F | Collate:
    """Order by code point on every database (PostgreSQL's default collation is not byte order)."""
    if connection.vendor == "postgresql":
        return Collate(F(field_name), "C")
    return F(field_name)


def _key_order(prefix: str, *, with_report_type: bool) -> list:
    order = [
        _ordered(f"{prefix}pair__dataset__key"),
        _ordered(f"{prefix}pair__source_study_id"),
        _ordered(f"{prefix}pair__variation__key"),
    ]
    if with_report_type:
        order.append(_ordered(f"{prefix}report_type"))
    return order


class _CsvFile:
    """An RFC 4180 CSV: UTF-8 without BOM, CRLF, quoted only when needed, text as stored."""

    def __init__(self, path: Path, columns: tuple[str, ...]) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        self.handle = path.open("w", encoding="utf-8", newline="")
        self.writer = csv.writer(self.handle, lineterminator="\r\n", quoting=csv.QUOTE_MINIMAL)
        self.writer.writerow(columns)
        self.rows = 0

    def write(self, row: tuple) -> None:
        self.writer.writerow(row)
        self.rows += 1

    def close(self) -> None:
        self.handle.close()


def _shuffled_indexes(seed: int, example_public_id: object, annotation_ids: list) -> dict:
    """annotation public id -> annotation_index: a seeded shuffle, unrelated to reader or time."""
    ordered = sorted(annotation_ids)
    random.Random(f"readingroom-release:{seed}:{example_public_id}").shuffle(ordered)
    return {annotation_id: index for index, annotation_id in enumerate(ordered)}


def check_release_options(*, version: str, license_text: str, datasets: list[str] | None) -> list[str]:
    """The datasets to release (sorted, without repeats; empty = all), or ReleaseRefused naming the bad option."""
    if not VERSION_PATTERN.match(version):
        raise ReleaseRefused(f"Version '{version}' is not digits and dots (e.g. 1.0.0).")
    if not license_text.strip():
        raise ReleaseRefused("A release needs its licence text: supply a licence file, or set the study's licence.")
    known = set(Dataset.objects.values_list("key", flat=True))
    datasets = sorted(set(datasets or []))
    unknown = [d for d in datasets if d not in known]
    if unknown:
        raise ReleaseRefused(f"Unknown dataset(s): {', '.join(unknown)}. Use one of: {', '.join(sorted(known))}.")
    return datasets


def build_release(
    study: Study,
    out_dir: Path,
    *,
    license_text: str,
    version: str = "1.0.0",
    datasets: list[str] | None = None,
    include_unfinished: bool = False,
    progress: Progress | None = None,
) -> ReleaseSummary:
    """Write the release folder of a study into out_dir (which must not exist yet).

    Only examples with a consensus are released, unless include_unfinished, which adds the
    others with an empty consensus rating. datasets restricts the release to some datasets.
    """
    datasets = check_release_options(version=version, license_text=license_text, datasets=datasets)
    out_dir = Path(out_dir)
    if out_dir.exists() and any(out_dir.iterdir()):
        raise ReleaseRefused(f"{out_dir} is not empty. Give a new folder for the release.")

    in_study = Example.objects.filter(study=study)
    if datasets:
        in_study = in_study.filter(pair__dataset__key__in=datasets)
    released = in_study if include_unfinished else in_study.filter(consensus__isnull=False)

    total_rows = Annotation.objects.filter(example__in=released, voided_at__isnull=True).count() + released.count()
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
            examples = released.filter(task=task)
            full = _CsvFile(work / f"{prefix}/{prefix}_full.csv", COLUMNS[f"{prefix}/{prefix}_full.csv"])
            for row in _full_rows(study, examples, task, task_counts):
                full.write(row)
                if full.rows % CHUNK == 0:
                    advance(CHUNK)
            advance(full.rows % CHUNK)
            full.close()
            disagreed = _CsvFile(work / f"{prefix}/{prefix}_disagreed.csv", COLUMNS[f"{prefix}/{prefix}_disagreed.csv"])
            for row in _disagreed_rows(examples, task):
                disagreed.write(row)
            disagreed.close()
            consensus = _CsvFile(work / f"{prefix}/{prefix}_consensus.csv", COLUMNS[f"{prefix}/{prefix}_consensus.csv"])
            for row in _consensus_rows(examples, task, task_counts):
                consensus.write(row)
            advance(consensus.rows)
            consensus.close()
            task_counts.disagreed_rows = disagreed.rows
            counts[task] = task_counts
            row_counts[f"{prefix}/{prefix}_full.csv"] = full.rows
            row_counts[f"{prefix}/{prefix}_disagreed.csv"] = disagreed.rows
            row_counts[f"{prefix}/{prefix}_consensus.csv"] = consensus.rows

        summary = ReleaseSummary(
            version=version,
            datasets=datasets or sorted(set(in_study.values_list("pair__dataset__key", flat=True))),
            include_unfinished=include_unfinished,
            counts=counts,
            row_counts=row_counts,
        )
        (work / "LICENSE.txt").write_text(license_text, encoding="utf-8", newline="")
        readme = render_to_string("exports/release_readme.md", _readme_context(study, summary))
        (work / "README.md").write_text(readme, encoding="utf-8", newline="")
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


def _full_rows(study: Study, examples: QuerySet, task: str, counts: TaskCounts) -> Iterator[tuple]:
    """One row per individual annotation, grouped by example, in key order."""
    realism = task == Task.REALISM
    annotations = (
        Annotation.objects.filter(example__in=examples, voided_at__isnull=True)
        .order_by(*_key_order("example__", with_report_type=realism), "example_id")
        .values_list(
            "example_id",
            "example__public_id",
            "public_id",
            "example__pair__dataset__key",
            "example__pair__source_study_id",
            "example__pair__variation__key",
            "example__report_type",
            "report_a_type",
            "rating",
            "rationale",
            "example__pair__indication",
            "example__pair__comparison",
            "example__pair__technique",
            "example__pair__original_findings",
            "example__pair__original_impression",
            "example__pair__alternative_findings",
            "example__pair__alternative_impression",
        )
    )
    group: list[tuple] = []
    for row in annotations.iterator(chunk_size=CHUNK):
        if group and row[0] != group[0][0]:
            yield from _group_rows(study, group, realism, counts)
            group = []
        group.append(row)
    if group:
        yield from _group_rows(study, group, realism, counts)


def _group_rows(study: Study, group: list[tuple], realism: bool, counts: TaskCounts) -> Iterator[tuple]:
    indexes = _shuffled_indexes(study.seed, group[0][1], [row[2] for row in group])
    counts.annotations += len(group)
    counts.examples += 1
    counts.with_two += len(group) == 2
    counts.with_three += len(group) == 3
    rows = []
    for row in group:
        (_, _, annotation_id, dataset, study_id, variation, report_type, report_a_type, rating, rationale,
         indication, comparison, technique, o_findings, o_impression, a_findings, a_impression) = row  # fmt: skip
        original, alternative = (o_findings, o_impression), (a_findings, a_impression)
        index = indexes[annotation_id]
        if realism:
            findings, impression = original if report_type == ReportType.ORIGINAL else alternative
            rows.append(
                (
                    dataset,
                    study_id,
                    variation,
                    report_type,
                    index,
                    _label(rating),
                    rationale,
                    indication,
                    comparison,
                    technique,
                    findings,
                    impression,
                )
            )
        else:
            report_a, report_b = (
                (original, alternative) if report_a_type == ReportType.ORIGINAL else (alternative, original)
            )
            rows.append(
                (
                    dataset,
                    study_id,
                    variation,
                    index,
                    report_a_type,
                    _label(rating),
                    rationale,
                    indication,
                    comparison,
                    technique,
                    *report_a,
                    *report_b,
                )
            )
    position = 4 if realism else 3
    rows.sort(key=lambda r: r[position])
    yield from rows


def _disagreed_rows(examples: QuerySet, task: str) -> Iterator[tuple]:
    """The adjudicator's rating of every three-way disagreement (empty while still undecided)."""
    realism = task == Task.REALISM
    decided = Adjudication.objects.filter(example=OuterRef("pk"), status=AdjudicationStatus.DONE)
    split = (
        examples.filter(Q(consensus__label_source=LabelSource.ADJUDICATED) | Q(state=ExampleState.ADJUDICATION))
        .annotate(
            adjudicated_rating=Subquery(decided.values("rating")[:1]),
            adjudicated_rationale=Subquery(decided.values("rationale")[:1]),
        )
        .order_by(*_key_order("", with_report_type=realism))
        .values_list(
            "pair__dataset__key",
            "pair__source_study_id",
            "pair__variation__key",
            "report_type",
            "adjudicated_rating",
            "adjudicated_rationale",
        )
    )
    for dataset, study_id, variation, report_type, rating, rationale in split.iterator(chunk_size=CHUNK):
        keys = (dataset, study_id, variation, report_type) if realism else (dataset, study_id, variation)
        yield (*keys, _label(rating or ""), rationale or "")


def _consensus_rows(examples: QuerySet, task: str, counts: TaskCounts) -> Iterator[tuple]:
    realism = task == Task.REALISM
    rows = (
        examples.annotate(valid=Count("annotations", filter=Q(annotations__voided_at__isnull=True)))
        .order_by(*_key_order("", with_report_type=realism))
        .values_list(
            "pair__dataset__key",
            "pair__source_study_id",
            "pair__variation__key",
            "report_type",
            "consensus__rating",
            "consensus__label_source",
            "valid",
        )
    )
    for dataset, study_id, variation, report_type, rating, source, valid in rows.iterator(chunk_size=CHUNK):
        if rating:
            counts.by_label[Rating(rating).label] += 1
            counts.by_source[source] += 1
            counts.adjudicated += source == LabelSource.ADJUDICATED
        keys = (dataset, study_id, variation, report_type) if realism else (dataset, study_id, variation)
        yield (*keys, _label(rating or ""), source or "", valid)


def _write_checksums(folder: Path) -> None:
    """SHA256SUMS.txt in PhysioNet's format: "<hex> <path>\\n", one space, paths in byte order."""
    paths = sorted(
        (p.relative_to(folder).as_posix() for p in folder.rglob("*") if p.is_file()),
        key=lambda p: p.encode("utf-8"),
    )
    lines = [f"{_sha256(folder / path)} {path}\n" for path in paths if path != "SHA256SUMS.txt"]
    (folder / "SHA256SUMS.txt").write_text("".join(lines), encoding="utf-8", newline="")


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
        labels = [Rating(r).label for r in (
            (Rating.REALISTIC, Rating.MINOR_ISSUES, Rating.MAJOR_ISSUES)
            if task == Task.REALISM
            else (Rating.EQUIVALENT, Rating.MINOR_DISCREPANCY, Rating.MAJOR_DISCREPANCY)
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
        "taxonomy": list(study.variations.order_by("position", "key")),
        "datasets": Dataset.objects.filter(key__in=summary.datasets).order_by("key"),
    }


# --- Release builds in the background -------------------------------------------------------


def request_release(
    study: Study,
    *,
    user: AbstractBaseUser,
    version: str,
    datasets: list[str] | None,
    include_unfinished: bool,
    license_text: str,
) -> Release:
    """Queue a release build of a study; the worker (manage.py db_worker) builds it, never a request.

    Bad options are refused at once with ReleaseRefused (the same checks as build_release) and
    nothing is stored. The build is enqueued when the transaction commits, so the worker never
    looks for a Release row that is not there yet.
    """
    datasets = check_release_options(version=version, license_text=license_text, datasets=datasets)
    limit = Release._meta.get_field("version").max_length
    if len(version) > limit:
        raise ReleaseRefused(f"Version '{version}' is longer than {limit} characters.")
    with transaction.atomic():
        release = Release.objects.create(
            study=study,
            requested_by=user,
            version=version,
            datasets=datasets,
            include_unfinished=include_unfinished,
            license_text=license_text,
        )
        transaction.on_commit(partial(_enqueue_build, release.pk, str(release.public_id)))
    return release


def _enqueue_build(release_pk: int, public_id: str) -> None:
    from exports.tasks import build_release_task

    try:
        build_release_task.enqueue(public_id)
    except Exception:
        # Otherwise the release would wait for ever in the list: say so there instead.
        logger.exception("Could not queue the build of release %s", public_id)
        Release.objects.filter(pk=release_pk, status=ReleaseStatus.QUEUED).update(
            status=ReleaseStatus.FAILED,
            error="The build could not be queued (the error is in the server log). Try again later.",
            finished_at=timezone.now(),
        )
