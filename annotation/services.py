"""Workflows of the study set-up: importing candidate pairs and drawing the study sample.

The web pages, the API and the management commands all call these functions.
"""

import random
from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass, field

from django.conf import settings
from django.db import transaction
from django.template.defaultfilters import pluralize
from django.utils import timezone

from annotation import importing
from annotation.importing import ImportProblem, ImportRejected
from annotation.models import (
    CandidatePair,
    Dataset,
    Example,
    ReportType,
    Study,
    Task,
    Variation,
    Verdict,
)

Progress = Callable[[int, int], None]

TEXT_FIELDS = (*importing.CONTEXT_COLUMNS, *importing.REPORT_COLUMNS)
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
    datasets = {d.key: d for d in Dataset.objects.all()}
    variations = {v.key: v for v in study.variations.all()}
    problems: list[ImportProblem] = []
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
        raise ImportRejected(problems)

    with transaction.atomic():
        # One import per study at a time: a concurrent import of the same new pairs waits, then
        # finds them stored, instead of failing on the unique constraint.
        Study.objects.select_for_update().filter(pk=study.pk).exists()
        stored = {
            (p.dataset_id, p.source_study_id, p.variation_id): p
            for p in CandidatePair.objects.filter(study=study).only(
                "dataset_id", "source_study_id", "variation_id", "verdict", *TEXT_FIELDS
            )
        }
        new_pairs: list[CandidatePair] = []
        for key, (line, pair) in candidates.items():
            existing = stored.get(key)
            if existing is None:
                new_pairs.append(pair)
                continue
            changed = [name for name in ("verdict", *TEXT_FIELDS) if getattr(existing, name) != getattr(pair, name)]
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

    return ImportReport(rows=len(rows), created=len(new_pairs), unchanged=len(rows) - len(new_pairs), dry_run=dry_run)


def _pair_from_row(
    study: Study,
    row: importing.ParsedRow,
    datasets: dict[str, Dataset],
    variations: dict[str, Variation],
    problems: list[ImportProblem],
) -> CandidatePair | None:
    values = row.values
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
        study=study, dataset=dataset, source_study_id=study_id, variation=variation, verdict=verdict, **texts
    )


# --- Sampling -----------------------------------------------------------------------------


class SamplingRefused(Exception):
    """The study's sample cannot be drawn (again)."""


@dataclass(frozen=True)
class SampleCell:
    dataset: str
    variation: str
    accepted: int
    drawn: int


@dataclass
class SampleReport:
    per_variation: int
    seed: int
    cells: list[SampleCell] = field(default_factory=list)

    @property
    def pairs(self) -> int:
        return sum(cell.drawn for cell in self.cells)

    @property
    def shortfalls(self) -> list[SampleCell]:
        return [cell for cell in self.cells if cell.drawn < self.per_variation]

    @property
    def short_cells(self) -> list[SampleCell]:
        """Cells with some accepted candidates, but fewer than asked for (all of them were taken)."""
        return [cell for cell in self.shortfalls if cell.drawn > 0]

    @property
    def empty_cells(self) -> list[SampleCell]:
        """Cells with no accepted candidate: nothing sampled there."""
        return [cell for cell in self.cells if cell.drawn == 0]

    @property
    def cells_summary(self) -> str:
        total, short, empty = len(self.cells), len(self.short_cells), len(self.empty_cells)
        filled = total - short - empty
        parts = [f"{filled} {'is' if filled == 1 else 'are'} filled"]
        if short:
            parts.append(f"{short} {'is' if short == 1 else 'are'} short (all their accepted candidates taken)")
        if empty:
            parts.append(f"{empty} {'is' if empty == 1 else 'are'} empty (no accepted candidate)")
        if filled == total:
            return f"All {total} dataset and variation cell{pluralize(total)} {'is' if total == 1 else 'are'} filled."
        listed = parts[0] if len(parts) == 1 else ", ".join(parts[:-1]) + " and " + parts[-1]
        return f"Of the {total} dataset and variation cell{pluralize(total)}, {listed}."

    @property
    def summary(self) -> str:
        return (
            f"Sampled {self.pairs} pair{pluralize(self.pairs)} ({self.per_variation} per dataset and variation, "
            f"seed {self.seed}); {self.pairs * 3} examples to rate. {self.cells_summary}"
        )

    def shortfall_messages(self) -> list[str]:
        """One line per short cell, and one line naming the empty cells."""
        messages = []
        for cell in self.short_cells:
            took = "took it" if cell.drawn == 1 else f"took all {cell.drawn}"
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
            "summary": self.summary,
            "shortfalls": self.shortfall_messages(),
            "cells": [
                {"dataset": c.dataset, "variation": c.variation, "accepted": c.accepted, "drawn": c.drawn}
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


def sample_pairs(
    study: Study, *, per_variation: int, seed: int | None = None, datasets: list[str] | None = None
) -> SampleReport:
    """Draw the study sample: per_variation accepted pairs per (dataset, variation), at random.

    Replaces an earlier sample, which is allowed only until reading starts. Creates the rated
    examples of every sampled pair: two Task 1 examples (original, alternative) and one Task 2.
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
        report = SampleReport(per_variation=per_variation, seed=seed)
        chosen: list[int] = []
        for dataset_key in cell_datasets:
            for variation_key in study.variations.values_list("key", flat=True):
                cell = by_cell.get((dataset_key, variation_key), {})
                drawn = draw_sample(
                    list(cell), n=per_variation, seed=seed, dataset=dataset_key, variation=variation_key
                )
                chosen.extend(cell[study_id] for study_id in drawn)
                report.cells.append(
                    SampleCell(dataset=dataset_key, variation=variation_key, accepted=len(cell), drawn=len(drawn))
                )

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
        study.sampled_at = timezone.now()
        study.save(update_fields=["sample_seed", "sample_per_variation", "sample_datasets", "sampled_at"])
    return report
