"""The release API: queue a build (202), follow it, download the zip; data managers only."""

import uuid

import pytest
from django.db import connection
from django.tasks import default_task_backend
from django.test.utils import CaptureQueriesContext

from annotation.models import Dataset, Role
from exports.models import Release, ReleaseStatus
from exports.tasks import build_release_task
from tests.exports.release_helpers import ROW_COUNTS, make_release, rated_study, sha256_of
from tests.factories import make_study, make_token, make_user

pytestmark = pytest.mark.django_db

USERS = {
    "anonymous": lambda: None,
    "reader": lambda: make_user(Role.READER),
    "adjudicator": lambda: make_user(Role.ADJUDICATOR),
    "coordinator": lambda: make_user(Role.COORDINATOR),
    "data manager": lambda: make_user(Role.DATA_MANAGER),
    "superuser": lambda: make_user(is_superuser=True),
}
ALLOWED = {"data manager", "superuser"}


@pytest.fixture(autouse=True)
def releases_dir(settings, tmp_path):
    settings.RELEASES_DIR = tmp_path / "releases"
    default_task_backend.clear()
    return settings.RELEASES_DIR


@pytest.fixture
def data_manager():
    return make_user(Role.DATA_MANAGER)


def _built(study, **fields) -> Release:
    release = make_release(study, **fields)
    build_release_task.call(str(release.public_id))
    release.refresh_from_db()
    return release


@pytest.mark.parametrize("kind", USERS)
def test_the_permission_matrix_holds(client, kind, django_capture_on_commit_callbacks):
    study = rated_study()
    done = _built(study)
    user = USERS[kind]()
    if user is not None:
        client.force_login(user)

    with django_capture_on_commit_callbacks(execute=True):
        responses = {
            "list": client.get("/api/studies/s1/releases/"),
            "create": client.post(
                "/api/studies/s1/releases/", {"version": "2.0.0", "license_text": "x"}, content_type="application/json"
            ),
            "detail": client.get(f"/api/releases/{done.public_id}/"),
            "download": client.get(f"/api/releases/{done.public_id}/download/"),
        }

    expected = (
        {"list": 200, "create": 202, "detail": 200, "download": 200}
        if kind in ALLOWED
        else dict.fromkeys(responses, 401 if kind == "anonymous" else 403)
    )
    assert {name: response.status_code for name, response in responses.items()} == expected
    assert Release.objects.count() == (2 if kind in ALLOWED else 1)


def test_it_accepts_a_data_managers_token(data_manager):
    study = make_study("s1", license_text="CC0\n")
    token = make_token(data_manager)

    from django.test import Client

    response = Client(HTTP_AUTHORIZATION=f"Token {token}").post(
        "/api/studies/s1/releases/", {}, content_type="application/json"
    )

    assert response.status_code == 202
    assert Release.objects.get(study=study).license_text == "CC0\n"


def test_create_queues_a_build_and_answers_202(client, data_manager, django_capture_on_commit_callbacks):
    study = rated_study(license_text="The study's licence.\n")
    client.force_login(data_manager)

    with django_capture_on_commit_callbacks(execute=True):
        response = client.post(
            "/api/studies/s1/releases/",
            {"version": "2.0.1", "datasets": ["mimic-cxr"], "include_unfinished": True},
            content_type="application/json",
        )

    assert response.status_code == 202
    body = response.json()
    release = Release.objects.get()
    assert body["id"] == str(release.public_id)
    assert body["status"] == "queued"
    assert body["progress"] == 0
    assert body["download_url"] is None
    assert (body["study"], body["version"], body["datasets"], body["include_unfinished"]) == (
        "s1",
        "2.0.1",
        ["mimic-cxr"],
        True,
    )
    assert body["license_text"] == "The study's licence.\n"  # the study's, when none is given
    assert body["requested_by"] == data_manager.get_username()
    assert response["Location"] == body["url"]
    assert body["url"].endswith(f"/api/releases/{release.public_id}/")
    [queued] = default_task_backend.results
    assert queued.args == [str(release.public_id)]
    assert release.study == study
    assert release.status == ReleaseStatus.QUEUED  # not built inside the request


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"version": "one"}, "Version 'one' is not digits and dots (e.g. 1.0.0)."),
        ({"license_text": "  "}, "A release needs its licence text"),
        ({"datasets": ["nope"]}, "Unknown dataset(s): nope."),
    ],
)
def test_create_refuses_bad_options_with_400(client, data_manager, options, message):
    rated_study()
    client.force_login(data_manager)

    response = client.post(
        "/api/studies/s1/releases/", {"license_text": "x", **options}, content_type="application/json"
    )

    assert response.status_code == 400
    assert message in response.json()["detail"]
    assert not Release.objects.exists()
    assert default_task_backend.results == []


def test_unknown_datasets_are_named_with_the_datasets_to_choose_from(client, data_manager):
    rated_study()
    client.force_login(data_manager)
    known = ", ".join(sorted(Dataset.objects.values_list("key", flat=True)))

    response = client.post(
        "/api/studies/s1/releases/",
        {"license_text": "x", "datasets": ["nope", "mimic-cxr", "also-nope"]},
        content_type="application/json",
    )

    assert response.status_code == 400
    assert response.json()["detail"] == f"Unknown dataset(s): also-nope, nope. Use one of: {known}."
    assert "mimic-cxr, " in known
    assert not Release.objects.exists()


def test_create_refuses_a_version_too_long_for_the_field(client, data_manager):
    rated_study()
    client.force_login(data_manager)

    response = client.post(
        "/api/studies/s1/releases/", {"version": "1" * 33, "license_text": "x"}, content_type="application/json"
    )

    assert response.status_code == 400
    assert "version" in response.json()
    assert not Release.objects.exists()


def test_an_unknown_study_is_404(client, data_manager):
    client.force_login(data_manager)

    assert client.get("/api/studies/nope/releases/").status_code == 404
    response = client.post("/api/studies/nope/releases/", {"license_text": "x"}, content_type="application/json")
    assert response.status_code == 404


def test_the_list_shows_a_studys_builds_newest_first(client, data_manager):
    study = make_study("s1")
    older = make_release(study, version="1.0")
    newer = make_release(study, version="1.1", status=ReleaseStatus.FAILED, error="Why it failed.")
    make_release(make_study("other"))
    client.force_login(data_manager)

    body = client.get("/api/studies/s1/releases/").json()

    assert body["count"] == 2
    assert [r["id"] for r in body["results"]] == [str(newer.public_id), str(older.public_id)]
    assert body["results"][0]["error"] == "Why it failed."


def test_detail_reports_status_progress_row_counts_and_sha256(client, data_manager):
    study = rated_study()
    running = make_release(study, status=ReleaseStatus.RUNNING, progress=35)
    done = _built(study)
    client.force_login(data_manager)

    building = client.get(f"/api/releases/{running.public_id}/").json()
    finished = client.get(f"/api/releases/{done.public_id}/").json()

    assert (building["status"], building["progress"], building["sha256"], building["download_url"]) == (
        "running",
        35,
        "",
        None,
    )
    assert finished["status"] == "done"
    assert finished["progress"] == 100
    assert finished["row_counts"] == ROW_COUNTS
    assert finished["sha256"] == sha256_of(done.zip_file())
    assert finished["download_url"].endswith(f"/api/releases/{done.public_id}/download/")
    assert "zip_path" not in finished


def test_detail_of_an_unknown_release_is_404(client, data_manager):
    client.force_login(data_manager)

    assert client.get(f"/api/releases/{uuid.uuid4()}/").status_code == 404
    assert client.get("/api/releases/not-a-uuid/").status_code == 404


@pytest.mark.parametrize("accept", ["*/*", "application/zip"])
def test_download_streams_the_zip(client, data_manager, accept):
    release = _built(rated_study(), version="1.0.2")
    client.force_login(data_manager)

    response = client.get(f"/api/releases/{release.public_id}/download/", HTTP_ACCEPT=accept)

    assert response.status_code == 200
    assert response["Content-Type"] == "application/zip"
    assert response["Content-Disposition"] == 'attachment; filename="s1-1.0.2.zip"'
    assert b"".join(response.streaming_content) == release.zip_file().read_bytes()


@pytest.mark.parametrize("status", [ReleaseStatus.QUEUED, ReleaseStatus.RUNNING, ReleaseStatus.FAILED])
def test_download_is_404_unless_done(client, data_manager, status):
    release = make_release(make_study("s1"), status=status)
    client.force_login(data_manager)

    response = client.get(f"/api/releases/{release.public_id}/download/")

    assert response.status_code == 404
    assert "detail" in response.json()


def test_the_list_query_count_does_not_grow_with_the_builds(client, data_manager):
    client.force_login(data_manager)
    counts = []
    for n in (2, 10):
        study = make_study()
        for _ in range(n):
            make_release(study, status=ReleaseStatus.DONE, row_counts=ROW_COUNTS)
        url = f"/api/studies/{study.slug}/releases/"
        client.get(url)
        with CaptureQueriesContext(connection) as queries:
            assert client.get(url).status_code == 200
        counts.append(len(queries))
    assert counts[0] == counts[1]


def test_the_schema_documents_the_release_endpoints(client, data_manager):
    client.force_login(data_manager)

    paths = client.get("/api/schema/", {"format": "json"}).json()["paths"]

    releases = paths["/api/studies/{slug}/releases/"]
    assert set(releases) >= {"get", "post"}
    assert "202" in releases["post"]["responses"]
    assert "400" in releases["post"]["responses"]
    assert "get" in paths["/api/releases/{release_id}/"]
    download = paths["/api/releases/{release_id}/download/"]["get"]["responses"]["200"]["content"]
    assert "application/zip" in download
