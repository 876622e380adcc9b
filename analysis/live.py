"""A study's rows as the analysis reads them: the DataFrames its default release would contain.

The six release tables are not rebuilt here: they come from the release's own queries
(exports.rows), whose first column is the finished CSV record, and are parsed exactly as a
research user parses the files (pandas, dtype=str, keep_default_na=False). A study's Results
page and `analyze_release` on its release therefore see the same text, row for row. On
PostgreSQL, outside a transaction (the worker, the commands), the same queries give their fields
as columns and COPY writes them as CSV itself, over several connections at once that read one
snapshot: the values are the same (tests/analysis/test_live_frames_copy.py), quoted by COPY
instead of by the queries' own expressions, and one table is formatted while another is parsed.

Only a live study knows who read what, in which slot: `reads` adds every individual read of
the released examples, with an opaque per-study reader key instead of the account. The reads are
the full files' annotations: their slot, reader, rationale and time come after each full record
(exports.rows.READ_COLUMNS), so the annotations are read once.
"""

import io
import os
from collections.abc import Iterable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

import numpy as np
import pandas as pd

from analysis.frames import READS, RELEASE_FILES, ReleaseFrames
from analysis.judges import JUDGE_FILES
from analysis.metrics import report_text
from analysis.models import ImportedMetric, MetricScore
from analysis.reader_keys import reader_key
from analysis.release_folder import ANALYSIS_COLUMNS
from annotation.models import CandidatePair, Study, Task
from exports import rows
from exports.columns import KEYS
from judges.models import JudgeEnrolment

TASK_PREFIX = {Task.REALISM: "task1", Task.EQUIVALENCE: "task2"}
# The reads' columns after each full file's record, by their names in READS.
READ_NAMES = dict(zip(rows.READ_COLUMNS, ("slot", "reader", "rationale", "duration_ms"), strict=True))


# The connections that COPY a study's tables at once (PostgreSQL): one formats a table while
# another's rows are parsed here; on more cores, more of the tables are formatted side by side.
COPY_CONNECTIONS = max(2, min(4, os.cpu_count() or 1))


@dataclass(frozen=True)
class _Query:
    """One table's query: its header, SQL and parameters, the types of any columns after the record,
    the names of those kept (each read's, after a full file's record), and whether every column of the
    file is kept whatever the caller's text says (the judges)."""

    header: list[str]
    sql: str
    params: list
    types: tuple[str, ...] = ()
    after: tuple[str, ...] = ()
    every_column: bool = False

    def file_columns(self, text: bool) -> list[str]:
        """The file's columns that are read: all, or only those the analysis reads."""
        if text or self.every_column:
            return self.header
        return [column for column in self.header if column in ANALYSIS_COLUMNS]


def study_frames(
    study: Study, *, datasets: list[str] | None = None, text: bool = True, judges: bool | None = None
) -> ReleaseFrames:
    """The study's default release as DataFrames (only examples with a consensus), plus its reads.

    datasets restricts every table to those dataset keys (empty or None: all), as a release
    restricted to them would be. text=False keeps only the columns the analysis reads, exactly
    as `read_release(path, text=False)` does. judges adds the judges tables of a release built
    with --include-judges (default: if the study has an automated judge).

    Every table reads one snapshot of the database (exports.rows.snapshot). On PostgreSQL the
    tables are copied over several connections at once, each as COPY's own CSV output. The reads
    come with the full files' records (exports.rows.READ_COLUMNS): they are the same annotations.
    """
    datasets = sorted(set(datasets or []))
    columns = rows.copies()  # before the snapshot, whose transaction this connection then is in
    with rows.snapshot() as snapshot_id:
        queries: dict[str, _Query] = {}
        for task, prefix in TASK_PREFIX.items():
            selection = rows.Selection(study.pk, task, datasets, include_unfinished=False)
            full = rows.full_query(selection, study.seed, text=text, columns=columns, reads=True)
            header = RELEASE_FILES[f"{prefix}/{prefix}_full.csv"]
            queries[f"{prefix}_full"] = _Query(header, *full, ("text",) * len(READ_NAMES), tuple(READ_NAMES))
            disagreed = rows.disagreed_query(selection, columns=columns)
            queries[f"{prefix}_disagreed"] = _Query(RELEASE_FILES[f"{prefix}/{prefix}_disagreed.csv"], *disagreed)
            # As records, the consensus query's are followed by three more columns (for the README's counts).
            consensus = rows.consensus_query(selection, columns=columns)
            header = RELEASE_FILES[f"{prefix}/{prefix}_consensus.csv"]
            queries[f"{prefix}_consensus"] = _Query(header, *consensus, ("text", "text", "int8"))
        if judges is None:
            judges = JudgeEnrolment.objects.filter(study=study).exists()
        if judges:
            queries |= _judges_queries(study, datasets, columns=columns)
        # The longest first, so that the connections finish together.
        order = sorted(queries, key=lambda name: (not name.endswith("_full"), name))
        tables = _read({name: queries[name] for name in order}, text, snapshot_id if columns else None, columns)
    reads = _reads(study, tables)
    return ReleaseFrames(**tables, reads=reads)


def _judges_queries(study: Study, datasets: list[str], *, columns: bool) -> dict[str, _Query]:
    """The judges files' queries. The judge indexes are those of the release of every dataset,
    so a dataset filter here and `analyze_release --dataset` on the full release name each judge alike.
    A study without judge reads gets two empty tables."""
    judge_index = rows.judge_indexes(rows.Selection(study.pk, "", [], include_unfinished=False), study.seed)
    queries = {}
    for task, prefix in TASK_PREFIX.items():
        selection = rows.Selection(study.pk, task, datasets, include_unfinished=False)
        header = list(JUDGE_FILES[f"judges/{prefix}_judges.csv"])
        # Read whole whatever the caller's text says: the judges' tables are few rows, rationales included.
        if judge_index:
            query = rows.judges_query(selection, judge_index, columns=columns)
            queries[f"{prefix}_judges"] = _Query(header, *query, every_column=True)
        else:
            queries[f"{prefix}_judges"] = _Query(header, "", [], every_column=True)
    return queries


def _read(queries: dict[str, _Query], text: bool, snapshot_id: str | None, columns: bool) -> dict[str, pd.DataFrame]:
    """Each query's rows as a DataFrame: COPY's CSV over several connections (columns=True, PostgreSQL
    outside a transaction), or the records one query after another (SQLite, or inside a transaction)."""
    if not columns:
        return {
            name: _parse(query, rows.stream(query.sql, query.params, query.types) if query.sql else (), text)
            for name, query in queries.items()
        }

    def copied(query: _Query) -> pd.DataFrame:
        buffer = _header([*query.header, *query.after])
        if query.sql:
            rows.copy_csv(query.sql, query.params, buffer, snapshot_id)
        return _read_csv(buffer, [*query.file_columns(text), *query.after])

    with ThreadPoolExecutor(COPY_CONNECTIONS, thread_name_prefix="copy") as pool:
        futures = {name: pool.submit(copied, query) for name, query in queries.items()}
        return {name: future.result() for name, future in futures.items()}


def _header(columns: list[str]) -> io.BytesIO:
    buffer = io.BytesIO()
    buffer.write((",".join(columns) + "\r\n").encode("ascii"))
    return buffer


def _parse(query: _Query, records: Iterable[tuple], text: bool) -> pd.DataFrame:
    """CSV records (bytes, CRLF-terminated) under the query's header, read as a release file is read,
    and the columns after them that the query keeps."""
    buffer = _header(query.header)
    after = []
    for record, *rest in records:
        buffer.write(record)
        after.append(rest[: len(query.after)])
    frame = _read_csv(buffer, query.file_columns(text))
    if query.after:
        frame[list(query.after)] = pd.DataFrame(after, columns=list(query.after), dtype=str)
    return frame


def _read_csv(buffer: io.BytesIO, wanted: list[str]) -> pd.DataFrame:
    buffer.seek(0)
    frame = pd.read_csv(buffer, dtype=str, keep_default_na=False, usecols=wanted, encoding="utf-8", na_filter=False)
    return frame[wanted]


def _reads(study: Study, tables: dict[str, pd.DataFrame]) -> pd.DataFrame:
    """Every read of the released examples (READS), taken off the full tables' records (which lose
    those columns): in key then slot order, with each reader's opaque per-study key instead of the
    user id."""
    parts = []
    for prefix in TASK_PREFIX.values():
        full = tables[f"{prefix}_full"]
        tables[f"{prefix}_full"] = full.drop(columns=list(READ_NAMES))
        key = [*KEYS, "report_type"] if prefix == "task1" else list(KEYS)
        part = full[[*key, "rating", *READ_NAMES]].rename(columns=READ_NAMES)
        part.insert(0, "task", prefix)
        if prefix == "task2":
            part["report_type"] = ""  # a Task 2 example has none (example_report_type_matches_task)
        parts.append(_in_slot_order(part, key)[READS])
    reads = pd.concat(parts, ignore_index=True)
    keys = {reader_id: reader_key(study, int(reader_id)) for reader_id in reads["reader"].unique()}
    reads["reader"] = reads["reader"].map(keys).astype(str)
    return reads


def _in_slot_order(part: pd.DataFrame, key: list[str]) -> pd.DataFrame:
    """The reads of a full file, in its key order (each example's rows together), each example's by slot."""
    if part.empty:
        return part
    values = part[key].to_numpy(dtype=object)
    starts = np.ones(len(part), dtype=bool)
    starts[1:] = (values[1:] != values[:-1]).any(axis=1)
    order = np.lexsort((part["slot"].astype(int).to_numpy(), np.cumsum(starts)))
    return part.iloc[order].reset_index(drop=True)


def study_pair_texts(study: Study, *, datasets: list[str] | None = None) -> pd.DataFrame:
    """The sampled pairs' two reports (analysis.sensitivity.PAIR_TEXTS), as a release's task2_full gives them."""
    pairs = CandidatePair.objects.filter(study=study, sampled=True)
    if datasets:
        pairs = pairs.filter(dataset__key__in=datasets)
    rows = [
        (dataset, study_id, variation, report_text(of, oi), report_text(af, ai))
        for dataset, study_id, variation, of, oi, af, ai in pairs.order_by().values_list(
            "dataset__key", "source_study_id", "variation__key", "original_findings", "original_impression",
            "alternative_findings", "alternative_impression",
        ).iterator(chunk_size=5000)
    ]  # fmt: skip
    frame = pd.DataFrame(rows, columns=["dataset", "study_id", "reref_variation", "original", "alternative"])
    return frame.sort_values(["dataset", "study_id", "reref_variation"], kind="stable").reset_index(drop=True)


def study_imported_scores(study: Study, *, datasets: list[str] | None = None) -> tuple[pd.DataFrame, dict]:
    """The study's imported metric scores of sampled pairs (analysis.sensitivity.SCORES) and their perfect scores."""
    scores = MetricScore.objects.filter(metric__study=study, pair__sampled=True)
    if datasets:
        scores = scores.filter(pair__dataset__key__in=datasets)
    rows = scores.order_by().values_list(
        "pair__dataset__key", "pair__source_study_id", "pair__variation__key", "metric__name", "score"
    )
    frame = pd.DataFrame(
        [(d, s, v, m, "imported", score) for d, s, v, m, score in rows.iterator(chunk_size=5000)],
        columns=["dataset", "study_id", "reref_variation", "metric", "direction", "score"],
    )
    perfect = dict(
        ImportedMetric.objects.filter(study=study, perfect_score__isnull=False).values_list("name", "perfect_score")
    )
    return frame, perfect
