"""A real `manage.py db_worker` process on the test database, for the tests that kill one."""

import os
import subprocess
import sys
import time
from pathlib import Path

from django.db import connection

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
