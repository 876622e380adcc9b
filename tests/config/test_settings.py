"""Settings come from the environment and fail loudly; the deployment settings pass Django's checks."""

import os
import re
import socket
import subprocess
import sys
from pathlib import Path

import pytest
from django.conf import settings
from django.core.management.utils import get_random_secret_key
from django.db import connection
from django.utils.csp import CSP

from config.settings import _database_from_url

REPO = Path(__file__).resolve().parents[2]
# Only what Python itself needs: none of the variables the settings read leaks in from the test run.
PASSTHROUGH = ("PATH", "HOME", "LANG", "LC_ALL", "TMPDIR", "SYSTEMROOT")


def _manage(*args: str, **env: str) -> subprocess.CompletedProcess:
    environment = {name: os.environ[name] for name in PASSTHROUGH if name in os.environ}
    environment.update(env, PYTHONDONTWRITEBYTECODE="1")
    return subprocess.run(  # noqa: S603
        [sys.executable, "manage.py", *args],
        cwd=REPO,
        env=environment,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


@pytest.fixture
def database_url(tmp_path) -> str:
    return f"sqlite:///{tmp_path / 'db.sqlite3'}"


@pytest.mark.parametrize("debug", [None, "0", "off"])
def test_it_refuses_to_start_without_a_secret_key_unless_debug(database_url, debug):
    env = {"DATABASE_URL": database_url} | ({"DEBUG": debug} if debug is not None else {})

    result = _manage("check", **env)

    assert result.returncode != 0
    # One clear line, not a traceback.
    assert result.stderr.startswith("ReadingRoom cannot start: SECRET_KEY is not set.")
    assert "Traceback" not in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1


def test_it_starts_without_a_secret_key_in_debug_mode(database_url):
    result = _manage("check", DEBUG="1", DATABASE_URL=database_url)

    assert result.returncode == 0, result.stderr
    assert "System check identified no issues" in result.stdout


S3 = {
    "READINGROOM_STORAGE": "s3",
    "AWS_STORAGE_BUCKET_NAME": "readingroom-files",
    "AWS_S3_ENDPOINT_URL": "https://objects.example.org",
    "AWS_S3_REGION_NAME": "eu-central-1",
    "AWS_ACCESS_KEY_ID": "AKIAEXAMPLE",
    "AWS_SECRET_ACCESS_KEY": "example-secret",
}


@pytest.mark.parametrize("storage", [{}, S3], ids=["local folders", "object store"])
def test_the_deploy_check_is_clean_for_production_settings(database_url, storage):
    result = _manage(
        "check",
        "--deploy",
        "--fail-level",
        "WARNING",
        DEBUG="0",
        SECRET_KEY=get_random_secret_key(),
        ALLOWED_HOSTS="readingroom.example.org",
        DATABASE_URL=database_url,
        **storage,
    )

    assert result.returncode == 0, result.stdout + result.stderr
    assert "System check identified no issues" in result.stdout
    assert "WARNING" not in result.stdout + result.stderr


@pytest.mark.parametrize(
    ("name", "value"),
    [("DEBUG", "maybe"), ("SECURE_PROXY_SSL", "sometimes"), ("AXES_FAILURE_LIMIT", "five")],
)
def test_it_refuses_a_malformed_value_naming_the_variable(database_url, name, value):
    result = _manage("check", **{"DEBUG": "1", "DATABASE_URL": database_url, name: value})

    assert result.returncode != 0
    assert result.stderr.startswith(f"ReadingRoom cannot start: {name}={value!r} is not a")


def test_the_default_database_is_the_sqlite_file_in_the_project():
    code = "from django.conf import settings; d = settings.DATABASES['default']; print(d['ENGINE']); print(d['NAME'])"

    result = _manage("shell", "--no-imports", "-c", code, DEBUG="1")

    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == ["django.db.backends.sqlite3", str(REPO / "db.sqlite3")]


def test_a_sqlite_url_waits_for_writers_instead_of_failing(tmp_path):
    config = _database_from_url(f"sqlite:///{tmp_path / 'x.sqlite3'}")

    assert config["ENGINE"] == "django.db.backends.sqlite3"
    assert config["NAME"] == str(tmp_path / "x.sqlite3")
    # WAL: a release build's read transaction neither blocks writers nor sees their commits.
    assert config["OPTIONS"] == {
        "timeout": 20,
        "transaction_mode": "IMMEDIATE",
        "init_command": "PRAGMA journal_mode=WAL",
    }


@pytest.mark.parametrize("scheme", ["postgres", "postgresql"])
def test_a_postgres_url_gets_a_connection_pool(monkeypatch, scheme):
    for name in ("DATABASE_POOL_MIN_SIZE", "DATABASE_POOL_MAX_SIZE", "DATABASE_POOL_TIMEOUT"):
        monkeypatch.delenv(name, raising=False)

    config = _database_from_url(f"{scheme}://rr:secret@db.internal:6543/readingroom")

    assert config["ENGINE"] == "django.db.backends.postgresql"
    assert (config["NAME"], config["USER"], config["PASSWORD"]) == ("readingroom", "rr", "secret")
    assert (config["HOST"], config["PORT"]) == ("db.internal", 6543)
    # Django refuses a pool with persistent connections.
    assert config["CONN_MAX_AGE"] == 0
    assert config["OPTIONS"]["pool"] == {"min_size": 2, "max_size": 10, "timeout": 10}


def test_the_pool_size_comes_from_the_environment(monkeypatch):
    monkeypatch.setenv("DATABASE_POOL_MIN_SIZE", "4")
    monkeypatch.setenv("DATABASE_POOL_MAX_SIZE", "40")

    config = _database_from_url("postgres://postgres@127.0.0.1:5432/readingroom")

    assert config["OPTIONS"]["pool"]["min_size"] == 4
    assert config["OPTIONS"]["pool"]["max_size"] == 40


@pytest.mark.postgres
def test_the_running_postgres_database_uses_the_pool(db):
    assert "pool" in connection.settings_dict["OPTIONS"]
    assert connection.settings_dict["CONN_MAX_AGE"] == 0


def test_the_settings_enforce_a_strict_content_security_policy():
    policy = settings.SECURE_CSP

    assert policy["script-src"] == [CSP.SELF]
    assert policy["default-src"] == [CSP.SELF]
    assert policy["object-src"] == [CSP.NONE]
    assert policy["frame-ancestors"] == [CSP.NONE]
    for directive, sources in policy.items():
        for source in sources:
            assert "unsafe" not in source, directive
            assert "://" not in source, directive
    assert not getattr(settings, "SECURE_CSP_REPORT_ONLY", None)


def test_a_served_page_carries_the_enforced_policy(client, db):
    response = client.get("/accounts/login/")

    assert response.status_code == 200
    header = response["Content-Security-Policy"]
    assert "script-src 'self'" in header
    assert "default-src 'self'" in header
    assert "unsafe" not in header
    assert "Content-Security-Policy-Report-Only" not in response.headers
    # Nothing on the page that the policy would block.
    html = response.content.decode()
    assert all("src=" in attributes for attributes in re.findall(r"<script([^>]*)>", html))
    assert "<style" not in html
    assert " style=" not in html


def _bin(script: str, *args: str, **env: str) -> subprocess.CompletedProcess:
    environment = {name: os.environ[name] for name in PASSTHROUGH if name in os.environ}
    environment.update(env, PYTHONDONTWRITEBYTECODE="1")
    return subprocess.run(  # noqa: S603
        [str(REPO / "bin" / script), *args],
        cwd=REPO,
        env=environment,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def test_bin_manage_runs_commands_with_the_demo_defaults(database_url):
    # No SECRET_KEY, no DEBUG: what the README's commands meet on a fresh clone.
    result = _bin("manage", "check", DATABASE_URL=database_url)

    assert result.returncode == 0, result.stderr
    assert "System check identified no issues" in result.stdout


def test_bin_manage_leaves_debug_off_where_a_secret_key_is_set(database_url):
    code = "from django.conf import settings; print(settings.DEBUG)"

    result = _bin("manage", "shell", "--no-imports", "-c", code, DATABASE_URL=database_url, SECRET_KEY="x" * 50)

    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "False"


def test_bin_demo_says_the_port_is_taken_before_doing_anything(database_url, tmp_path):
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]

        result = _bin("demo", str(port), DATABASE_URL=database_url)

    assert result.returncode != 0
    assert f"Port {port} on 127.0.0.1 is already in use" in result.stderr
    assert f"bin/demo {port + 1}" in result.stderr
    # Nothing was set up: the check comes before the database.
    assert not (tmp_path / "db.sqlite3").exists()
    assert "ReadingRoom is serving" not in result.stdout


@pytest.mark.parametrize("args,env", [(["eighty"], {}), ([], {"PORT": "70000"})])
def test_bin_demo_refuses_a_port_that_is_not_one(database_url, args, env):
    result = _bin("demo", *args, DATABASE_URL=database_url, **env)

    assert result.returncode != 0
    assert "is not a port number" in result.stderr


def test_postgres_prepares_repeated_statements_unless_turned_off(monkeypatch):
    monkeypatch.delenv("DATABASE_PREPARED_STATEMENTS", raising=False)
    config = _database_from_url("postgres://postgres@127.0.0.1:5432/readingroom")
    assert (config["OPTIONS"]["server_side_binding"], config["OPTIONS"]["prepare_threshold"]) == (True, 5)

    monkeypatch.setenv("DATABASE_PREPARED_STATEMENTS", "0")
    config = _database_from_url("postgres://postgres@127.0.0.1:5432/readingroom")
    assert "server_side_binding" not in config["OPTIONS"] and "prepare_threshold" not in config["OPTIONS"]


@pytest.mark.postgres
def test_the_running_postgres_database_prepares_a_statement_run_five_times(db):
    from annotation.models import Study

    for _ in range(6):
        list(Study.objects.filter(slug="no-such-study"))
    with connection.cursor() as cursor:
        cursor.execute("SELECT count(*) FROM pg_prepared_statements WHERE statement LIKE %s", ["%annotation_study%"])
        (prepared,) = cursor.fetchone()
    assert prepared >= 1


def test_an_object_store_without_a_bucket_or_an_unknown_storage_is_refused_by_name(database_url):
    no_bucket = _manage("check", DEBUG="1", DATABASE_URL=database_url, READINGROOM_STORAGE="s3")
    unknown = _manage("check", DEBUG="1", DATABASE_URL=database_url, READINGROOM_STORAGE="nfs")

    assert no_bucket.returncode != 0 and "AWS_STORAGE_BUCKET_NAME" in no_bucket.stderr
    assert unknown.returncode != 0 and "READINGROOM_STORAGE='nfs'" in unknown.stderr


def test_the_object_stores_settings_reach_the_storages(database_url):
    probe = (
        "from django.core.files.storage import storages; s = storages['releases']; "
        "print(s.bucket_name, s.endpoint_url, s.region_name, s.location, s.querystring_expire, s.signature_version)"
    )
    result = _manage("shell", "-c", probe, DEBUG="1", DATABASE_URL=database_url, **S3)

    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines()[-1].split() == [
        "readingroom-files", "https://objects.example.org", "eu-central-1", "releases", "300", "s3v4"
    ]  # fmt: skip


@pytest.mark.parametrize(
    ("env", "expected"),
    [
        ({"EMAIL_HOST": "smtp.example.org", "EMAIL_PORT": "2525"}, "EmailBackend smtp.example.org 2525 True True"),
        ({}, "console True"),
    ],
    ids=["smtp server", "development console"],
)
def test_password_resets_send_through_the_configured_mailer(database_url, env, expected):
    probe = (
        "from django.conf import settings; from django.core.mail import mailers; m = mailers.default; "
        "kind = [type(m).__name__, m.host, m.port, m.use_tls] if hasattr(m, 'host') "
        "else [type(m).__module__.rsplit('.', 1)[-1]]; "
        "print(*kind, settings.READINGROOM_PASSWORD_RESET)"
    )
    result = _manage("shell", "-c", probe, DEBUG="0" if env else "1", SECRET_KEY=get_random_secret_key(),
                     ALLOWED_HOSTS="readingroom.example.org", DATABASE_URL=database_url, **env)  # fmt: skip

    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines()[-1] == expected


def test_bin_manage_runs_as_the_demo_not_in_debug_mode(database_url):
    code = "from django.conf import settings; print(settings.DEBUG, settings.DEMO, settings.SECURE_SSL_REDIRECT)"

    result = _bin("manage", "shell", "--no-imports", "-c", code, DATABASE_URL=database_url)

    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "False True False"


def test_the_demo_shows_the_sites_own_error_pages_and_serves_its_static_files(database_url):
    probe = (
        "from django.test import Client; c = Client(HTTP_HOST='127.0.0.1'); "
        "page = c.get('/no-such-page/'); css = c.get('/static/css/app.css'); "
        "print(page.status_code, b'URLconf' in page.content, b'ReadingRoom' in page.content, css.status_code)"
    )
    result = _manage("shell", "--no-imports", "-c", probe, READINGROOM_DEMO="1", DATABASE_URL=database_url)

    assert result.returncode == 0, result.stderr
    assert result.stdout.strip().splitlines()[-1] == "404 False True 200"
