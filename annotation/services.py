"""Workflows of the study set-up: importing candidate pairs and drawing the study sample.

The web pages, the API and the management commands all call these functions.
"""

import random
from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path

from django.conf import settings
from django.contrib.auth.models import AbstractBaseUser
from django.db import transaction
from django.template.defaultfilters import pluralize
from django.utils import timezone

from annotation import importing, reports, signals
from annotation.bulk import insert_rows
from annotation.importing import ImportProblem, ImportRejected
from annotation.models import (
    REPORT_SECTIONS,
    CandidatePair,
    Dataset,
    Example,
    OriginalReport,
    Preferences,
    ReportType,
    Study,
    Task,
    Variation,
    Verdict,
)

Progress = Callable[[int, int], None]

TEXT_FIELDS = (*importing.CONTEXT_COLUMNS, *importing.REPORT_COLUMNS)
# What an import compares with a stored pair: a difference in any of these is refused.
PAIR_FIELDS = ("verdict", *TEXT_FIELDS, "generator")
BATCH_SIZE = 1000


@dataclass
class ImportReport:
    rows: int
    created: int
    unchanged: int
    dry_run: bool

    @property
    def summary(self) -> str:
        if self.created == 0:
            return f"Nothing to import: all {self.rows} pairs in the file are already stored, unchanged."
        verb = "Would import" if self.dry_run else "Imported"
        unchanged = f"; {self.unchanged} already stored, unchanged" if self.unchanged else ""
        return f"{verb} {self.created} new pair{pluralize(self.created)}{unchanged}."

    def as_dict(self) -> dict:
        return {
            "rows": self.rows,
            "created": self.created,
            "unchanged": self.unchanged,
            "dry_run": self.dry_run,
            "summary": self.summary,
        }


def import_pairs(
    study: Study,
    data: bytes,
    *,
    filename: str = "",
    dry_run: bool = False,
    progress: Progress | None = None,
) -> ImportReport:
    """Import a CSV or JSON Lines file of candidate pairs into a study, all or nothing.

    Raises ImportRejected naming every bad line and field; the database is then unchanged.
    Re-importing pairs that are already stored with the same content changes nothing.
    """
    rows = importing.parse(data, filename=filename, max_bytes=settings.READINGROOM_IMPORT_MAX_BYTES)
    return _import_pair_rows(study, rows, dry_run=dry_run, progress=progress)


def import_rewrites(
    study: Study,
    data: bytes,
    *,
    filename: str = "",
    dry_run: bool = False,
    progress: Progress | None = None,
) -> ImportReport:
    """Import a CSV or JSON Lines file of rewrites, each joined to its stored original report.

    A row names the original by dataset and study id; the original's sections (imported with
    import_reports) complete it into a candidate pair, which is then imported exactly as a row
    of a pair file would be (same checks, same idempotence, all or nothing). A rewrite whose
    original is not stored is an error naming its line.
    """
    rows = importing.parse(
        data, filename=filename, max_bytes=settings.READINGROOM_IMPORT_MAX_BYTES, layout=importing.REWRITES
    )
    pair_rows, problems = _join_originals(rows)
    return _import_pair_rows(
        study, pair_rows, dry_run=dry_run, progress=progress, problems=problems, rows_read=len(rows)
    )


def _join_originals(rows: list[importing.ParsedRow]) -> tuple[list[importing.ParsedRow], list[ImportProblem]]:
    """Complete rewrite rows with their original reports' sections, as rows of a pair file."""
    datasets = {d.key: d for d in Dataset.objects.all()}
    problems: list[ImportProblem] = []
    wanted: dict[Dataset, set[str]] = defaultdict(set)
    keyed: list[tuple[importing.ParsedRow, Dataset, str]] = []
    for row in rows:
        dataset = datasets.get(str(row.values["dataset"]).strip())
        if dataset is None:
            problems.append(
                ImportProblem(
                    f"Unknown dataset '{row.values['dataset']}'. Use one of: {', '.join(sorted(datasets))}.",
                    line=row.line,
                    field="dataset",
                )
            )
            continue
        study_id = dataset.normalize_study_id(str(row.values["study_id"]))
        wanted[dataset].add(study_id)
        keyed.append((row, dataset, study_id))

    originals: dict[tuple[int, str], dict[str, str]] = {}
    for dataset, study_ids in wanted.items():
        ordered = sorted(study_ids)
        for start in range(0, len(ordered), BATCH_SIZE):
            for values in OriginalReport.objects.filter(
                dataset=dataset, source_study_id__in=ordered[start : start + BATCH_SIZE]
            ).values("source_study_id", *REPORT_SECTIONS):
                originals[(dataset.pk, values.pop("source_study_id"))] = values

    pair_rows = []
    for row, dataset, study_id in keyed:
        original = originals.get((dataset.pk, study_id))
        if original is None:
            problems.append(
                ImportProblem(
                    f"No original report of {dataset.key} study {study_id} is stored. Import the dataset's "
                    f"reports first (manage.py import_reports --dataset {dataset.key} ...); a report with neither "
                    "Findings nor Impression is never stored.",
                    line=row.line,
                    field="study_id",
                )
            )
            continue
        values = dict(row.values)
        values.update(
            indication=original["indication"],
            comparison=original["comparison"],
            technique=original["technique"],
            original_findings=original["findings"],
            original_impression=original["impression"],
        )
        pair_rows.append(importing.ParsedRow(line=row.line, values=values))
    return pair_rows, problems[: importing.MAX_PROBLEMS]


def _import_pair_rows(
    study: Study,
    rows: list[importing.ParsedRow],
    *,
    dry_run: bool,
    progress: Progress | None,
    problems: list[ImportProblem] | None = None,
    rows_read: int | None = None,
) -> ImportReport:
    """The one way pairs are stored: check rows of pair-file values and write them, all or nothing."""
    datasets = {d.key: d for d in Dataset.objects.all()}
    variations = {v.key: v for v in study.variations.all()}
    problems = list(problems or [])
    candidates: dict[tuple[int, str, int], tuple[int, CandidatePair]] = {}

    for row in rows:
        if len(problems) >= importing.MAX_PROBLEMS:
            break
        pair = _pair_from_row(study, row, datasets, variations, problems)
        if pair is None:
            continue
        key = (pair.dataset_id, pair.source_study_id, pair.variation_id)
        if key in candidates:
            first_line = candidates[key][0]
            problems.append(
                ImportProblem(
                    f"Duplicate pair: dataset {pair.dataset.key}, study {pair.source_study_id}, variation "
                    f"{pair.variation.key} is already on line {first_line}. Keep one of the two lines.",
                    line=row.line,
                )
            )
            continue
        candidates[key] = (row.line, pair)
    if problems:
        raise ImportRejected(sorted(problems, key=lambda problem: problem.line or 0)[: importing.MAX_PROBLEMS])

    with transaction.atomic():
        # One import per study at a time: a concurrent import of the same new pairs waits, then
        # finds them stored, instead of failing on the unique constraint.
        Study.objects.select_for_update().filter(pk=study.pk).exists()
        stored = {
            (p.dataset_id, p.source_study_id, p.variation_id): p
            for p in CandidatePair.objects.filter(study=study).only(
                "dataset_id", "source_study_id", "variation_id", *PAIR_FIELDS
            )
        }
        new_pairs: list[CandidatePair] = []
        for key, (line, pair) in candidates.items():
            existing = stored.get(key)
            if existing is None:
                new_pairs.append(pair)
                continue
            changed = [name for name in PAIR_FIELDS if getattr(existing, name) != getattr(pair, name)]
            if changed:
                problems.append(
                    ImportProblem(
                        f"This pair is already stored with a different {', '.join(changed)}. Stored pairs are "
                        "never changed by an import: fix the line to match, or import the pair into a new study.",
                        line=line,
                        field=changed[0],
                    )
                )
                if len(problems) >= importing.MAX_PROBLEMS:
                    break
        if problems:
            raise ImportRejected(problems)

        total = len(new_pairs)
        if progress:
            progress(0, total)
        if not dry_run:
            for start in range(0, total, BATCH_SIZE):
                CandidatePair.objects.bulk_create(new_pairs[start : start + BATCH_SIZE])
                if progress:
                    progress(min(start + BATCH_SIZE, total), total)
        elif progress:
            progress(total, total)

    total_rows = len(rows) if rows_read is None else rows_read
    return ImportReport(rows=total_rows, created=len(new_pairs), unchanged=total_rows - len(new_pairs), dry_run=dry_run)


def _pair_from_row(
    study: Study,
    row: importing.ParsedRow,
    datasets: dict[str, Dataset],
    variations: dict[str, Variation],
    problems: list[ImportProblem],
) -> CandidatePair | None:
    values = {name: value if isinstance(value, str) else "" for name, value in row.values.items()}
    before = len(problems)

    def problem(field_name: str, message: str) -> None:
        problems.append(ImportProblem(message, line=row.line, field=field_name))

    dataset = datasets.get(values["dataset"].strip())
    if dataset is None:
        problem(
            "dataset",
            f"Unknown dataset '{values['dataset']}'. Use one of: {', '.join(sorted(datasets))}; "
            "or ask an administrator to add it under Datasets in the admin.",
        )
    variation = variations.get(values["reref_variation"].strip())
    if variation is None:
        problem(
            "reref_variation",
            f"Unknown variation '{values['reref_variation']}' for study {study.slug}. "
            f"Use one of: {', '.join(variations)}.",
        )
    verdict = values["verdict"].strip()
    if verdict not in Verdict.values:
        problem("verdict", f"Invalid verdict '{values['verdict']}'. Use one of: {', '.join(Verdict.values)}.")

    study_id = dataset.normalize_study_id(values["study_id"]) if dataset else values["study_id"].strip()
    if not study_id:
        problem("study_id", "The study id is empty. Give the report's id in its dataset.")
    elif len(study_id) > 64:
        problem("study_id", "The study id is longer than 64 characters. Check that the columns are in the right place.")
    elif dataset and dataset.numeric_study_ids and not (study_id.isascii() and study_id.isdigit()):
        prefix = f" (optionally prefixed with '{dataset.study_id_prefix}')" if dataset.study_id_prefix else ""
        problem("study_id", f"'{values['study_id']}' is not a {dataset.key} study id: use digits only{prefix}.")

    for side in (ReportType.ORIGINAL, ReportType.ALTERNATIVE):
        if not values[f"{side}_findings"].strip() and not values[f"{side}_impression"].strip():
            problem(
                f"{side}_findings",
                f"The {side} report has neither Findings nor Impression. Fill in at least one of "
                f"{side}_findings and {side}_impression.",
            )

    if len(problems) > before:
        return None
    texts = {name: values.get(name, "") for name in TEXT_FIELDS}
    return CandidatePair(
        study=study,
        dataset=dataset,
        source_study_id=study_id,
        variation=variation,
        verdict=verdict,
        generator=_generator_metadata(row.values),
        **texts,
    )


def _generator_metadata(values: dict[str, object]) -> dict:
    """The optional generator columns that have a value, as JSON (an attempt number as a number)."""
    metadata = {}
    for name in importing.GENERATOR_COLUMNS:
        value = values.get(name)
        if isinstance(value, str):
            value = value.strip()
            if name == "attempt" and value.isascii() and value.isdigit():
                value = int(value)
        if value not in (None, ""):
            metadata[name] = value
    return metadata


# --- Original reports ----------------------------------------------------------------------

NO_FINDINGS_OR_IMPRESSION = "neither Findings nor Impression"
REPORT_ROW_FIELDS = ("dataset", "source_study_id", *REPORT_SECTIONS, "content_hash", "source", "created_at")
REPORT_BATCH_SIZE = 5000


@dataclass
class ReportImport:
    """What import_reports read and did."""

    dataset: str
    dry_run: bool
    reports: int = 0
    created: int = 0
    unchanged: int = 0
    with_section: dict[str, int] = field(default_factory=lambda: dict.fromkeys(REPORT_SECTIONS, 0))
    skipped: dict[str, list[str]] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)

    def summary_lines(self, *, max_ids: int = 50) -> list[str]:
        verb = "Would store" if self.dry_run else "Stored"
        lines = [
            f"{self.reports:,} {self.dataset} report{pluralize(self.reports)} read: {verb.lower()} "
            f"{self.created:,} new, {self.unchanged:,} already stored unchanged, "
            f"{sum(len(ids) for ids in self.skipped.values()):,} skipped."
            if self.created
            else f"{self.reports:,} {self.dataset} reports read: nothing to store, "
            f"{self.unchanged:,} already stored unchanged, {sum(len(ids) for ids in self.skipped.values()):,} skipped.",
            "With each section: "
            + ", ".join(f"{name} {count:,}" for name, count in self.with_section.items())
            + f" (of {self.reports:,}).",
        ]
        for reason, ids in self.skipped.items():
            shown = ", ".join(ids[:max_ids]) + (f" and {len(ids) - max_ids:,} more" if len(ids) > max_ids else "")
            lines.append(f"Skipped, {reason}: {len(ids):,} ({shown}).")
        lines.extend(self.notes)
        return lines

    def as_dict(self) -> dict:
        return {
            "dataset": self.dataset,
            "dry_run": self.dry_run,
            "reports": self.reports,
            "created": self.created,
            "unchanged": self.unchanged,
            "with_section": self.with_section,
            "skipped": self.skipped,
            "notes": self.notes,
        }


def import_reports(
    dataset: Dataset,
    path: Path,
    *,
    split_csv: Path | None = None,
    split: str | None = None,
    dry_run: bool = False,
    progress: Progress | None = None,
) -> ReportImport:
    """Store a dataset's original reports, read from its own files as distributed, all or nothing.

    Streams the file (annotation.reports), checks each report and writes new ones in batches in
    one transaction: any problem (named with file, line and field) rolls everything back. A
    report with neither Findings nor Impression is skipped and named. A report already stored
    with the same sections changes nothing; with different sections it is an error (stored
    reports are never changed). MIMIC-CXR can be restricted to one split of its split file.
    """
    reader = reports.READERS.get(dataset.key)
    if reader is None:
        raise ImportRejected(
            [
                ImportProblem(
                    f"ReadingRoom cannot read {dataset.key}'s own files; it reads {', '.join(reports.READERS)}. "
                    "Import this dataset's pairs as a candidate-pair file instead."
                )
            ]
        )
    if (split_csv is None) != (split is None):
        raise ImportRejected(
            [ImportProblem("Give both the split file (--split-csv) and the split (--split), or neither.")]
        )
    if split is not None and dataset.key != "mimic-cxr":
        raise ImportRejected([ImportProblem("Only MIMIC-CXR is restricted to a split (its split file).")])
    if not path.exists():
        raise ImportRejected([ImportProblem(f"{path}: no such file or folder.")])
    source = reports.read_mimic_cxr(path, only=reports.read_split_csv(split_csv, split)) if split else reader(path)
    result = ReportImport(dataset=dataset.key, dry_run=dry_run, notes=list(source.notes))
    problems: list[ImportProblem] = []
    now = timezone.now()

    with transaction.atomic():
        # One import per dataset at a time; a second one waits, then finds the reports stored.
        Dataset.objects.select_for_update().filter(pk=dataset.pk).exists()
        stored = dict(
            OriginalReport.objects.filter(dataset=dataset)
            .values_list("source_study_id", "content_hash")
            .iterator(chunk_size=10_000)
        )
        seen: dict[str, str] = {}
        batch: list[tuple] = []
        read = 0
        if progress:
            progress(0, source.total or 0)
        for item in source.items:
            read += 1
            if progress and read % 1000 == 0:
                progress(read, source.total or 0)
            if isinstance(item, ImportProblem):
                problems.append(item)
                if len(problems) >= importing.MAX_PROBLEMS:
                    break
                continue
            study_id = dataset.normalize_study_id(item.study_id)
            if study_id in seen:
                problems.append(
                    ImportProblem(
                        f"Study {study_id} is read a second time (first from {seen[study_id]}). "
                        "Give each report once: is a file listed twice?",
                        line=item.line,
                        file=item.file,
                    )
                )
                continue
            seen[study_id] = item.source
            result.reports += 1
            if isinstance(item, reports.SkippedReport):
                result.skipped.setdefault(item.reason, []).append(study_id)
                continue
            for name, text in item.sections.items():
                if text:
                    result.with_section[name] += 1
            if not item.has_findings_or_impression:
                result.skipped.setdefault(NO_FINDINGS_OR_IMPRESSION, []).append(study_id)
                continue
            digest = item.content_hash()
            known = stored.get(study_id)
            if known == digest:
                result.unchanged += 1
            elif known is not None:
                problems.append(
                    ImportProblem(
                        f"Study {study_id} is already stored with different text. Stored reports are never "
                        "changed: import the file the stored reports came from.",
                        line=item.line,
                        file=item.file,
                    )
                )
            else:
                result.created += 1
                if not problems and not dry_run:
                    sections = item.sections
                    batch.append(
                        (dataset.pk, study_id, *(sections[n] for n in REPORT_SECTIONS), digest, item.source[:300], now)
                    )
                    if len(batch) >= REPORT_BATCH_SIZE:
                        insert_rows(OriginalReport, REPORT_ROW_FIELDS, batch)
                        batch = []
        if problems:
            raise ImportRejected(problems)
        if batch:
            insert_rows(OriginalReport, REPORT_ROW_FIELDS, batch)
        if progress:
            progress(read, read)
    return result


# --- Sampling -----------------------------------------------------------------------------


class SamplingRefused(Exception):
    """The study's sample cannot be drawn (again)."""


@dataclass(frozen=True)
class SampleCell:
    dataset: str
    variation: str
    accepted: int
    drawn: int
    skipped: int = 0  # candidates passed over: their exam was drawn already (at most one pair per exam)


@dataclass
class SampleReport:
    per_variation: int
    seed: int
    cells: list[SampleCell] = field(default_factory=list)
    one_pair_per_exam: bool = False

    @property
    def skipped(self) -> int:
        return sum(cell.skipped for cell in self.cells)

    @property
    def pairs(self) -> int:
        return sum(cell.drawn for cell in self.cells)

    @property
    def shortfalls(self) -> list[SampleCell]:
        return [cell for cell in self.cells if cell.drawn < self.per_variation]

    @property
    def short_cells(self) -> list[SampleCell]:
        """Cells with some accepted candidates, but fewer drawn than asked for (all of them were taken,
        or, at most one pair per exam, all of those whose exam was not drawn already)."""
        return [cell for cell in self.shortfalls if cell.accepted > 0]

    @property
    def empty_cells(self) -> list[SampleCell]:
        """Cells with no accepted candidate: nothing sampled there."""
        return [cell for cell in self.cells if cell.accepted == 0]

    @property
    def cells_summary(self) -> str:
        total, short, empty = len(self.cells), len(self.short_cells), len(self.empty_cells)
        filled = total - short - empty
        parts = [f"{filled} {'is' if filled == 1 else 'are'} filled"]
        if short:
            why = (
                "all their accepted candidates, of exams not drawn yet, taken"
                if self.one_pair_per_exam
                else ("all their accepted candidates taken")
            )
            parts.append(f"{short} {'is' if short == 1 else 'are'} short ({why})")
        if empty:
            parts.append(f"{empty} {'is' if empty == 1 else 'are'} empty (no accepted candidate)")
        if filled == total:
            return f"All {total} dataset and variation cell{pluralize(total)} {'is' if total == 1 else 'are'} filled."
        listed = parts[0] if len(parts) == 1 else ", ".join(parts[:-1]) + " and " + parts[-1]
        return f"Of the {total} dataset and variation cell{pluralize(total)}, {listed}."

    @property
    def summary(self) -> str:
        text = (
            f"Sampled {self.pairs} pair{pluralize(self.pairs)} ({self.per_variation} per dataset and variation, "
            f"seed {self.seed}); {self.pairs * 3} examples to rate. {self.cells_summary}"
        )
        if self.one_pair_per_exam:
            text += (
                f" At most one pair per exam: {self.skipped} candidate{pluralize(self.skipped)} passed over because "
                "their exam was drawn already."
            )
        return text

    def shortfall_messages(self) -> list[str]:
        """One line per short cell, and one line naming the empty cells."""
        messages = []
        for cell in self.short_cells:
            took = "took it" if cell.drawn == 1 else f"took all {cell.drawn}"
            if cell.skipped:
                took = f"{cell.skipped} passed over (their exam was drawn already), took the {cell.drawn} left"
            messages.append(
                f"{cell.dataset} / {cell.variation}: {cell.accepted} accepted candidate{pluralize(cell.accepted)}, "
                f"{self.per_variation} asked for; {took}."
            )
        if empty := self.empty_cells:
            names = ", ".join(f"{cell.dataset} / {cell.variation}" for cell in empty)
            messages.append(
                f"No accepted candidate, nothing sampled, in {len(empty)} cell{pluralize(len(empty))}: {names}."
            )
        return messages

    def as_dict(self) -> dict:
        return {
            "per_variation": self.per_variation,
            "seed": self.seed,
            "pairs": self.pairs,
            "one_pair_per_exam": self.one_pair_per_exam,
            "skipped": self.skipped,
            "summary": self.summary,
            "shortfalls": self.shortfall_messages(),
            "cells": [
                {
                    "dataset": c.dataset,
                    "variation": c.variation,
                    "accepted": c.accepted,
                    "drawn": c.drawn,
                    "skipped": c.skipped,
                }
                for c in self.cells
            ],
        }


def draw_sample(candidates: list[str], *, n: int, seed: int, dataset: str, variation: str) -> list[str]:
    """n study ids drawn uniformly from one (dataset, variation) cell.

    The candidates are put in a canonical order first (by code point, not by any database
    collation) and each cell has its own generator, so the draw depends only on the set of
    candidates and the seed: not on import order, on other cells, or on the database.
    """
    ordered = sorted(candidates)
    rng = random.Random(f"readingroom-sample:{seed}:{dataset}:{variation}")
    return rng.sample(ordered, min(n, len(ordered)))


def draw_sample_apart(
    candidates: list[str], taken: set[str], *, n: int, seed: int, dataset: str, variation: str
) -> tuple[list[str], int]:
    """n study ids drawn uniformly from one cell among those not in taken, and how many candidates
    the draw passed over because they were.

    The cell's candidates are shuffled (canonical order first, a generator of its own, as
    draw_sample) and taken in that order, skipping those whose exam is taken: a uniform draw from
    the rest, reproducible from the seed and the cells drawn before it.
    """
    ordered = sorted(candidates)
    rng = random.Random(f"readingroom-sample-apart:{seed}:{dataset}:{variation}")
    drawn: list[str] = []
    skipped = 0
    for study_id in rng.sample(ordered, len(ordered)):
        if len(drawn) == n:
            break
        if study_id in taken:
            skipped += 1
        else:
            drawn.append(study_id)
    return drawn, skipped


def sample_pairs(
    study: Study,
    *,
    per_variation: int,
    seed: int | None = None,
    datasets: list[str] | None = None,
    one_pair_per_exam: bool = False,
) -> SampleReport:
    """Draw the study sample: per_variation accepted pairs per (dataset, variation), at random.

    Replaces an earlier sample, which is allowed only until reading starts. Creates the rated
    examples of every sampled pair: two Task 1 examples (original, alternative) and one Task 2.

    one_pair_per_exam: no exam in two pairs, so that keeping an exam's items apart costs no more
    readers than one pair needs. Within a dataset the cells are drawn fewest candidates first
    (then by the variations' position), and a cell passes over the exams drawn in an earlier one.
    """
    if per_variation < 1:
        raise SamplingRefused("The number of pairs per variation must be at least 1.")
    seed = study.seed if seed is None else seed
    if not 0 <= seed < 2**31:
        raise SamplingRefused("The seed must be a whole number from 0 to 2147483647.")
    with transaction.atomic():
        study = Study.objects.select_for_update().get(pk=study.pk)
        if study.reading_has_started():
            raise SamplingRefused(
                f"Reading has started in study {study.slug}: its sample can no longer be changed. "
                "Create a new study to draw another sample."
            )
        known = set(Dataset.objects.values_list("key", flat=True))
        if datasets:
            unknown = sorted(set(datasets) - known)
            if unknown:
                raise SamplingRefused(
                    f"Unknown dataset(s): {', '.join(unknown)}. Use one of: {', '.join(sorted(known))}."
                )
        accepted = CandidatePair.objects.filter(study=study, verdict=Verdict.ACCEPTED)
        if datasets:
            accepted = accepted.filter(dataset__key__in=datasets)
        by_cell: dict[tuple[str, str], dict[str, int]] = defaultdict(dict)
        for pk, dataset_key, variation_key, study_id in accepted.values_list(
            "pk", "dataset__key", "variation__key", "source_study_id"
        ):
            by_cell[(dataset_key, variation_key)][study_id] = pk
        if not by_cell:
            raise SamplingRefused(
                "There are no accepted candidate pairs to sample from"
                + (f" in {', '.join(datasets)}." if datasets else ". Import candidate pairs first.")
            )

        cell_datasets = sorted(datasets) if datasets else sorted({d for d, _ in by_cell})
        report = SampleReport(per_variation=per_variation, seed=seed, one_pair_per_exam=one_pair_per_exam)
        chosen: list[int] = []
        variations = list(study.variations.values_list("key", flat=True))
        for dataset_key in cell_datasets:
            taken: set[str] = set()  # the dataset's exams drawn so far
            order = variations
            if one_pair_per_exam:
                # The cells with fewest candidates draw first: they have least to spare.
                order = sorted(variations, key=lambda v: len(by_cell.get((dataset_key, v), {})))
            drawn_cells = []
            for variation_key in order:
                cell = by_cell.get((dataset_key, variation_key), {})
                skipped = 0
                if one_pair_per_exam:
                    drawn, skipped = draw_sample_apart(
                        list(cell), taken, n=per_variation, seed=seed, dataset=dataset_key, variation=variation_key
                    )
                    taken.update(drawn)
                else:
                    drawn = draw_sample(
                        list(cell), n=per_variation, seed=seed, dataset=dataset_key, variation=variation_key
                    )
                chosen.extend(cell[study_id] for study_id in drawn)
                drawn_cells.append(
                    SampleCell(
                        dataset=dataset_key,
                        variation=variation_key,
                        accepted=len(cell),
                        drawn=len(drawn),
                        skipped=skipped,
                    )
                )
            # Reported in the study's order of variations, whatever the order they were drawn in.
            report.cells.extend(sorted(drawn_cells, key=lambda c: variations.index(c.variation)))

        Example.objects.filter(study=study).delete()
        CandidatePair.objects.filter(study=study, sampled=True).update(sampled=False)
        chosen.sort()
        for start in range(0, len(chosen), BATCH_SIZE):
            CandidatePair.objects.filter(pk__in=chosen[start : start + BATCH_SIZE]).update(sampled=True)
        examples = []
        for pair_pk in chosen:
            examples.append(Example(study=study, pair_id=pair_pk, task=Task.REALISM, report_type=ReportType.ORIGINAL))
            examples.append(
                Example(study=study, pair_id=pair_pk, task=Task.REALISM, report_type=ReportType.ALTERNATIVE)
            )
            examples.append(Example(study=study, pair_id=pair_pk, task=Task.EQUIVALENCE, report_type=""))
        Example.objects.bulk_create(examples, batch_size=BATCH_SIZE)

        study.sample_seed = seed
        study.sample_per_variation = per_variation
        study.sample_datasets = sorted(datasets) if datasets else []
        study.sample_one_pair_per_exam = one_pair_per_exam
        study.sampled_at = timezone.now()
        transaction.on_commit(partial(signals.pairs_sampled.send, sender=Study, study=study))
        study.save(
            update_fields=[
                "sample_seed",
                "sample_per_variation",
                "sample_datasets",
                "sample_one_pair_per_exam",
                "sampled_at",
            ]
        )
    return report


def save_preferences(user: AbstractBaseUser, *, theme: str, single_key_shortcuts: bool) -> Preferences:
    """Store a person's display and keyboard preferences (their row is created on the first save)."""
    preferences, _ = Preferences.objects.update_or_create(
        user=user, defaults={"theme": theme, "single_key_shortcuts": single_key_shortcuts}
    )
    return preferences
