"""/healthz: what a load balancer asks before sending a server requests."""

import pytest
from django.core.files.storage import storages
from django.db import connections
from django.test import override_settings

pytestmark = pytest.mark.django_db

OK = {"status": "ok", "checks": {"database": "ok", "releases": "ok", "results": "ok"}}


def _storages_in(tmp_path) -> dict:
    return {
        **storages.backends,
        "releases": {
            "BACKEND": "django.core.files.storage.FileSystemStorage",
            "OPTIONS": {"location": tmp_path / "releases"},
        },
        "results": {
            "BACKEND": "django.core.files.storage.FileSystemStorage",
            "OPTIONS": {"location": tmp_path / "results"},
        },
    }


def test_a_healthy_server_answers_200_ok_over_http_by_any_host_name_without_a_cookie(client, tmp_path):
    # As a load balancer asks: plain HTTP with the HTTPS redirect on, by an address not in ALLOWED_HOSTS.
    with override_settings(STORAGES=_storages_in(tmp_path), SECURE_SSL_REDIRECT=True, ALLOWED_HOSTS=["example.org"]):
        response = client.get("/healthz", HTTP_HOST="10.0.0.7:8000")
        head = client.head("/healthz", HTTP_HOST="10.0.0.7:8000")

    assert response.status_code == 200 and head.status_code == 200
    assert response.json() == OK
    assert response["Cache-Control"] == "no-store"
    assert not response.cookies
    assert (tmp_path / "releases").is_dir() and (tmp_path / "results").is_dir()  # made, as a first build would


def test_the_database_down_is_a_503_that_names_the_check_and_not_the_error(client, tmp_path, monkeypatch, caplog):
    def refuse(*args, **kwargs):
        raise OSError("connection refused by db.internal:5432")

    monkeypatch.setattr(connections["default"], "cursor", refuse)
    with override_settings(STORAGES=_storages_in(tmp_path)):
        response = client.get("/healthz")

    assert response.status_code == 503
    assert response.json() == {"status": "unavailable", "checks": {**OK["checks"], "database": "unavailable"}}
    assert b"db.internal" not in response.content
    assert "db.internal" in caplog.text  # the server's log says why


def test_a_storage_that_cannot_be_written_is_a_503(client, tmp_path):
    (tmp_path / "releases").write_text("a file where the folder should be")

    with override_settings(STORAGES=_storages_in(tmp_path)):
        response = client.get("/healthz")

    assert response.status_code == 503
    assert response.json()["checks"] == {"database": "ok", "releases": "unavailable", "results": "ok"}


def test_an_object_store_is_ok_when_its_bucket_answers_and_503_when_it_does_not(client, s3_server, s3_bucket, settings):
    assert client.get("/healthz").json() == OK

    s3_server.client().delete_bucket(Bucket=s3_bucket)
    settings.STORAGES = {**settings.STORAGES}  # new storage objects, as a restarted server would have
    response = client.get("/healthz")

    assert response.status_code == 503
    assert response.json()["checks"] == {"database": "ok", "releases": "unavailable", "results": "unavailable"}


@pytest.mark.parametrize("method", ["post", "put", "delete"])
def test_only_get_and_head_are_answered(client, method):
    response = getattr(client, method)("/healthz")
    assert response.status_code == 405
    assert response["Allow"] == "GET, HEAD"


def test_other_paths_go_on_as_before(client):
    assert client.get("/healthz/").status_code == 404
    assert client.get("/healthzz").status_code == 404
