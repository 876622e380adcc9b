"""How each reader of a live study reads, next to the others: for the coordinator only.

A pure function of the study's reads (`ReleaseFrames.reads`, live only) and the adjudicators'
ratings (the disagreed tables). Nothing here is ever part of a release: it exists so that a
coordinator spots a reader who rates everything Realistic in four seconds.

Per reader: reads, rating distribution per task, agreement with the consensus of the other
reads, median time on task, share of rationales under 20 characters, and flags with reasons
where the reader is far from the rest.

Agreement with the final consensus excluding the reader's own read: for each read, the
reference is the rating most of the example's *other* reads gave; where the others are split
(the reader's read decided the example), the adjudicator's rating if there is one; otherwise
the read is not counted. Reads are compared within one task, so the two scales never mix.
"""

import statistics
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from analysis.frames import ReleaseFrames

LABELS = {
    "task1": ("Realistic", "Minor Issues", "Major Issues"),
    "task2": ("Equivalent", "Minor Discrepancy", "Major Discrepancy"),
}
TASK_NAMES = {"task1": "Task 1", "task2": "Task 2"}
SHORT_RATIONALE = 20  # characters, after trimming blanks at the ends

# A reader is compared with the median of the other readers, and only with enough reads to judge.
MIN_READS = 10
MIN_OTHER_READERS = 2
AGREEMENT_BELOW = 0.20  # agreement this far below the others' median
RATING_SHARE_APART = 0.30  # a label's share this far from the others' median, in either direction
TIME_FACTOR = 3.0  # median time this many times faster or slower than the others'
SHORT_RATIONALES_ABOVE = 0.30  # share of short rationales this far above the others' median


@dataclass
class ReaderQuality:
    """One reader's figures. A figure that cannot be computed is None, with the reason in notes."""

    reader: str
    reads: int
    reads_by_task: dict[str, int]
    ratings: dict[str, dict[str, int]]  # task -> label -> reads
    agreement: float | None
    agreement_reads: int
    median_seconds: float | None
    timed_reads: int
    short_rationales: float | None
    rationales: int
    notes: dict[str, str] = field(default_factory=dict)
    flags: list[str] = field(default_factory=list)

    def share(self, task: str, label: str) -> float | None:
        total = self.reads_by_task.get(task, 0)
        return self.ratings[task].get(label, 0) / total if total else None


EXAMPLE = ["task", "dataset", "study_id", "reref_variation", "report_type"]


def reader_quality(frames: ReleaseFrames) -> list[ReaderQuality]:
    """Every reader of the study's reads, sorted by key, flagged where far from the others."""
    if frames.reads is None:
        raise ValueError("Reader quality needs a live study's reads; a release does not have them.")
    reads = frames.reads.reset_index(drop=True)
    if reads.empty:
        return []
    reads = reads.assign(reference=_references(reads, _adjudications(frames)))
    readers = [_figures(str(reader), part) for reader, part in reads.groupby("reader", sort=True)]
    _flag(readers)
    return readers


def _adjudications(frames: ReleaseFrames) -> pd.DataFrame:
    """The adjudicators' ratings, one row per decided example: the columns EXAMPLE and adjudicated."""
    tables = []
    for task, table in (("task1", frames.task1_disagreed), ("task2", frames.task2_disagreed)):
        decided = table[table["rating"] != ""]
        tables.append(
            pd.DataFrame(
                {
                    "task": task,
                    "dataset": decided["dataset"],
                    "study_id": decided["study_id"],
                    "reref_variation": decided["reref_variation"],
                    "report_type": decided.get("report_type", ""),
                    "adjudicated": decided["rating"],
                }
            )
        )
    return pd.concat(tables, ignore_index=True).astype(str)


def _references(reads: pd.DataFrame, adjudications: pd.DataFrame) -> pd.Series:
    """For each read, the consensus of the example's other reads (None where there is none)."""
    example = reads.groupby(EXAMPLE, sort=False).ngroup()
    mine = pd.get_dummies(reads["rating"]).astype(int)
    others = mine.groupby(example).transform("sum") - mine  # per read: the other reads' ratings, counted
    counts = others.to_numpy()
    top = counts.max(axis=1)
    decided = (top > 0) & ((counts == top[:, None]).sum(axis=1) == 1)
    majority = np.asarray(others.columns)[counts.argmax(axis=1)]
    adjudicated = reads[EXAMPLE].merge(adjudications, on=EXAMPLE, how="left")["adjudicated"].to_numpy()
    reference = np.where(decided, majority, adjudicated)
    return pd.Series(reference, index=reads.index, dtype=object).where(pd.notna(reference), None)


def _figures(reader: str, reads: pd.DataFrame) -> ReaderQuality:
    notes = {}
    reads_by_task = {task: int(n) for task, n in reads["task"].value_counts().items()}
    ratings = {}
    for task, labels in LABELS.items():
        counts = reads.loc[reads["task"] == task, "rating"].value_counts()
        ratings[task] = {label: int(counts.get(label, 0)) for label in labels}  # the scale's order, zeros too

    compared = reads[reads["reference"].notna()]
    agreement = float((compared["rating"] == compared["reference"]).mean()) if len(compared) else None
    if agreement is None:
        notes["agreement"] = "no read with a consensus of the other reads yet"

    durations = reads.loc[reads["duration_ms"] != "", "duration_ms"].astype(int)
    median_seconds = float(durations.median()) / 1000 if len(durations) else None
    if median_seconds is None:
        notes["median_seconds"] = "no read with a recorded time"

    rationales = reads["rationale"].str.strip()
    rationales = rationales[rationales != ""]
    short = float((rationales.str.len() < SHORT_RATIONALE).mean()) if len(rationales) else None
    if short is None:
        notes["short_rationales"] = "no rationale written"

    return ReaderQuality(
        reader=reader,
        reads=len(reads),
        reads_by_task=reads_by_task,
        ratings=ratings,
        agreement=agreement,
        agreement_reads=len(compared),
        median_seconds=median_seconds,
        timed_reads=len(durations),
        short_rationales=short,
        rationales=len(rationales),
        notes=notes,
    )


def _others_median(readers: list[ReaderQuality], reader: ReaderQuality, value) -> float | None:
    values = [value(other) for other in readers if other is not reader and other.reads >= MIN_READS]
    values = [v for v in values if v is not None]
    return statistics.median(values) if len(values) >= MIN_OTHER_READERS else None


def _percent(value: float) -> str:
    return f"{100 * value:.0f}%"


def _flag(readers: list[ReaderQuality]) -> None:
    """Add a reason to each reader far from the median of the others (needs MIN_READS reads)."""
    for reader in readers:
        if reader.reads < MIN_READS:
            continue
        flags = reader.flags

        others = _others_median(readers, reader, lambda r: r.agreement)
        if reader.agreement is not None and others is not None and others - reader.agreement >= AGREEMENT_BELOW:
            flags.append(
                f"agrees with the other reads' consensus on {_percent(reader.agreement)} of reads "
                f"(others: median {_percent(others)})"
            )

        for task, labels in LABELS.items():
            if reader.reads_by_task.get(task, 0) < MIN_READS:
                continue
            # The label whose share is furthest from the others' median, if far enough.
            apart = []
            for label in labels:
                others = _others_median(
                    readers,
                    reader,
                    lambda r, task=task, label=label: (
                        r.share(task, label) if r.reads_by_task.get(task, 0) >= MIN_READS else None
                    ),
                )
                if others is not None:
                    apart.append((abs(reader.share(task, label) - others), label, others))
            if apart and max(apart)[0] >= RATING_SHARE_APART:
                _, label, others = max(apart)
                flags.append(
                    f"rates {_percent(reader.share(task, label))} of {TASK_NAMES[task]} reads {label} "
                    f"(others: median {_percent(others)})"
                )

        others = _others_median(readers, reader, lambda r: r.median_seconds)
        seconds = reader.median_seconds
        if seconds is not None and others and (seconds * TIME_FACTOR <= others or seconds >= others * TIME_FACTOR):
            flags.append(f"median time {seconds:.0f} s per read (others: median {others:.0f} s)")

        others = _others_median(readers, reader, lambda r: r.short_rationales)
        if (
            reader.short_rationales is not None
            and others is not None
            and reader.short_rationales - others >= SHORT_RATIONALES_ABOVE
        ):
            flags.append(
                f"{_percent(reader.short_rationales)} of rationales under {SHORT_RATIONALE} characters "
                f"(others: median {_percent(others)})"
            )


def reader_quality_table(readers: list[ReaderQuality]) -> pd.DataFrame:
    """One row per reader, as text: every figure (or 'not computable: <reason>') and the flags."""

    def figure(reader: ReaderQuality, name: str, spec: str) -> str:
        value = getattr(reader, name)
        return f"not computable: {reader.notes[name]}" if value is None else format(value, spec)

    rows = []
    for reader in readers:
        row = {"reader": reader.reader, "reads": str(reader.reads)}
        for task, labels in LABELS.items():
            row[f"{task}_reads"] = str(reader.reads_by_task.get(task, 0))
            row.update({f"{task}_{label}": str(reader.ratings[task].get(label, 0)) for label in labels})
        row["agreement"] = figure(reader, "agreement", ".4f")
        row["agreement_reads"] = str(reader.agreement_reads)
        row["median_seconds"] = figure(reader, "median_seconds", ".1f")
        row["short_rationales"] = figure(reader, "short_rationales", ".4f")
        row["rationales"] = str(reader.rationales)
        row["flags"] = "; ".join(reader.flags)
        rows.append(row)
    return pd.DataFrame(rows, dtype=str)
