"""The counters of each reader's queue (ReaderQueue), kept in step with the assignments.

Every change to an assignment's existence or status that moves it in or out of "open", or
makes it rated, calls count(). Inside `counting()` the changes are collected and written when
the block ends, in one order (reader, study, task): two transactions that both touch the
counters of readers X and Y then take those row locks in the same order and cannot deadlock
(a submit of X's that routes a third read to Y, while Y's submit routes one to X). Outside a
`counting()` block a change is written at once.
"""

from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar

from django.db import connection
from django.utils import timezone

Key = tuple[int, int, str]  # (reader id, study id, task)
# The counters of a queue, in the order count() takes and _write() writes them.
COUNTERS = ("open_count", "rated_count", "held_count", "third_read_count", "second_read_count")

_pending: ContextVar[dict[Key, list[int]] | None] = ContextVar("readingroom_queue_counts", default=None)


def count(
    reader_id: int,
    study_id: int,
    task: str,
    *,
    opened: int = 0,
    rated: int = 0,
    held: int = 0,
    third_reads: int = 0,
    second_reads: int = 0,
) -> None:
    """Record that a queue gained `opened` open items it can give (negative: lost), `rated` ratings,
    `held` items in its reserve, `third_reads` third reads and `second_reads` ratings that gave an
    example its second settled read."""
    deltas = (opened, rated, held, third_reads, second_reads)
    pending = _pending.get()
    if pending is None:
        _write({(reader_id, study_id, task): list(deltas)})
        return
    entry = pending.setdefault((reader_id, study_id, task), [0] * len(COUNTERS))
    for position, delta in enumerate(deltas):
        entry[position] += delta


def count_opened(rows: Counter[Key]) -> None:
    """Many new open items at once: rows maps (reader, study, task) to how many."""
    for (reader_id, study_id, task), n in rows.items():
        count(reader_id, study_id, task, opened=n)


def count_held(rows: Counter[Key]) -> None:
    """Many new items in readers' reserves at once: rows maps (reader, study, task) to how many."""
    for (reader_id, study_id, task), n in rows.items():
        count(reader_id, study_id, task, held=n)


@contextmanager
def counting() -> Iterator[None]:
    """Collect counter changes and write them, in lock order, when the block ends without error.

    Use it inside the transaction whose assignments the changes describe. Nested blocks add
    to the outermost one.
    """
    if _pending.get() is not None:
        yield
        return
    pending: dict[Key, list[int]] = {}
    token = _pending.set(pending)
    try:
        yield
    finally:
        _pending.reset(token)
    _write(pending)


def _write(changes: dict[Key, list[int]]) -> None:
    now = timezone.now()
    rows = [
        (
            *key,
            *(max(delta, 0) for delta in deltas),
            now if deltas[1] > 0 else None,
            *deltas,
            now if deltas[1] > 0 else None,
        )
        for key, deltas in sorted(changes.items())
        if any(deltas)
    ]
    if not rows:
        return
    # One upsert per queue (SQLite and PostgreSQL both speak ON CONFLICT). The deltas go in as
    # parameters of the UPDATE: the row proposed for the INSERT must itself pass the check
    # constraints, which a decrement would not. A counter that would go below zero fails the
    # check constraint and with it the whole transaction. A rating given stamps last_rated_at.
    table = "annotation_readerqueue"
    columns = ", ".join(COUNTERS)
    placeholders = ", ".join(["%s"] * len(COUNTERS))
    updates = ", ".join(f"{name} = {table}.{name} + %s" for name in COUNTERS)
    sql = (
        f"INSERT INTO {table} (reader_id, study_id, task, {columns}, last_rated_at) "  # noqa: S608
        f"VALUES (%s, %s, %s, {placeholders}, %s) ON CONFLICT (reader_id, study_id, task) DO UPDATE SET "
        f"{updates}, last_rated_at = COALESCE(%s, {table}.last_rated_at)"
    )
    with connection.cursor() as cursor:
        cursor.executemany(sql, rows)
