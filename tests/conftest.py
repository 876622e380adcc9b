import os
import sqlite3
import tempfile
from pathlib import Path

import pytest
from django.db import connection, connections

from annotation.models import Role
from tests.factories import make_study, make_user

# bin/mutate runs the tests once per mutant, each run in a process forked from one parent: set,
# this names an SQLite database migrated once, which each run copies instead of migrating afresh.
MIGRATED_TEMPLATE = os.environ.get("READINGROOM_TEST_DB_TEMPLATE")

if MIGRATED_TEMPLATE:

    @pytest.fixture(scope="session")
    def django_db_setup(django_test_environment, django_db_blocker):
        """A copy of the migrated template, of this process's own: forked runs never share one."""
        path = Path(tempfile.gettempdir()) / f"readingroom-mutation-{os.getpid()}.sqlite3"
        source, copy = sqlite3.connect(MIGRATED_TEMPLATE), sqlite3.connect(path)
        source.backup(copy)
        source.close()
        copy.close()
        connection.close()
        connections["default"].settings_dict["NAME"] = str(path)
        yield
        connection.close()
        path.unlink(missing_ok=True)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        if item.get_closest_marker("postgres") and connection.vendor != "postgresql":
            item.add_marker(pytest.mark.skip(reason="needs PostgreSQL: set DATABASE_URL to run it"))


@pytest.fixture
def coordinator(db):
    return make_user(Role.COORDINATOR, username="coord")


@pytest.fixture
def reader(db):
    return make_user(Role.READER, username="reader")


@pytest.fixture
def study(db):
    return make_study("s1")
