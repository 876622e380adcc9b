"""ReadingRoom settings. Everything deployment-specific comes from the environment.

DATABASE_URL   database (default: SQLite file db.sqlite3 in the project folder)
SECRET_KEY     required unless READINGROOM_DEMO or DEBUG is on
DEBUG          off by default
ALLOWED_HOSTS  comma-separated
READINGROOM_RELEASES_DIR  where built release zips are kept (default: releases/ in the project)
READINGROOM_RESULTS_DIR   where computed study results are kept (default: results/ in the project)
READINGROOM_RESERVE_QUIET_SECONDS  a reader with an empty queue waits for colleagues who rated within
                          this many seconds before their reserve is opened (default 300; consensus.reserve)
"""

from pathlib import Path

import dj_database_url
from django.core.exceptions import ImproperlyConfigured
from django.utils.csp import CSP

from config.env import env_bool, env_int, env_list, env_str
from config.storage import local_storages, s3_storages

BASE_DIR = Path(__file__).resolve().parent.parent

DEBUG = env_bool("DEBUG", default=False)
# The demo and the local commands (bin/demo, bin/manage): one person on this machine, served on
# 127.0.0.1 without TLS, but with the site's own error pages and quiet logs (DEBUG's technical pages
# and tracebacks only where a developer sets DEBUG=1).
DEMO = env_bool("READINGROOM_DEMO", default=False)
LOCAL = DEBUG or DEMO

SECRET_KEY = env_str("SECRET_KEY")
if not SECRET_KEY:
    if not LOCAL:
        raise ImproperlyConfigured(
            "SECRET_KEY is not set. Set it in the environment (for example: "
            "export SECRET_KEY=$(python -c 'import secrets; print(secrets.token_urlsafe(50))')), "
            "or set READINGROOM_DEMO=1 (or DEBUG=1) on your own machine (bin/manage and bin/demo do)."
        )
    SECRET_KEY = "development-only-insecure-key-do-not-use-in-production"  # noqa: S105

ALLOWED_HOSTS = env_list("ALLOWED_HOSTS", default=["127.0.0.1", "localhost"] if LOCAL else [])
CSRF_TRUSTED_ORIGINS = env_list("CSRF_TRUSTED_ORIGINS")

INSTALLED_APPS = [
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    "rest_framework",
    "drf_spectacular",
    "drf_spectacular_sidecar",
    "django_htmx",
    "axes",
    "django_tasks_db",
    "annotation",
    "consensus",
    "exports",
    "analysis",
    "judges",
    "reading",
]

MIDDLEWARE = [
    # First: a load balancer's /healthz is answered before the host check and the HTTPS redirect.
    "config.health.HealthCheckMiddleware",
    "django.middleware.security.SecurityMiddleware",
    "whitenoise.middleware.WhiteNoiseMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
    "django.middleware.csp.ContentSecurityPolicyMiddleware",
    "django_htmx.middleware.HtmxMiddleware",
    # Must be last: it turns lockouts into responses.
    "axes.middleware.AxesMiddleware",
]

ROOT_URLCONF = "config.urls"

TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [BASE_DIR / "templates"],
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
                "django.template.context_processors.csp",
                "annotation.context_processors.roles",
                "annotation.context_processors.preferences",
            ],
        },
    },
]

WSGI_APPLICATION = "config.wsgi.application"


def _database_from_url(url: str) -> dict:
    config = dj_database_url.parse(url, conn_max_age=0)
    if config["ENGINE"] == "django.db.backends.postgresql":
        # psycopg 3's connection pool; Django requires CONN_MAX_AGE = 0 with it.
        config.setdefault("OPTIONS", {})["pool"] = {
            "min_size": env_int("DATABASE_POOL_MIN_SIZE", 2),
            "max_size": env_int("DATABASE_POOL_MAX_SIZE", 10),
            "timeout": env_int("DATABASE_POOL_TIMEOUT", 10),
        }
        if env_bool("DATABASE_PREPARED_STATEMENTS", True):
            # Parameters bound by the server, and a statement run 5 times on a connection is prepared:
            # PostgreSQL then plans the reading requests' statements once per pooled connection, not on
            # every request (their planning cost more than running them). Off (0) behind a pooler in
            # transaction mode, such as PgBouncer's, where a session's prepared statements are not kept.
            config["OPTIONS"]["server_side_binding"] = True
            config["OPTIONS"]["prepare_threshold"] = 5
    if config["ENGINE"] == "django.db.backends.sqlite3":
        # Wait for a writer instead of failing at once with "database is locked". WAL: a reader
        # (a release build's snapshot) does not stop writers from committing, nor they it.
        config.setdefault("OPTIONS", {}).update(
            {"timeout": 20, "transaction_mode": "IMMEDIATE", "init_command": "PRAGMA journal_mode=WAL"}
        )
    return config


DATABASES = {
    "default": _database_from_url(env_str("DATABASE_URL", f"sqlite:///{BASE_DIR / 'db.sqlite3'}")),
}
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

AUTHENTICATION_BACKENDS = [
    # Must be first: it refuses locked-out credentials before any other backend checks them.
    "axes.backends.AxesStandaloneBackend",
    "django.contrib.auth.backends.ModelBackend",
]

AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.UserAttributeSimilarityValidator"},
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator"},
    {"NAME": "django.contrib.auth.password_validation.CommonPasswordValidator"},
    {"NAME": "django.contrib.auth.password_validation.NumericPasswordValidator"},
]

LOGIN_URL = "login"
LOGIN_REDIRECT_URL = "home"
LOGOUT_REDIRECT_URL = "login"

# Login lockout: five failures for one username from one address lock that pair for an hour.
AXES_FAILURE_LIMIT = env_int("AXES_FAILURE_LIMIT", 5)
AXES_COOLOFF_TIME = env_int("AXES_COOLOFF_HOURS", 1)
AXES_LOCKOUT_PARAMETERS = [["username", "ip_address"]]
AXES_RESET_ON_SUCCESS = True
AXES_LOCKOUT_TEMPLATE = "registration/locked_out.html"
AXES_ENABLE_ACCESS_FAILURE_LOG = True
# Behind a reverse proxy, count it so that the client's address (not the proxy's) is locked out.
AXES_IPWARE_PROXY_COUNT = env_int("AXES_PROXY_COUNT", 0) or None
AXES_IPWARE_META_PRECEDENCE_ORDER = (
    ["HTTP_X_FORWARDED_FOR", "REMOTE_ADDR"] if AXES_IPWARE_PROXY_COUNT else ["REMOTE_ADDR"]
)

LANGUAGE_CODE = "en-us"
TIME_ZONE = "UTC"
USE_I18N = True
USE_TZ = True

STATIC_URL = "static/"
STATIC_ROOT = BASE_DIR / "staticfiles"
STATICFILES_DIRS = [BASE_DIR / "static"]
STORAGES = {
    "default": {"BACKEND": "django.core.files.storage.FileSystemStorage"},
    "staticfiles": {
        "BACKEND": "django.contrib.staticfiles.storage.StaticFilesStorage"
        if LOCAL
        else "whitenoise.storage.CompressedManifestStaticFilesStorage"
    },
}
WHITENOISE_USE_FINDERS = LOCAL  # served from static/ as they are, no collectstatic

# A reader whose queue is empty waits this long after a colleague's last rating before a read comes
# from their reserve (consensus.reserve): while colleagues read, third reads come mixed with others.
READINGROOM_RESERVE_QUIET_SECONDS = env_int("READINGROOM_RESERVE_QUIET_SECONDS", 300)

# Uploads: the import service enforces its own limit with a clear message; Django's in-memory
# threshold stays small so large files spool to disk.
READINGROOM_IMPORT_MAX_BYTES = env_int("READINGROOM_IMPORT_MAX_BYTES", 50 * 1024 * 1024)
DATA_UPLOAD_MAX_MEMORY_SIZE = 2_621_440
FILE_UPLOAD_MAX_MEMORY_SIZE = 2_621_440

# Release builds run outside web requests, on Django's Tasks framework with a database-backed
# queue: `manage.py db_worker` runs them (bin/demo starts one). Finished zips are kept here.
TASKS = {"default": {"BACKEND": "django_tasks_db.DatabaseBackend", "QUEUES": ["default"]}}
RELEASES_DIR = Path(env_str("READINGROOM_RELEASES_DIR", str(BASE_DIR / "releases")))
# Study results (tables, figures, the download) are computed by the same worker and kept here.
RESULTS_DIR = Path(env_str("READINGROOM_RESULTS_DIR", str(BASE_DIR / "results")))
# The files the application keeps, by Django's storage API (/healthz checks that each is reachable):
# the two folders above on one host (READINGROOM_STORAGE=local, the default), or, for several hosts,
# an S3-compatible object store (READINGROOM_STORAGE=s3) configured with django-storages' own names.
READINGROOM_STORAGE = env_str("READINGROOM_STORAGE", "local")
if READINGROOM_STORAGE == "local":
    STORAGES.update(local_storages())  # the folders of RELEASES_DIR and RESULTS_DIR, read at each use
elif READINGROOM_STORAGE == "s3":
    AWS_STORAGE_BUCKET_NAME = env_str("AWS_STORAGE_BUCKET_NAME")
    if not AWS_STORAGE_BUCKET_NAME:
        raise ImproperlyConfigured("READINGROOM_STORAGE=s3 needs AWS_STORAGE_BUCKET_NAME (the bucket's name).")
    # Empty: Amazon S3 itself, and the region boto3 finds. The keys (AWS_ACCESS_KEY_ID,
    # AWS_SECRET_ACCESS_KEY) are read by django-storages and boto3 from the environment, or come
    # from the host's role.
    AWS_S3_ENDPOINT_URL = env_str("AWS_S3_ENDPOINT_URL") or None
    AWS_S3_REGION_NAME = env_str("AWS_S3_REGION_NAME") or None
    AWS_DEFAULT_ACL = None  # the bucket's own policy: private
    # A download is a redirect to a signed URL (Signature Version 4) that expires after this many seconds.
    AWS_QUERYSTRING_EXPIRE = env_int("AWS_QUERYSTRING_EXPIRE", 300)
    AWS_S3_SIGNATURE_VERSION = "s3v4"
    STORAGES.update(s3_storages())
else:
    raise ImproperlyConfigured(f"READINGROOM_STORAGE={READINGROOM_STORAGE!r}: use local (the default) or s3.")

# E-mail, for password resets (Django's MAILERS): an SMTP server when EMAIL_HOST is set; on one's
# own machine (LOCAL: the demo, DEBUG) the console. Without either a password is reset by an administrator, and the
# pages say so.
_EMAIL_HOST = env_str("EMAIL_HOST")
if _EMAIL_HOST:
    MAILERS = {
        "default": {
            "BACKEND": "django.core.mail.backends.smtp.EmailBackend",
            "OPTIONS": {
                "host": _EMAIL_HOST,
                "port": env_int("EMAIL_PORT", 587),
                "username": env_str("EMAIL_HOST_USER") or None,
                "password": env_str("EMAIL_HOST_PASSWORD") or None,
                "use_tls": env_bool("EMAIL_USE_TLS", default=True),
                "timeout": 30,
            },
        }
    }
elif LOCAL:
    MAILERS = {"default": {"BACKEND": "django.core.mail.backends.console.EmailBackend"}}
# Else MAILERS is left undefined: Django's default (an SMTP server on this host), which nothing here uses.
DEFAULT_FROM_EMAIL = env_str("DEFAULT_FROM_EMAIL", "ReadingRoom <readingroom@localhost>")
READINGROOM_PASSWORD_RESET = bool(_EMAIL_HOST) or LOCAL

# Security headers. Production sits behind TLS; the secure defaults are off only on one's own machine.
SECURE_SSL_REDIRECT = env_bool("SECURE_SSL_REDIRECT", default=not LOCAL)
SESSION_COOKIE_SECURE = env_bool("SESSION_COOKIE_SECURE", default=not LOCAL)
CSRF_COOKIE_SECURE = env_bool("CSRF_COOKIE_SECURE", default=not LOCAL)
SECURE_HSTS_SECONDS = env_int("SECURE_HSTS_SECONDS", 0 if LOCAL else 31_536_000)
SECURE_HSTS_INCLUDE_SUBDOMAINS = env_bool("SECURE_HSTS_INCLUDE_SUBDOMAINS", default=not LOCAL)
SECURE_HSTS_PRELOAD = env_bool("SECURE_HSTS_PRELOAD", default=False)
# Preloading binds the whole domain and its subdomains to HTTPS for months and is the domain
# owner's decision (SECURE_HSTS_PRELOAD=1), so the deploy check's reminder about it is silenced.
SILENCED_SYSTEM_CHECKS = ["security.W021"]
if env_bool("SECURE_PROXY_SSL", default=False):
    SECURE_PROXY_SSL_HEADER = ("HTTP_X_FORWARDED_PROTO", "https")
SECURE_REFERRER_POLICY = "same-origin"
SESSION_COOKIE_HTTPONLY = True
SESSION_COOKIE_AGE = env_int("SESSION_COOKIE_AGE", 8 * 60 * 60)
X_FRAME_OPTIONS = "DENY"

SECURE_CSP = {
    "default-src": [CSP.SELF],
    "script-src": [CSP.SELF],
    "style-src": [CSP.SELF],
    "img-src": [CSP.SELF, "data:"],
    "connect-src": [CSP.SELF],
    "font-src": [CSP.SELF],
    "object-src": [CSP.NONE],
    "base-uri": [CSP.NONE],
    "form-action": [CSP.SELF],
    "frame-ancestors": [CSP.NONE],
}

REST_FRAMEWORK = {
    # Token first: DRF takes the first class's WWW-Authenticate challenge ("Token"), so a request
    # without credentials or with a bad token is a 401, not a 403. Sessions still work, with CSRF.
    "DEFAULT_AUTHENTICATION_CLASSES": [
        "annotation.authentication.TokenAuthentication",
        "rest_framework.authentication.SessionAuthentication",
    ],
    # Default deny: every endpoint names the role it serves.
    "DEFAULT_PERMISSION_CLASSES": ["annotation.permissions.DenyAll"],
    "DEFAULT_SCHEMA_CLASS": "drf_spectacular.openapi.AutoSchema",
    "DEFAULT_PAGINATION_CLASS": "rest_framework.pagination.PageNumberPagination",
    "PAGE_SIZE": 100,
    # JSON nested too deep is a 400, an oversized body a 413: see annotation/parsers.py and api_errors.py.
    "DEFAULT_PARSER_CLASSES": [
        "annotation.parsers.BoundedJSONParser",
        "rest_framework.parsers.FormParser",
        "rest_framework.parsers.MultiPartParser",
    ],
    "EXCEPTION_HANDLER": "annotation.api_errors.exception_handler",
    "DEFAULT_RENDERER_CLASSES": [
        "rest_framework.renderers.JSONRenderer",
        "rest_framework.renderers.BrowsableAPIRenderer",
    ],
}

SPECTACULAR_SETTINGS = {
    "TITLE": "ReadingRoom API",
    "DESCRIPTION": (
        "Blinded reader studies on radiology report text. A program sends `Authorization: Token <key>`"
        " with a token made on its person's Settings page (/settings/); a reading token reaches the"
        ' reader and adjudicator endpoints only. Every error is JSON: `{"detail": ...}`.'
    ),
    "VERSION": "1.0.0",
    "SERVE_INCLUDE_SCHEMA": False,
    "SERVE_PERMISSIONS": ["rest_framework.permissions.IsAuthenticated"],
    "SWAGGER_UI_DIST": "SIDECAR",
    "SWAGGER_UI_FAVICON_HREF": "SIDECAR",
    "REDOC_DIST": "SIDECAR",
    # One schema name per choice set, whatever the field that uses it is called.
    "ENUM_NAME_OVERRIDES": {
        "TaskEnum": "annotation.models.Task",
        "MemberRoleEnum": "annotation.models.MemberRole",
    },
}

LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "formatters": {"plain": {"format": "%(asctime)s %(levelname)s %(name)s: %(message)s"}},
    "filters": {"one_line_refusals": {"()": "config.log_filters.OneLineRefusals"}},
    "handlers": {"console": {"class": "logging.StreamHandler", "formatter": "plain"}},
    "root": {"handlers": ["console"], "level": env_str("LOG_LEVEL", "INFO")},
    "loggers": {
        # Failed logins and lockouts are logged at WARNING by django-axes.
        "axes": {"handlers": ["console"], "level": "WARNING", "propagate": False},
        "readingroom": {"handlers": ["console"], "level": "INFO", "propagate": False},
        # The font subsetter of every PDF figure narrates each step at INFO.
        "fontTools": {"level": "WARNING"},
        # A 403 is one line (user, method, path, reason), not a traceback.
        "django.request": {"filters": ["one_line_refusals"]},
    },
}
