"""The rows of the release's CSV files, formatted by the database.

Each file is one SQL query whose first column is a finished CSV record: RFC 4180 quoting (a
field is quoted only when it holds a comma, quote, CR or LF; inner quotes doubled), fields
joined with commas, CRLF at the end. The same SQL runs on PostgreSQL and SQLite, so there is
one definition of the format; only a few spellings differ (the Dialect below). On PostgreSQL
the records are streamed with COPY in binary format and written as they arrive: the build
neither parses nor re-quotes anything, and its memory does not grow with the study. (The
analysis of a live study runs the same queries with Dialect.columns: see copy_csv().)

annotation_index is computed here too: annotations are numbered within their example in the
order of sha256("readingroom-release:<study seed>:<example id>:<annotation id>"), a seeded
shuffle that is reproducible but says nothing about who rated what, or when.
"""

# ruff: noqa: S608 - the SQL is assembled from this module's constants and the models' table
# names only; every value (study, task, datasets, labels) is passed as a query parameter.

import hashlib
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import BinaryIO

from django.db import DEFAULT_DB_ALIAS, connection, connections, transaction

from annotation.models import (
    Annotation,
    Assignment,
    CandidatePair,
    Dataset,
    Example,
    ExampleState,
    RatingChoice,
    ReportType,
    Task,
    Variation,
)
from consensus.models import Adjudication, AdjudicationStatus, ConsensusLabel, LabelSource
from exports.columns import CONTEXT, JUDGE_FILES, RELEASE_FILES, in_file_order
from judges.models import JudgeEnrolment, JudgeRead

ANNOTATION = Annotation._meta.db_table
ASSIGNMENT = Assignment._meta.db_table
EXAMPLE = Example._meta.db_table
PAIR = CandidatePair._meta.db_table
DATASET = Dataset._meta.db_table
VARIATION = Variation._meta.db_table
CONSENSUS = ConsensusLabel._meta.db_table
ADJUDICATION = Adjudication._meta.db_table
JUDGE_READ = JudgeRead._meta.db_table

SQLITE_SHA256 = "readingroom_sha256"
BATCH = 2000

# The snapshot the COPY connections of the build in this thread import (PostgreSQL).
_snapshot = threading.local()


@dataclass(frozen=True)
class Dialect:
    """What PostgreSQL and SQLite spell differently; everything else in the queries is shared.

    columns: each field is a column of its own, unquoted, instead of one finished record (the
    analysis reads a study's rows through COPY's own CSV output on PostgreSQL: see copy_csv()).
    The values are the same; only who quotes them differs.
    """

    vendor: str
    columns: bool = False

    def ordered(self, sql: str) -> str:
        # Code-point order: PostgreSQL's "C" collation; SQLite's default (BINARY) already is.
        return f'{sql} COLLATE "C"' if self.vendor == "postgresql" else sql

    def contains(self, sql: str, char: str) -> str:
        function = "strpos" if self.vendor == "postgresql" else "instr"
        return f"{function}({sql}, {self.char(char)}) > 0"

    def char(self, char: str) -> str:
        if char in "\r\n":
            return f"chr({ord(char)})" if self.vendor == "postgresql" else f"char({ord(char)})"
        return "'" + char.replace("'", "''") + "'"

    def uuid_hex(self, sql: str) -> str:
        # Django stores UUIDs on SQLite as 32 hex digits; PostgreSQL's text form has hyphens.
        return f"replace(CAST({sql} AS text), '-', '')" if self.vendor == "postgresql" else sql

    def sha256(self, sql: str) -> str:
        if self.vendor == "postgresql":
            return f"sha256(convert_to({sql}, 'UTF8'))"
        return f"{SQLITE_SHA256}({sql})"


def sql_dialect(*, columns: bool = False) -> Dialect:
    """The connection's dialect (PostgreSQL or SQLite; any other is refused)."""
    if connection.vendor not in ("postgresql", "sqlite"):
        raise NotImplementedError(f"Releases are built on PostgreSQL or SQLite, not {connection.vendor}.")
    return Dialect(connection.vendor, columns)


def csv_field(dialect: Dialect, sql: str) -> str:
    """A text value as one RFC 4180 field: quoted, inner quotes doubled, only when it must be."""
    if dialect.columns:
        return sql
    needs_quotes = " OR ".join(dialect.contains(sql, char) for char in (",", '"', "\r", "\n"))
    return f"""CASE WHEN {needs_quotes} THEN '"' || replace({sql}, '"', '""') || '"' ELSE {sql} END"""


def rating_label(sql: str, params: list) -> str:
    """The label readers saw for a stored rating ('' for none); labels hold no CSV specials."""
    cases = []
    for value, label in RatingChoice.choices:
        cases.append("WHEN %s THEN %s")
        params += [value, label]
    return f"CASE {sql} {' '.join(cases)} ELSE '' END"


def record(dialect: Dialect, fields: list[str]) -> str:
    """Fields (SQL expressions of CSV fields) as one CRLF-terminated CSV record (or as columns)."""
    if dialect.columns:
        return ", ".join(fields)
    record = " || ',' || ".join(fields) + f" || {dialect.char(chr(13))} || {dialect.char(chr(10))}"
    # On PostgreSQL as bytea: binary COPY then hands over its bytes untouched (nothing to unescape).
    return f"convert_to({record}, 'UTF8')" if dialect.vendor == "postgresql" else record


@dataclass(frozen=True)
class Selection:
    """Which examples of a study go into the release."""

    study_id: int
    task: str
    datasets: list[str]
    include_unfinished: bool

    def where(self, params: list) -> str:
        clauses = ["e.study_id = %s", "e.task = %s"]
        params += [self.study_id, self.task]
        if self.datasets:
            clauses.append(f"d.key IN ({', '.join(['%s'] * len(self.datasets))})")
            params += self.datasets
        if not self.include_unfinished:
            clauses.append(f"EXISTS (SELECT 1 FROM {CONSENSUS} c0 WHERE c0.example_id = e.id)")
        return " AND ".join(clauses)


def _keys(dialect: Dialect, realism: bool) -> list[str]:
    keys = ["d.key", "p.source_study_id", "v.key"] + (["e.report_type"] if realism else [])
    return [dialect.ordered(key) for key in keys]


def _key_fields(dialect: Dialect, realism: bool) -> dict[str, str]:
    fields = {
        "dataset": csv_field(dialect, "d.key"),
        "study_id": csv_field(dialect, "p.source_study_id"),
        "reref_variation": csv_field(dialect, "v.key"),
    }
    # report_type is one of two fixed words: no quoting needed.
    return fields | ({"report_type": "e.report_type"} if realism else {})


def _file(selection: Selection, kind: str) -> tuple[str, ...]:
    """The columns of the selection's task's file of this kind (full, disagreed, consensus, judges)."""
    prefix = "task1" if selection.task == Task.REALISM else "task2"
    if kind == "judges":
        return JUDGE_FILES[f"judges/{prefix}_judges.csv"]
    return RELEASE_FILES[f"{prefix}/{prefix}_{kind}.csv"]


FROM_EXAMPLES = f"""
    FROM {EXAMPLE} e
    JOIN {PAIR} p ON p.id = e.pair_id
    JOIN {DATASET} d ON d.id = p.dataset_id
    JOIN {VARIATION} v ON v.id = p.variation_id"""


def _shown(dialect: Dialect, condition: str, section: str, *, swapped: bool = False) -> str:
    """A report section as the reader saw it: the original's when condition holds, else the rewrite's."""
    first, second = ("alternative", "original") if swapped else ("original", "alternative")
    return csv_field(dialect, f"CASE WHEN {condition} THEN p.{first}_{section} ELSE p.{second}_{section} END")


# After a full file's record, for the analysis of a live study only (never in a release): the read's
# slot, its reader's user id, its rationale and time on task (ms), as text.
READ_COLUMNS = ("read_slot", "read_reader", "read_rationale", "read_duration_ms")
READ_FIELDS = (
    "CAST(s.slot AS text)",
    "CAST(a.reader_id AS text)",
    "a.rationale",
    "COALESCE(CAST(a.duration_ms AS text), '')",
)


def full_query(
    selection: Selection, seed: int, *, text: bool = True, columns: bool = False, reads: bool = False
) -> tuple[str, list]:
    """One record per individual annotation, adjudications excluded, in key then index order.

    text=False leaves the rationale and the report sections empty (the analysis does not read
    them); every other field is the same. columns: the fields as columns (Dialect.columns).
    reads: each record is followed by READ_COLUMNS (the rationale whatever text says).
    """
    dialect = sql_dialect(columns=columns)
    realism = selection.task == Task.REALISM
    params: list = []
    prefix = f"'readingroom-release:{int(seed)}:'"
    shuffle = dialect.sha256(
        f"{prefix} || {dialect.uuid_hex('e.public_id')} || ':' || {dialect.uuid_hex('a.public_id')}"
    )
    fields = _key_fields(dialect, realism)
    fields["annotation_index"] = "CAST(row_number() OVER shuffled - 1 AS text)"
    if not realism:
        fields["report_a_type"] = "a.report_a_type"
    fields["rating"] = rating_label("a.rating", params)
    texts = {column: csv_field(dialect, f"a.{column}") for column in ("rationale",)}
    texts |= {column: csv_field(dialect, f"p.{column}") for column in CONTEXT}
    sections = ("findings", "impression")
    if realism:
        texts |= {s: _shown(dialect, f"e.report_type = '{ReportType.ORIGINAL}'", s) for s in sections}
    else:
        a_is_original = f"a.report_a_type = '{ReportType.ORIGINAL}'"
        texts |= {f"report_a_{s}": _shown(dialect, a_is_original, s) for s in sections}
        texts |= {f"report_b_{s}": _shown(dialect, a_is_original, s, swapped=True) for s in sections}
    fields |= texts if text else dict.fromkeys(texts, "''")
    where = selection.where(params)
    keys = ", ".join(_keys(dialect, realism))
    after = "".join(f", {field}" for field in READ_FIELDS) if reads else ""
    slots = f"JOIN {ASSIGNMENT} s ON s.id = a.assignment_id" if reads else ""
    sql = f"""
    SELECT {record(dialect, in_file_order(fields, _file(selection, "full")))}{after}
    {FROM_EXAMPLES}
    JOIN {ANNOTATION} a ON a.example_id = e.id
    {slots}
    WHERE a.voided_at IS NULL AND a.settled_at IS NOT NULL AND {where}
    WINDOW shuffled AS (PARTITION BY {keys} ORDER BY {shuffle})
    ORDER BY {keys}, {shuffle}"""
    return sql, params


def disagreed_query(selection: Selection, *, columns: bool = False) -> tuple[str, list]:
    """The adjudicator's rating and rationale of each three-way split (empty while undecided)."""
    dialect = sql_dialect(columns=columns)
    realism = selection.task == Task.REALISM
    params: list = []
    fields = _key_fields(dialect, realism)
    fields["rating"] = rating_label("j.rating", params)
    fields["rationale"] = csv_field(dialect, "COALESCE(j.rationale, '')")
    params += [AdjudicationStatus.DONE]
    where = selection.where(params)
    params += [LabelSource.ADJUDICATED, ExampleState.ADJUDICATION]
    sql = f"""
    SELECT {record(dialect, in_file_order(fields, _file(selection, "disagreed")))}
    {FROM_EXAMPLES}
    LEFT JOIN {CONSENSUS} c ON c.example_id = e.id
    LEFT JOIN {ADJUDICATION} j ON j.example_id = e.id AND j.status = %s
    WHERE {where} AND (c.label_source = %s OR e.state = %s)
    ORDER BY {", ".join(_keys(dialect, realism))}"""
    return sql, params


def consensus_query(selection: Selection, *, columns: bool = False) -> tuple[str, list]:
    """One record per released example, followed by its rating, label source and annotation count
    (columns: the fields as columns, Dialect.columns, and nothing after them)."""
    dialect = sql_dialect(columns=columns)
    realism = selection.task == Task.REALISM
    params: list = []
    # A consensus stores how many annotations it was decided on (a void withdraws it); only
    # examples still without one need counting.
    count = (
        "COALESCE(c.n_annotations, "
        f"(SELECT COUNT(*) FROM {ANNOTATION} a WHERE a.example_id = e.id AND a.voided_at IS NULL "
        "AND a.settled_at IS NOT NULL))"
    )
    fields = _key_fields(dialect, realism)
    fields["rating"] = rating_label("c.rating", params)
    fields["label_source"] = "COALESCE(c.label_source, '')"
    fields["n_annotations"] = f"CAST({count} AS text)"
    where = selection.where(params)
    after = "" if columns else f", c.rating, c.label_source, {count}"
    sql = f"""
    SELECT {record(dialect, in_file_order(fields, _file(selection, "consensus")))}{after}
    {FROM_EXAMPLES}
    LEFT JOIN {CONSENSUS} c ON c.example_id = e.id
    WHERE {where}
    ORDER BY {", ".join(_keys(dialect, realism))}"""
    return sql, params


def judges_query(selection: Selection, judge_index: dict[int, int], *, columns: bool = False) -> tuple[str, list]:
    """One record per rated judge read of a released example (--include-judges), in key then judge order.

    judge_index maps a judge's enrolment id to its index in this release (judge_indexes()); the
    account never appears. Task 1: keys, judge_index, rating, rationale; Task 2: keys,
    judge_index, report_a_type, rating, rationale. columns: the fields as columns (Dialect.columns).
    """
    dialect = sql_dialect(columns=columns)
    realism = selection.task == Task.REALISM
    params: list = []
    cases = []
    for enrolment_id, index in sorted(judge_index.items()):
        cases.append("WHEN %s THEN %s")
        params += [enrolment_id, index]
    index_sql = f"CASE j.enrolment_id {' '.join(cases)} END"
    fields = _key_fields(dialect, realism)
    fields["judge_index"] = f"CAST({index_sql} AS text)"
    if not realism:
        fields["report_a_type"] = "j.report_a_type"
    fields["rating"] = rating_label("j.rating", params)
    fields["rationale"] = csv_field(dialect, "j.rationale")
    where = selection.where(params)
    order_params = params[: 2 * len(cases)]
    sql = f"""
    SELECT {record(dialect, in_file_order(fields, _file(selection, "judges")))}
    {FROM_EXAMPLES}
    JOIN {JUDGE_READ} j ON j.example_id = e.id
    WHERE j.rating <> '' AND {where}
    ORDER BY {", ".join(_keys(dialect, realism))}, {index_sql}"""
    return sql, params + order_params


def judge_indexes(selection: Selection, seed: int) -> dict[int, int]:
    """Judge enrolment id -> its index in a release: 0, 1, ... in the order of
    sha256("readingroom-release-judge:<study seed>:<enrolment public id>"), over the judges with a
    rated read of a released example of either task. Reproducible, and no account in sight."""
    enrolments = set()
    for task in (Task.REALISM, Task.EQUIVALENCE):
        params: list = []
        where = Selection(selection.study_id, task, selection.datasets, selection.include_unfinished).where(params)
        with connection.cursor() as cursor:
            cursor.execute(
                f"SELECT DISTINCT j.enrolment_id {FROM_EXAMPLES} JOIN {JUDGE_READ} j ON j.example_id = e.id "
                f"WHERE j.rating <> '' AND {where}",
                params,
            )
            enrolments.update(row[0] for row in cursor.fetchall())
    from_ids = dict(JudgeEnrolment.objects.filter(pk__in=enrolments).values_list("pk", "public_id"))
    ranked = sorted(
        from_ids,
        key=lambda pk: hashlib.sha256(f"readingroom-release-judge:{int(seed)}:{from_ids[pk].hex}".encode()).digest(),
    )
    return {pk: index for index, pk in enumerate(ranked)}


def copies() -> bool:
    """Whether this connection's reads go through COPY on connections of their own (PostgreSQL,
    outside a transaction): then queries built with columns=True are read with copy_csv()."""
    return connection.vendor == "postgresql" and not connection.in_atomic_block


@contextmanager
def snapshot() -> Iterator[str | None]:
    """Every read of the database inside this block sees one and the same committed state.

    PostgreSQL: a REPEATABLE READ, READ ONLY transaction on this connection; its snapshot is
    exported (pg_export_snapshot()) and each COPY connection of stream() imports it (SET
    TRANSACTION SNAPSHOT), so the six files, the counts and the README agree with each other
    whatever is submitted meanwhile. The block is given the snapshot's id, for copy_csv() in
    other threads. SQLite: one deferred read transaction on this connection; in WAL mode (the
    project's setting) it reads the database as it was at its first read while other
    connections keep committing (in rollback-journal mode, writers wait for it instead).

    Nothing may be written on this connection inside the block: progress goes through another
    one. Inside a transaction already (a caller's atomic block, a test), the reads stay in it.
    """
    if connection.in_atomic_block:
        yield None
        return
    if connection.vendor == "postgresql":
        with transaction.atomic():
            with connection.cursor() as cursor:
                cursor.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ, READ ONLY")
                cursor.execute("SELECT pg_export_snapshot()")
                (_snapshot.id,) = cursor.fetchone()
            try:
                yield _snapshot.id
            finally:
                _snapshot.id = None
        return
    # Not atomic(): the project's SQLite connections begin IMMEDIATE (a write lock), which would
    # keep the progress writes out for the whole build. A deferred transaction only reads.
    connection.ensure_connection()
    with connection.cursor() as cursor:
        cursor.execute("BEGIN DEFERRED")
    try:
        yield None
    finally:
        with connection.cursor() as cursor:
            cursor.execute("ROLLBACK")  # nothing was written: this only ends the read


def stream(sql: str, params: list, types: tuple[str, ...] = ()) -> Iterator[tuple]:
    """The query's rows as the database produces them, the record (first column) as UTF-8 bytes.

    types names the PostgreSQL types of the other columns (binary COPY needs them). The caller
    may use the database between rows (a worker records its progress): the rows come from a
    connection of their own, or from a server-side cursor inside the caller's transaction.
    """
    snapshot_id = getattr(_snapshot, "id", None)
    if connection.vendor == "sqlite":
        connection.ensure_connection()
        connection.connection.create_function(SQLITE_SHA256, 1, _sqlite_sha256, deterministic=True)
        with connection.cursor() as cursor:
            cursor.execute(sql, params)
            while rows := cursor.fetchmany(BATCH):
                for record, *rest in rows:
                    yield (record.encode("utf-8"), *rest)
    elif connection.in_atomic_block and not snapshot_id:
        # Only this connection sees the caller's uncommitted rows. A server-side cursor leaves it
        # free for other queries between batches, which a COPY in progress would not.
        with connection.cursor() as cursor:
            cursor.execute("SET LOCAL jit = off")
        with connection.chunked_cursor() as cursor:
            cursor.execute(sql, params)
            while rows := cursor.fetchmany(BATCH):
                yield from rows
    else:
        with _copier(snapshot_id) as cursor, cursor.copy(f"COPY ({sql}) TO STDOUT (FORMAT binary)", params) as copy:
            copy.set_types(["bytea", *types])
            yield from copy.rows()


def copy_csv(sql: str, params: list, into: BinaryIO, snapshot_id: str | None = None) -> None:
    """Write a query's rows (built with columns=True) to into as PostgreSQL's COPY formats them in CSV.

    COPY quotes a field only where it must, as the release does, but writes an empty text as ""
    and NULL as nothing, and ends a row with LF: parsed, the values are those of the release's
    records. Where copies() holds; on a connection of its own, so from any thread, reading
    snapshot_id's state (see snapshot()) when given.
    """
    with (
        _copier(snapshot_id, side_by_side=True) as cursor,
        cursor.copy(f"COPY ({sql}) TO STDOUT (FORMAT csv)", params) as copy,
    ):
        for row in copy:
            into.write(row)


@contextmanager
def _copier(snapshot_id: str | None, *, side_by_side: bool = False) -> Iterator:
    """A cursor in a transaction on a second connection: COPY there is the fastest way out of PostgreSQL.

    With a snapshot id (see snapshot()), the transaction reads the database as the exporting one does.
    side_by_side: other copies run at the same time (copy_csv()), one per core, so the query gets
    no parallel workers of its own: they would only compete with the other copies for the cores,
    and gathering their rows costs CPU (a third more for the analysis' seven tables at 100,000 pairs).
    """
    copier = connections.create_connection(DEFAULT_DB_ALIAS)
    try:
        copier.ensure_connection()
        raw = copier.connection
        with raw.transaction(), raw.cursor() as cursor:
            if snapshot_id:
                from psycopg import sql as pgsql  # PostgreSQL only: not imported where SQLite is the database

                cursor.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ, READ ONLY")
                # SET takes no bound parameters: the id (from pg_export_snapshot) goes in as a literal.
                cursor.execute(pgsql.SQL("SET TRANSACTION SNAPSHOT {}").format(pgsql.Literal(snapshot_id)))
            # Compiling these wide formatting expressions takes longer than it saves.
            cursor.execute("SET LOCAL jit = off")
            if side_by_side:
                cursor.execute("SET LOCAL max_parallel_workers_per_gather = 0")
            yield cursor
    finally:
        copier.close()


def _sqlite_sha256(text: str) -> bytes:
    return hashlib.sha256(text.encode("utf-8")).digest()
