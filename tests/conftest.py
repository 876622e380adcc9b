import fcntl
import os
import sqlite3
import tempfile
import uuid
from pathlib import Path

import pytest
import threadpoolctl
from django.conf import settings
from django.db import connection, connections
from pytest_django.plugin import blocking_manager_key

from annotation.models import Role
from tests import hypothesis_profiles
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


# Under pytest-xdist (bin/test runs with -n): each worker is a process of its own with a database of
# its own, cloned from one test database that the first worker to get here migrates for the whole
# run (CREATE DATABASE ... TEMPLATE on PostgreSQL, SQLite's backup API on SQLite). Cloning takes a
# fraction of a second where migrating takes seconds.
XDIST_WORKER = os.environ.get("PYTEST_XDIST_WORKER")
XDIST_RUN = os.environ.get("PYTEST_XDIST_TESTRUNUID")

if XDIST_WORKER and not MIGRATED_TEMPLATE:

    @pytest.fixture(scope="session")
    def django_db_setup(django_test_environment, django_db_blocker):
        """This worker's database: a clone of the run's migrated template, dropped at the end."""
        with django_db_blocker.unblock():
            template = _migrated_template()
            clone = connection.creation.get_test_db_clone_settings(XDIST_WORKER)["NAME"]
            if connection.vendor == "sqlite":
                Path(clone).unlink(missing_ok=True)
                source, copy = sqlite3.connect(template), sqlite3.connect(clone)
                source.backup(copy)
                source.close()
                copy.close()
            else:
                connection.creation.clone_test_db(suffix=XDIST_WORKER, verbosity=0, autoclobber=True)
            connection.settings_dict["NAME"] = clone
            settings.DATABASES["default"]["NAME"] = clone
        yield
        with django_db_blocker.unblock():
            _close_connections()
            _drop(clone)


def _migrated_template() -> str:
    """The run's migrated test database, made once for all workers (a file lock orders them); its name.

    Leaves this process's settings naming it, and no connection open to it (PostgreSQL clones only a
    database nobody is connected to).
    """
    marker = Path(tempfile.gettempdir()) / f"readingroom-test-template-{XDIST_RUN}"
    with open(f"{marker}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if marker.exists():
            name = marker.read_text()
            connection.settings_dict["NAME"] = name
            settings.DATABASES["default"]["NAME"] = name
        else:
            name = connection.creation.create_test_db(verbosity=0, autoclobber=True)
            _close_connections()
            marker.write_text(name)
    return name


def _drop(name: str) -> None:
    """Drop a test database. On PostgreSQL WITH (FORCE): a connection a thread of a test left open
    (a live server's, a streamed response's) would otherwise refuse the drop and fail the run."""
    if connection.vendor != "postgresql":
        connection.creation._destroy_test_db(name, verbosity=0)
        return
    with connection.creation._nodb_cursor() as cursor:
        cursor.execute(f"DROP DATABASE IF EXISTS {connection.ops.quote_name(name)} WITH (FORCE)")


def _close_connections() -> None:
    connection.close()
    if hasattr(connection, "close_pool"):
        connection.close_pool()


def pytest_report_header(config: pytest.Config) -> str:
    return f"hypothesis profile: {hypothesis_profiles.PROFILE} (HYPOTHESIS_PROFILE; tests/hypothesis_profiles.py)"


def pytest_configure(config: pytest.Config) -> None:
    """The xdist controller names the run, so that it can find the run's template afterwards.

    An xdist worker is one of a process per core, so it uses one BLAS thread (numpy's and scipy's
    OpenBLAS read these variables when they load, before any test here imports them; threadpoolctl
    limits one loaded already): their threads on top of the workers only waited on each other, which
    doubled the CPU of the mixed models' fits. tests/analysis/test_parallel.py sets its own."""
    if getattr(config.option, "numprocesses", None) and not hasattr(config, "workerinput"):
        config.option.testrunuid = config.option.testrunuid or uuid.uuid4().hex
    if hasattr(config, "workerinput"):
        os.environ.update(dict.fromkeys(("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"), "1"))
        threadpoolctl.threadpool_limits(1)


def pytest_sessionfinish(session: pytest.Session) -> None:
    """In the xdist controller, once every worker has finished: drop the run's template database."""
    run = getattr(session.config.option, "testrunuid", None)
    if hasattr(session.config, "workerinput") or not getattr(session.config.option, "numprocesses", None) or not run:
        return
    marker = Path(tempfile.gettempdir()) / f"readingroom-test-template-{run}"
    if marker.exists():
        name = marker.read_text()
        with session.config.stash[blocking_manager_key].unblock():
            _drop(name)
        if connection.vendor == "sqlite":
            for leftover in (f"{name}-wal", f"{name}-shm"):
                Path(leftover).unlink(missing_ok=True)
        marker.unlink()
    Path(f"{marker}.lock").unlink(missing_ok=True)


# Fixtures that read the published-shape replay through the services (20 to 30 s a module): the
# tests that use them are long, and bin/test --fast leaves them out like the other slow ones.
REPLAY_FIXTURES = {"replay", "replay_release"}


@pytest.hookimpl(tryfirst=True)  # before -m deselects by marker
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        if REPLAY_FIXTURES & set(getattr(item, "fixturenames", ())):
            item.add_marker(pytest.mark.slow)
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


@pytest.fixture(scope="session")
def s3_server():
    """An S3-compatible server (moto's server mode) on loopback, for this test process's tests."""
    from tests.s3 import running_s3_server

    with running_s3_server() as server:
        yield server


@pytest.fixture
def s3_bucket(s3_server, settings) -> str:
    """A new, empty bucket, and the settings of READINGROOM_STORAGE=s3 that point the releases and
    results storages at it (as config/settings.py makes them from the environment)."""
    from config.storage import s3_storages

    bucket = s3_server.new_bucket()
    settings.STORAGES = {**settings.STORAGES, **s3_storages()}
    for name, value in s3_server.settings(bucket).items():
        if name.startswith("AWS_"):
            setattr(settings, name, value)
    settings.AWS_DEFAULT_ACL = None
    settings.AWS_QUERYSTRING_EXPIRE = 300
    settings.AWS_S3_SIGNATURE_VERSION = "s3v4"
    return bucket


@pytest.fixture(scope="session", autouse=True)
def _statements_built_afresh():
    """The hand-written statements are built once per process and cached (functools.cache). bin/mutate
    forks each mutant's run from a process that ran the tests already: without this, the statement
    built there would hide a mutant of the code that builds it. Costs nothing in a fresh process."""
    from annotation import authentication, roles

    for cached in (roles._roles_statement, authentication._lookup, authentication._selected):
        cached.cache_clear()
