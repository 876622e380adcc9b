"""A real `manage.py db_worker` process on the test database, for the tests that kill one."""

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from django.db import DEFAULT_DB_ALIAS, connection, connections

ROOT = Path(__file__).resolve().parents[1]


def db_worker(**environment: str) -> subprocess.Popen:
    """Start the project's worker on this test's PostgreSQL database; environment adds variables
    (where it writes: READINGROOM_RELEASES_DIR, READINGROOM_RESULTS_DIR)."""
    settings = connection.settings_dict
    url = f"postgres://{settings['USER']}@{settings['HOST']}:{settings['PORT']}/{settings['NAME']}"
    env = {**os.environ, "DATABASE_URL": url, "DEBUG": "1", "DJANGO_SETTINGS_MODULE": "config.settings", **environment}
    command = [sys.executable, "manage.py", "db_worker", "--no-reload", "--no-startup-delay", "--interval", "0.1"]
    # The project's own command, run with this interpreter.
    return subprocess.Popen(command, cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)  # noqa: S603


def wait_for(condition, seconds: float = 60, poll: float = 0.05) -> None:
    deadline = time.monotonic() + seconds
    while not condition():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(poll)


def kill_a_worker_held_at_its_first_read(until, **environment: str) -> None:
    """kill -9 a real worker in the middle of its job: the job is held at its first read of the
    ratings (the annotations table locked ACCESS EXCLUSIVE from another connection) until until()
    holds; then the worker is killed and the lock released."""
    from annotation.models import Annotation

    blocker = connections.create_connection(DEFAULT_DB_ALIAS)
    blocker.ensure_connection()
    lock = blocker.connection
    lock.execute("BEGIN")
    lock.execute(f"LOCK TABLE {Annotation._meta.db_table} IN ACCESS EXCLUSIVE MODE")
    worker = db_worker(**environment)
    try:
        wait_for(until)
        worker.send_signal(signal.SIGKILL)
        worker.wait(timeout=30)
    finally:
        if worker.poll() is None:
            worker.kill()
            worker.wait()
        lock.execute("ROLLBACK")
        blocker.close()
