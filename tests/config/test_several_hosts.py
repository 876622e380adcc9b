"""Several hosts on one PostgreSQL and one object store: two gunicorn servers and two racing workers,
as separate processes, each with release and results folders of its own (as separate hosts would
have), READINGROOM_STORAGE=s3 against moto's server on loopback.

A release requested through server A is built by one of the workers and downloaded through server B,
byte for byte; the Results page and its figures come from server B; every task runs once, on one
worker; and nothing is kept in any host's folders.
"""

import hashlib
import json
import os
import socket
import subprocess
import sys
import urllib.error
import urllib.request
from pathlib import Path

import pytest
from django.conf import settings
from django.db import connection
from django.tasks import TaskResultStatus
from django.test import Client, override_settings
from django_tasks_db.models import DBTaskResult

from annotation.models import Role
from exports.models import Release, ReleaseStatus
from tests.exports.release_helpers import rated_study
from tests.factories import make_token, make_user
from tests.workers import db_worker, wait_for

pytestmark = [pytest.mark.postgres, pytest.mark.slow, pytest.mark.django_db(transaction=True)]

ROOT = Path(__file__).resolve().parents[2]
LOOPBACK = "127.0.0.1"


def _port() -> int:
    with socket.socket() as probe:
        probe.bind((LOOPBACK, 0))
        return probe.getsockname()[1]


def _database_url() -> str:
    database = connection.settings_dict
    return f"postgres://{database['USER']}@{database['HOST']}:{database['PORT']}/{database['NAME']}"


def _server(port: int, environment: dict) -> subprocess.Popen:
    gunicorn = Path(sys.executable).with_name("gunicorn")
    command = [gunicorn, "-c", "deploy/gunicorn.conf.py", "config.wsgi", "--bind", f"{LOOPBACK}:{port}"]
    command += ["--workers", "2", "--access-logfile", "/dev/null"]
    return subprocess.Popen(command, cwd=ROOT, env=environment, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)  # noqa: S603


def _get(url: str, *, token: str = "", cookie: str = "", follow: bool = True) -> tuple[int, dict, bytes]:
    headers = {"Authorization": f"Token {token}"} if token else {}
    if cookie:
        headers["Cookie"] = cookie
    opener = urllib.request.build_opener() if follow else urllib.request.build_opener(_NoRedirect)
    try:
        with opener.open(urllib.request.Request(url, headers=headers), timeout=30) as answer:  # noqa: S310 (loopback)
            return answer.status, dict(answer.headers), answer.read()
    except urllib.error.HTTPError as answer:
        return answer.code, dict(answer.headers), answer.read()


class _NoRedirect(urllib.request.HTTPRedirectHandler):
    def redirect_request(self, *args, **kwargs):
        return None


def _post(url: str, body: dict, *, token: str) -> tuple[int, dict]:
    request = urllib.request.Request(  # noqa: S310 (loopback)
        url,
        data=json.dumps(body).encode(),
        headers={"Authorization": f"Token {token}", "Content-Type": "application/json"},
        method="POST",
    )
    try:
        with urllib.request.urlopen(request, timeout=30) as answer:  # noqa: S310 (loopback)
            return answer.status, json.loads(answer.read())
    except urllib.error.HTTPError as answer:
        return answer.code, json.loads(answer.read())


def _files_under(folder: Path) -> list[Path]:
    return [path for path in folder.rglob("*") if path.is_file()] if folder.exists() else []


def test_two_servers_and_two_workers_share_one_database_and_one_bucket(s3_server, tmp_path):
    bucket = s3_server.new_bucket()
    base = {
        **os.environ,
        **s3_server.settings(bucket),
        "DATABASE_URL": _database_url(),
        "DEBUG": "1",
        "DJANGO_SETTINGS_MODULE": "config.settings",
        # The same key on every host, and this process's: the test's session is signed with it.
        "SECRET_KEY": settings.SECRET_KEY,
        "DATABASE_POOL_MIN_SIZE": "1",
        "DATABASE_POOL_MAX_SIZE": "4",  # a worker building a release holds up to 4 (deploy/env.example)
    }
    hosts = {name: tmp_path / name for name in ("server-a", "server-b", "worker-1", "worker-2")}

    def host(name: str) -> dict:
        return {
            **base,
            "READINGROOM_RELEASES_DIR": str(hosts[name] / "releases"),
            "READINGROOM_RESULTS_DIR": str(hosts[name] / "results"),
        }

    study = rated_study()
    data_manager = make_user(Role.DATA_MANAGER)
    token = make_token(data_manager)
    browser = Client()
    browser.force_login(data_manager)  # a session in the shared database, valid on every server
    cookie = f"sessionid={browser.cookies['sessionid'].value}"

    ports = {"server-a": _port(), "server-b": _port()}
    processes = [_server(port, host(name)) for name, port in ports.items()]
    database_queue = {"default": {"BACKEND": "django_tasks_db.DatabaseBackend", "QUEUES": ["default"]}}
    try:
        a, b = (f"http://{LOOPBACK}:{ports[name]}" for name in ("server-a", "server-b"))
        wait_for(lambda: _answers(f"{a}/healthz") and _answers(f"{b}/healthz"), seconds=60, poll=0.2)
        with override_settings(TASKS=database_queue):
            processes += [db_worker(**host("worker-1")), db_worker(**host("worker-2"))]

        # Three releases through server A, at once: the two workers race for them.
        ids = []
        for version in ("1.0.0", "1.0.1", "1.0.2"):
            status, body = _post(f"{a}/api/studies/{study.slug}/releases/", {"version": version}, token=token)
            assert status == 202, body
            ids.append(body["id"])
        done = lambda: Release.objects.filter(status=ReleaseStatus.DONE).count() == 3  # noqa: E731
        failed = lambda: Release.objects.filter(status=ReleaseStatus.FAILED).exists()  # noqa: E731
        wait_for(lambda: done() or failed(), seconds=120, poll=0.2)
        assert not failed(), list(Release.objects.values_list("error", flat=True))

        # Downloaded through server B: a redirect to the object, the bytes the build made.
        for release in Release.objects.filter(public_id__in=ids):
            status, headers, _ = _get(f"{b}/api/releases/{release.public_id}/download/", token=token, follow=False)
            assert status == 302
            status, _, body = _get(headers["Location"])
            assert status == 200 and hashlib.sha256(body).hexdigest() == release.sha256

        # The results: asked of server B, computed by a worker, their page and figure served by B.
        wait_for(lambda: _get(f"{b}/api/studies/{study.slug}/results/", token=token)[0] == 200, seconds=180, poll=0.5)
        status, _, page = _get(f"{b}/studies/{study.slug}/results/", cookie=cookie)
        assert status == 200 and b"Up to date" in page
        status, headers, figure = _get(f"{b}/studies/{study.slug}/results/figures/task1_forest.svg", cookie=cookie)
        assert status == 200 and figure.startswith(b"<?xml")

        # Each task ran once, on one worker.
        tasks = list(DBTaskResult.objects.all())
        assert len(tasks) >= 4
        assert all(task.status == TaskResultStatus.SUCCESSFUL and len(task.worker_ids) == 1 for task in tasks)
    finally:
        for process in processes:
            process.terminate()
        for process in processes:
            process.wait(timeout=60)

    keys = s3_server.keys(bucket)
    assert sum(key.startswith("releases/") for key in keys) == 3
    assert any(key.startswith(f"results/{study.public_id}/") for key in keys)
    assert {name: _files_under(folder) for name, folder in hosts.items()} == {name: [] for name in hosts}


def _answers(url: str) -> bool:
    try:
        return _get(url)[0] == 200
    except OSError:
        return False
