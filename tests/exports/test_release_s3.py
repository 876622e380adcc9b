"""Releases kept in an S3-compatible object store (READINGROOM_STORAGE=s3), over HTTP against moto's
server on loopback: stored once and checked, downloaded through a signed URL behind the same
permission check, removed on failure and on deletion, and nothing left on the host's disk."""

import hashlib
import re
import urllib.request
from urllib.parse import parse_qs, urlsplit

import pytest
from django.core.files.storage import storages

from annotation.models import Role
from exports import building, tasks
from exports.models import ReleaseStatus
from exports.services import delete_release
from exports.tasks import build_release_task
from tests.exports.release_helpers import make_release, rated_study
from tests.factories import make_user

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def releases_dir(settings, tmp_path):
    settings.RELEASES_DIR = tmp_path / "releases"  # the worker's local scratch folder only
    return settings.RELEASES_DIR


def _object(s3_server, bucket: str, key: str) -> bytes:
    return s3_server.client().get_object(Bucket=bucket, Key=key)["Body"].read()


def _built(study, **fields):
    release = make_release(study, **fields)
    build_release_task.call(str(release.public_id))
    release.refresh_from_db()
    return release


def test_a_build_stores_its_zip_in_the_bucket_once_and_nothing_on_the_disk(s3_server, s3_bucket, releases_dir):
    release = _built(rated_study())

    assert release.status == ReleaseStatus.DONE, release.error
    key = f"releases/{release.public_id}.zip"
    assert s3_server.keys(s3_bucket) == [key]
    assert hashlib.sha256(_object(s3_server, s3_bucket, key)).hexdigest() == release.sha256
    assert release.zip_path == f"{release.public_id}.zip"
    assert list(releases_dir.iterdir()) == []  # the build folder is gone, and no zip was written here


@pytest.mark.parametrize("path", ["/releases/{id}/download/", "/api/releases/{id}/download/"])
def test_a_download_is_a_redirect_to_a_short_lived_signed_url_of_the_zip(client, s3_server, s3_bucket, path):
    release = _built(rated_study(), version="1.0.2")
    url = path.format(id=release.public_id)
    client.force_login(make_user(Role.COORDINATOR))
    assert client.get(url).status_code in (403, 404)  # the same check as ever, before any URL

    client.force_login(make_user(Role.DATA_MANAGER))
    response = client.get(url)

    assert response.status_code == 302
    assert response["Cache-Control"] == "no-store"
    signed = response["Location"]
    query = parse_qs(urlsplit(signed).query)
    assert signed.startswith(f"{s3_server.endpoint}/{s3_bucket}/releases/{release.public_id}.zip?")
    assert query["X-Amz-Expires"] == ["300"]
    with urllib.request.urlopen(signed, timeout=10) as answer:  # noqa: S310 (the loopback server)
        body = answer.read()
        assert answer.headers["Content-Disposition"] == 'attachment; filename="s1-1.0.2.zip"'
        assert answer.headers["Content-Type"] == "application/zip"
    assert hashlib.sha256(body).hexdigest() == release.sha256


def test_a_zip_gone_from_the_bucket_is_a_404(client, s3_server, s3_bucket):
    release = _built(rated_study())
    s3_server.client().delete_object(Bucket=s3_bucket, Key=f"releases/{release.public_id}.zip")
    client.force_login(make_user(Role.DATA_MANAGER))

    assert client.get(f"/releases/{release.public_id}/download/").status_code == 404


def test_a_build_that_fails_after_its_upload_removes_the_object(s3_server, s3_bucket, monkeypatch, releases_dir):
    rmtree = tasks.shutil.rmtree

    def broken(path, ignore_errors=False):
        if ignore_errors:  # clearing the way before the build, and the clean-up after a failure
            return rmtree(path, ignore_errors=True)
        raise OSError("Input/output error")  # removing the build folder, after the upload

    monkeypatch.setattr(tasks.shutil, "rmtree", broken)
    release = _built(rated_study())

    assert release.status == ReleaseStatus.FAILED
    assert s3_server.keys(s3_bucket) == []


def test_an_upload_that_does_not_read_back_as_built_is_removed_and_the_build_fails(s3_server, s3_bucket, monkeypatch):
    monkeypatch.setattr(building, "stored_sha256", lambda name: "0" * 64)
    release = _built(rated_study())

    assert release.status == ReleaseStatus.FAILED
    assert s3_server.keys(s3_bucket) == []


def _zip_file(tmp_path) -> tuple:
    path = tmp_path / "r.zip"
    path.write_bytes(b"the zip's bytes")
    return path, hashlib.sha256(b"the zip's bytes").hexdigest()


def test_a_stored_zip_that_reads_back_otherwise_is_removed_and_the_error_names_both_digests(
    s3_server, s3_bucket, tmp_path
):
    path, sha256 = _zip_file(tmp_path)
    expected = f"The stored zip's SHA-256 is {sha256}; the build's is {'0' * 64}."

    with pytest.raises(building.StoredZipMismatch, match=re.escape(expected)):
        building.store_zip(path, "r.zip", "0" * 64)

    assert s3_server.keys(s3_bucket) == []


def test_a_storage_that_keeps_the_zip_under_another_name_is_refused_and_left_empty(
    s3_server, s3_bucket, tmp_path, monkeypatch
):
    storage = storages["releases"]
    save = storage.save
    monkeypatch.setattr(storage, "save", lambda name, content: save(f"other-{name}", content))
    path, sha256 = _zip_file(tmp_path)

    with pytest.raises(
        building.StoredZipMismatch, match=re.escape("The storage kept the zip as other-r.zip, not r.zip.")
    ):
        building.store_zip(path, "r.zip", sha256)

    assert s3_server.keys(s3_bucket) == []


def test_on_one_host_the_zip_is_moved_into_a_folder_made_for_it_and_removed_if_it_reads_back_otherwise(
    tmp_path, settings
):
    settings.RELEASES_DIR = tmp_path / "data" / "releases"  # neither exists yet
    path, sha256 = _zip_file(tmp_path)

    with pytest.raises(building.StoredZipMismatch, match=re.escape(f"the build's is {'0' * 64}.")):
        building.store_zip(path, "bad.zip", "0" * 64)
    building.store_zip(_zip_file(tmp_path)[0], "good.zip", sha256)

    assert [p.name for p in settings.RELEASES_DIR.iterdir()] == ["good.zip"]
    assert not path.exists()  # moved, not copied


def test_a_large_zip_is_uploaded_in_parts_and_checked(s3_server, s3_bucket, tmp_path):
    large = tmp_path / "large.zip"
    large.write_bytes(hashlib.sha256(b"seed").digest() * (12 * 1024 * 1024 // 32))  # 12 MB
    sha256 = hashlib.sha256(large.read_bytes()).hexdigest()

    building.store_zip(large, "large.zip", sha256)

    head = s3_server.client().head_object(Bucket=s3_bucket, Key="releases/large.zip")
    assert head["ContentLength"] == 12 * 1024 * 1024
    assert head["ETag"].strip('"').endswith("-2")  # a multipart upload's ETag counts its parts
    assert building.stored_sha256("large.zip") == sha256


def test_deleting_a_release_removes_its_object(s3_server, s3_bucket, django_capture_on_commit_callbacks):
    release = _built(rated_study())

    with django_capture_on_commit_callbacks(execute=True):
        delete_release(release, user=make_user(Role.DATA_MANAGER))

    assert s3_server.keys(s3_bucket) == []
    assert not storages["releases"].exists(f"{release.public_id}.zip")
