"""Test settings: the real settings, with a throwaway key and a fast password hasher."""

import os

os.environ.setdefault("SECRET_KEY", "test-only-secret-key-not-for-any-deployment-0123456789")

from config.settings import *  # noqa: F403

PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]
STORAGES["staticfiles"]["BACKEND"] = "django.contrib.staticfiles.storage.StaticFilesStorage"  # noqa: F405
WHITENOISE_USE_FINDERS = True
WHITENOISE_AUTOREFRESH = True
SECURE_SSL_REDIRECT = False
LOGGING["root"]["level"] = "WARNING"  # noqa: F405

if DATABASES["default"]["ENGINE"] == "django.db.backends.postgresql":  # noqa: F405
    # Test data is thrown away: no need to wait for each commit to reach the disk.
    DATABASES["default"].setdefault("OPTIONS", {})["options"] = "-c synchronous_commit=off"  # noqa: F405
