"""Test settings: the real settings, with a throwaway key and a fast password hasher."""

import os
import tempfile
from pathlib import Path

os.environ.setdefault("SECRET_KEY", "test-only-secret-key-not-for-any-deployment-0123456789")

from config.settings import *  # noqa: F403

PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]
# Tests send e-mail to Django's in-memory outbox (mail.outbox): password resets work.
MAILERS = {"default": {"BACKEND": "django.core.mail.backends.locmem.EmailBackend"}}
READINGROOM_PASSWORD_RESET = True
STORAGES["staticfiles"]["BACKEND"] = "django.contrib.staticfiles.storage.StaticFilesStorage"  # noqa: F405
WHITENOISE_USE_FINDERS = True
WHITENOISE_AUTOREFRESH = True
SECURE_SSL_REDIRECT = False
LOGGING["root"]["level"] = "WARNING"  # noqa: F405

if DATABASES["default"]["ENGINE"] == "django.db.backends.postgresql":  # noqa: F405
    # Test data is thrown away: no need to wait for each commit to reach the disk.
    DATABASES["default"].setdefault("OPTIONS", {})["options"] = "-c synchronous_commit=off"  # noqa: F405

# Nothing runs behind a test's back: a queued build stays queued (the Dummy backend only records
# what was enqueued), just as in production where nothing builds inside the request. Tests run
# the task function themselves, or switch to the Immediate or database backend with
# override_settings(TASKS=...) to go through django.tasks end to end.
TASKS = {"default": {"BACKEND": "django.tasks.backends.dummy.DummyBackend", "QUEUES": ["default"]}}
# Never the project's releases/ folder; the release tests point it at their own tmp_path. One folder
# per pytest-xdist worker: workers run at once.
_WORKER = os.environ.get("PYTEST_XDIST_WORKER", "main")
RELEASES_DIR = Path(tempfile.gettempdir()) / f"readingroom-test-releases-{_WORKER}"
RESULTS_DIR = Path(tempfile.gettempdir()) / f"readingroom-test-results-{_WORKER}"

if DATABASES["default"]["ENGINE"] == "django.db.backends.sqlite3":  # noqa: F405
    # A file, not SQLite's shared in-memory database: the browser tests' live server runs in another
    # thread, and with shared cache a concurrent write fails at once ("table is locked") instead of
    # waiting its turn.
    import tempfile
    from pathlib import Path

    DATABASES["default"]["TEST"] = {  # noqa: F405
        "NAME": str(Path(tempfile.gettempdir()) / f"readingroom-test-{os.getpid()}.sqlite3")
    }
    # Test data is thrown away: no need to wait for each commit to reach the disk (as PostgreSQL's
    # synchronous_commit=off above).
    DATABASES["default"]["OPTIONS"]["init_command"] += "; PRAGMA synchronous=OFF"  # noqa: F405
