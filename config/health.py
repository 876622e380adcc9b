"""/healthz for a load balancer: is this server able to serve, that is, are the database and the
storages of the files the application keeps (releases, results) reachable?

It is answered by the first middleware, before the host check, the HTTPS redirect, the session or
the log-in: a load balancer asks over plain HTTP, by the server's address, with no cookie. It says
only "ok" or "unavailable" per check (what failed goes to the server log), reads nothing of a study
and writes nothing to the database.
"""

import logging
import os
from collections.abc import Callable
from pathlib import Path

from django.core.files.storage import FileSystemStorage, Storage, storages
from django.db import connections
from django.http import HttpRequest, HttpResponse, JsonResponse

logger = logging.getLogger("readingroom.health")

PATH = "/healthz"
# The storages of the files the application keeps (settings.STORAGES).
KEPT_FILES = ("releases", "results")
# A name nothing is stored under: asking whether it exists reaches an object store without a listing.
PROBE = "healthz-probe"


class HealthCheckMiddleware:
    """Answers GET or HEAD /healthz: 200 when every check passes, else 503; {"status", "checks"}."""

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        if request.path != PATH:
            return self.get_response(request)
        if request.method not in ("GET", "HEAD"):
            return JsonResponse({"detail": "Method not allowed."}, status=405, headers={"Allow": "GET, HEAD"})
        checks = {"database": _check(_database), **{name: _check(_storage, name) for name in KEPT_FILES}}
        healthy = all(result == "ok" for result in checks.values())
        body = {"status": "ok" if healthy else "unavailable", "checks": checks}
        return JsonResponse(body, status=200 if healthy else 503, headers={"Cache-Control": "no-store"})


def _check(probe: Callable[..., None], *args: str) -> str:
    try:
        probe(*args)
    except Exception:
        logger.exception("Health check failed: %s", args[0] if args else "database")
        return "unavailable"
    return "ok"


def _database() -> None:
    with connections["default"].cursor() as cursor:
        cursor.execute("SELECT 1")
        cursor.fetchone()


def _storage(name: str) -> None:
    storage: Storage = storages[name]
    if isinstance(storage, FileSystemStorage):
        # Made by the first build or computation; until then its parent must take it.
        folder = Path(storage.location)
        folder.mkdir(parents=True, exist_ok=True)
        if not os.access(folder, os.W_OK | os.X_OK):
            raise PermissionError(f"{folder} is not writable by this server")
    elif hasattr(storage, "bucket"):
        # An S3-compatible store (django-storages): the bucket exists and these credentials reach it.
        storage.bucket.meta.client.head_bucket(Bucket=storage.bucket.name)
    else:
        storage.exists(PROBE)  # another kind of storage: one question, with this server's credentials
