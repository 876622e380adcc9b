"""Read-only test data built once per module (a module-scoped fixture), not once per test."""

from collections.abc import Iterator
from contextlib import contextmanager

from django.db import transaction


@contextmanager
def rolled_back(django_db_blocker) -> Iterator[None]:
    """The database open to a module-scoped fixture, in a transaction rolled back at the module's end.
    Each test's own transaction (pytest-django's db fixture) is then a savepoint inside it."""
    with django_db_blocker.unblock(), transaction.atomic():
        yield
        transaction.set_rollback(True)
