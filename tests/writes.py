"""What a block of code wrote to the database: every statement that changes a row, as it was sent.

A refused request must write nothing. Watching the statements sent is both stricter and cheaper
than reading the tables before and after: it sees a write to any table, also one that leaves a row
as it was, at no query's cost.
"""

from collections.abc import Iterator
from contextlib import contextmanager

from django.db import connections

WRITING = frozenset({"INSERT", "UPDATE", "DELETE", "REPLACE", "MERGE", "TRUNCATE", "DROP", "ALTER", "CREATE"})


@contextmanager
def statements_writing(using: str = "default") -> Iterator[list[str]]:
    """Collects, in the list it yields, the SQL of every writing statement sent on this thread's
    connection while the block runs (savepoints and reads are not writes)."""
    written: list[str] = []

    def watch(execute, sql, params, many, context):
        keyword = sql.lstrip().split(None, 1)[0].upper() if sql.strip() else ""
        if keyword in WRITING:
            written.append(sql)
        return execute(sql, params, many, context)

    with connections[using].execute_wrapper(watch):
        yield written
