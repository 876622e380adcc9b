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
the released examples, with an opaque per-study reader key instead of the account.
"""

# ruff: noqa: S608 - the SQL is built from the models' table names and fixed column names only;
# every value (study, datasets, labels) is passed as a query parameter.

import io
import os
from collections.abc import Iterable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

import pandas as pd

from analysis.frames import READS, RELEASE_FILES, ReleaseFrames
from analysis.judges import JUDGE_FILES
from analysis.metrics import report_text
from analysis.models import ImportedMetric, MetricScore
from analysis.reader_keys import reader_key
from analysis.release_folder import ANALYSIS_COLUMNS
from annotation.models import Assignment, CandidatePair, Study, Task
from exports import rows
from exports.columns import in_file_order
from judges.models import JudgeEnrolment

TASK_PREFIX = {Task.REALISM: "task1", Task.EQUIVALENCE: "task2"}


# The connections that COPY a study's tables at once (PostgreSQL): one formats a table while
# another's rows are parsed here; on more cores, more of the tables are formatted side by side.
COPY_CONNECTIONS = max(2, min(4, os.cpu_count() or 1))


@dataclass(frozen=True)
class _Query:
    """One table's query: its header, SQL and parameters, the types of any columns after the record,
    and whether every column is kept whatever the caller's text says (the reads, the judges)."""

    header: list[str]
    sql: str
    params: list
    types: tuple[str, ...] = ()
    every_column: bool = False


def study_frames(
    study: Study, *, datasets: list[str] | None = None, text: bool = True, judges: bool | None = None
) -> ReleaseFrames:
    """The study's default release as DataFrames (only examples with a consensus), plus its reads.

    datasets restricts every table to those dataset keys (empty or None: all), as a release
    restricted to them would be. text=False keeps only the columns the analysis reads, exactly
    as `read_release(path, text=False)` does. judges adds the judges tables of a release built
    with --include-judges (default: if the study has an automated judge).

    Every table reads one snapshot of the database (exports.rows.snapshot). On PostgreSQL the
    tables are copied over several connections at once, each as COPY's own CSV output.
    """
    datasets = sorted(set(datasets or []))
    columns = rows.copies()  # before the snapshot, whose transaction this connection then is in
    with rows.snapshot() as snapshot_id:
        queries: dict[str, _Query] = {}
        for task, prefix in TASK_PREFIX.items():
            selection = rows.Selection(study.pk, task, datasets, include_unfinished=False)
            full = rows.full_query(selection, study.seed, text=text, columns=columns)
            queries[f"{prefix}_full"] = _Query(RELEASE_FILES[f"{prefix}/{prefix}_full.csv"], *full)
            disagreed = rows.disagreed_query(selection, columns=columns)
            queries[f"{prefix}_disagreed"] = _Query(RELEASE_FILES[f"{prefix}/{prefix}_disagreed.csv"], *disagreed)
            # As records, the consensus query's are followed by three more columns (for the README's counts).
            consensus = rows.consensus_query(selection, columns=columns)
            header = RELEASE_FILES[f"{prefix}/{prefix}_consensus.csv"]
            queries[f"{prefix}_consensus"] = _Query(header, *consensus, ("text", "text", "int8"))
        queries["reads"] = _Query(READS, *reads_query(study, datasets, columns=columns), every_column=True)
        if judges is None:
            judges = JudgeEnrolment.objects.filter(study=study).exists()
        if judges:
            queries |= _judges_queries(study, datasets, columns=columns)
        # The longest first, so that the connections finish together.
        order = sorted(queries, key=lambda name: (not name.endswith("_full"), name != "reads", name))
        tables = _read({name: queries[name] for name in order}, text, snapshot_id if columns else None, columns)
    reads = _with_reader_keys(study, tables.pop("reads"))
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
            name: _parse(
                query.header,
                rows.stream(query.sql, query.params, query.types) if query.sql else (),
                text or query.every_column,
            )
            for name, query in queries.items()
        }

    def copied(query: _Query) -> pd.DataFrame:
        buffer = _header(query.header)
        if query.sql:
            rows.copy_csv(query.sql, query.params, buffer, snapshot_id)
        return _read_csv(buffer, query.header, text or query.every_column)

    with ThreadPoolExecutor(COPY_CONNECTIONS, thread_name_prefix="copy") as pool:
        futures = {name: pool.submit(copied, query) for name, query in queries.items()}
        return {name: future.result() for name, future in futures.items()}


def _header(columns: list[str]) -> io.BytesIO:
    buffer = io.BytesIO()
    buffer.write((",".join(columns) + "\r\n").encode("ascii"))
    return buffer


def _parse(columns: list[str], records: Iterable[tuple], text: bool) -> pd.DataFrame:
    """CSV records (bytes, CRLF-terminated) under a header, read as a release file is read."""
    buffer = _header(columns)
    for record, *_ in records:
        buffer.write(record)
    return _read_csv(buffer, columns, text)


def _read_csv(buffer: io.BytesIO, columns: list[str], text: bool) -> pd.DataFrame:
    buffer.seek(0)
    wanted = columns if text else [column for column in columns if column in ANALYSIS_COLUMNS]
    frame = pd.read_csv(buffer, dtype=str, keep_default_na=False, usecols=wanted, encoding="utf-8", na_filter=False)
    return frame[wanted]


def reads_query(study: Study, datasets: list[str], *, columns: bool = False) -> tuple[str, list]:
    """Every read of the examples with a consensus as a CSV record (columns READS, reader as its user id).

    Formatted by the database with the release's own field and record helpers (exports.rows);
    columns: the fields as columns (exports.rows.Dialect.columns).
    """
    dialect = rows.sql_dialect(columns=columns)
    params: list = []
    task = f"CASE e.task WHEN '{Task.REALISM}' THEN 'task1' ELSE 'task2' END"
    fields = {
        "task": task,
        "dataset": rows.csv_field(dialect, "d.key"),
        "study_id": rows.csv_field(dialect, "p.source_study_id"),
        "reref_variation": rows.csv_field(dialect, "v.key"),
        "report_type": "e.report_type",
        "slot": "CAST(s.slot AS text)",
        "reader": "CAST(a.reader_id AS text)",
        "rating": rows.rating_label("a.rating", params),
        "rationale": rows.csv_field(dialect, "a.rationale"),
        "duration_ms": "COALESCE(CAST(a.duration_ms AS text), '')",
    }
    where = ["e.study_id = %s", "a.voided_at IS NULL", "a.settled_at IS NOT NULL"]
    params.append(study.pk)
    if datasets:
        where.append(f"d.key IN ({', '.join(['%s'] * len(datasets))})")
        params += datasets
    sql = f"""
    SELECT {rows.record(dialect, in_file_order(fields, tuple(READS)))}
    {rows.FROM_EXAMPLES}
    JOIN {rows.ANNOTATION} a ON a.example_id = e.id
    JOIN {Assignment._meta.db_table} s ON s.id = a.assignment_id
    WHERE {" AND ".join(where)} AND EXISTS (SELECT 1 FROM {rows.CONSENSUS} c0 WHERE c0.example_id = e.id)"""
    return sql, params


def _with_reader_keys(study: Study, frame: pd.DataFrame) -> pd.DataFrame:
    """The reads with each reader's opaque key instead of the user id, in key then slot order."""
    keys = {reader_id: reader_key(study, int(reader_id)) for reader_id in frame["reader"].unique()}
    frame["reader"] = frame["reader"].map(keys).astype(str)
    return frame.sort_values(["task", "dataset", "study_id", "reref_variation", "report_type", "slot"]).reset_index(
        drop=True
    )


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
