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

Key = tuple[int, int, str]  # (reader id, study id, task)

_pending: ContextVar[dict[Key, list[int]] | None] = ContextVar("readingroom_queue_counts", default=None)


def count(reader_id: int, study_id: int, task: str, *, opened: int = 0, rated: int = 0) -> None:
    """Record that a queue gained `opened` open items (negative: lost) and `rated` ratings."""
    pending = _pending.get()
    if pending is None:
        _write({(reader_id, study_id, task): [opened, rated]})
        return
    entry = pending.setdefault((reader_id, study_id, task), [0, 0])
    entry[0] += opened
    entry[1] += rated


def count_opened(rows: Counter[Key]) -> None:
    """Many new open items at once: rows maps (reader, study, task) to how many."""
    for (reader_id, study_id, task), n in rows.items():
        count(reader_id, study_id, task, opened=n)


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
    rows = [(r, s, t, max(o, 0), max(n, 0), o, n) for (r, s, t), (o, n) in sorted(changes.items()) if o or n]
    if not rows:
        return
    # One upsert per queue (SQLite and PostgreSQL both speak ON CONFLICT). The deltas go in as
    # parameters of the UPDATE: the row proposed for the INSERT must itself pass the check
    # constraints, which a decrement would not. A counter that would go below zero fails the
    # check constraint and with it the whole transaction.
    sql = (
        "INSERT INTO annotation_readerqueue (reader_id, study_id, task, open_count, rated_count) "
        "VALUES (%s, %s, %s, %s, %s) ON CONFLICT (reader_id, study_id, task) DO UPDATE SET "
        "open_count = annotation_readerqueue.open_count + %s, rated_count = annotation_readerqueue.rated_count + %s"
    )
    with connection.cursor() as cursor:
        cursor.executemany(sql, rows)
