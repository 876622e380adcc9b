"""A data manager retries a failed build or deletes a finished one, on the page or the API; both are audited."""

import pytest
from django.db import connection
from django.tasks import default_task_backend
from django.test.utils import CaptureQueriesContext
from django.urls import reverse

from annotation.models import Role
from exports.models import Release, ReleaseAction, ReleaseEvent, ReleaseStatus
from exports.tasks import build_release_task
from tests.exports.release_helpers import make_release, rated_study
from tests.factories import make_study, make_user

pytestmark = pytest.mark.django_db

HTMX = {"HTTP_HX_REQUEST": "true"}


@pytest.fixture(autouse=True)
def releases_dir(settings, tmp_path):
    settings.RELEASES_DIR = tmp_path / "releases"
    default_task_backend.clear()
    return settings.RELEASES_DIR


@pytest.fixture
def data_manager():
    return make_user(Role.DATA_MANAGER, username="dm")


def _built(study, **fields) -> Release:
    release = make_release(study, **fields)
    build_release_task.call(str(release.public_id))
    release.refresh_from_db()
    return release


def _failed(study, **fields) -> Release:
    return make_release(study, status=ReleaseStatus.FAILED, error="The worker building this release stopped.", **fields)


# --- Retry -----------------------------------------------------------------------------------------


def test_the_page_queues_a_failed_build_again(client, data_manager, django_capture_on_commit_callbacks):
    release = _failed(make_study("s1"), version="2.0.0")
    client.force_login(data_manager)

    with django_capture_on_commit_callbacks(execute=True):
        response = client.post(reverse("release_retry", args=[release.public_id]), **HTMX)

    assert response.status_code == 200
    html = response.content.decode()
    assert html.lstrip().startswith('<div id="releases"')
    assert "Release 2.0.0 is queued again." in html
    assert 'hx-trigger="every 2s"' in html
    release.refresh_from_db()
    assert (release.status, release.error, release.finished_at, release.version) == (
        ReleaseStatus.QUEUED,
        "",
        None,
        "2.0.0",
    )
    [queued] = default_task_backend.results
    assert queued.args == [str(release.public_id)]
    [event] = ReleaseEvent.objects.filter(action=ReleaseAction.RETRIED)
    assert (event.release, event.actor) == (release, data_manager)
    assert event.detail == "The worker building this release stopped."  # why it had failed


def test_the_api_queues_a_failed_build_again(client, data_manager, django_capture_on_commit_callbacks):
    release = _failed(make_study("s1"))
    client.force_login(data_manager)

    with django_capture_on_commit_callbacks(execute=True):
        response = client.post(f"/api/releases/{release.public_id}/retry/")

    assert response.status_code == 202
    assert response.json()["status"] == "queued"
    assert len(default_task_backend.results) == 1
    assert ReleaseEvent.objects.get(action=ReleaseAction.RETRIED).actor == data_manager


def test_a_retry_is_refused_once_another_build_took_the_version(client, data_manager):
    study = make_study("s1")
    release = _failed(study, version="2.0.0")
    make_release(study, version="2.0.0", status=ReleaseStatus.DONE)
    client.force_login(data_manager)

    api = client.post(f"/api/releases/{release.public_id}/retry/")
    page = client.post(reverse("release_retry", args=[release.public_id]), **HTMX)

    assert api.status_code == 409
    assert "Use the next free version, 2.0.1." in api.json()["detail"]
    assert page.status_code == 422
    assert "Use the next free version, 2.0.1." in page.content.decode()
    release.refresh_from_db()
    assert release.status == ReleaseStatus.FAILED
    assert not ReleaseEvent.objects.filter(action=ReleaseAction.RETRIED).exists()
    assert default_task_backend.results == []


@pytest.mark.parametrize("status", [ReleaseStatus.QUEUED, ReleaseStatus.RUNNING, ReleaseStatus.DONE])
def test_only_a_failed_build_can_be_retried(client, data_manager, status):
    release = make_release(make_study("s1"), status=status)
    client.force_login(data_manager)

    response = client.post(f"/api/releases/{release.public_id}/retry/")

    assert response.status_code == 409
    label = {ReleaseStatus.QUEUED: "queued", ReleaseStatus.RUNNING: "building", ReleaseStatus.DONE: "done"}[status]
    assert response.json()["detail"] == f"Release 1.0.0 is {label}: only a failed build can be built again."
    release.refresh_from_db()
    assert release.status == status


def test_a_retry_starts_the_build_afresh_and_records_its_task(data_manager, django_capture_on_commit_callbacks):
    from datetime import UTC, datetime

    from exports.services import retry_release

    then = datetime(2026, 1, 1, tzinfo=UTC)
    release = _failed(make_study("s1"), progress=60, finished_at=then, heartbeat_at=then, task_id="old-task")

    with django_capture_on_commit_callbacks() as callbacks:
        retried = retry_release(release, user=data_manager)

    fields = ("status", "progress", "error", "finished_at", "heartbeat_at", "task_id")
    assert tuple(getattr(retried, f) for f in fields) == (ReleaseStatus.QUEUED, 0, "", None, None, "")
    for callback in callbacks:
        callback()
    [queued] = default_task_backend.results
    release.refresh_from_db()
    assert release.task_id == str(queued.id)


# --- Delete ----------------------------------------------------------------------------------------


def test_the_page_deletes_a_zip_and_keeps_the_row(
    client, data_manager, releases_dir, django_capture_on_commit_callbacks
):
    release = _built(rated_study(), version="1.2.0")
    path = release.zip_file()
    client.force_login(data_manager)

    with django_capture_on_commit_callbacks(execute=True):
        response = client.post(reverse("release_delete", args=[release.public_id]), **HTMX)

    assert response.status_code == 200
    html = response.content.decode()
    assert "Release 1.2.0 is deleted; its version stays taken." in html
    assert "deleted by dm on" in html
    assert "Download" not in html
    assert not path.exists()
    assert list(releases_dir.iterdir()) == []
    release.refresh_from_db()
    assert (release.status, release.deleted_by, release.zip_path) == (ReleaseStatus.DONE, data_manager, "")
    assert release.deleted_at is not None
    assert release.sha256  # what was released stays on record
    [event] = ReleaseEvent.objects.filter(action=ReleaseAction.DELETED)
    # The event names the file that was deleted.
    assert (event.release, event.actor, event.detail) == (release, data_manager, path.name)
    assert client.get(reverse("release_download", args=[release.public_id])).status_code == 404


def test_the_api_deletes_a_zip_and_keeps_the_release(client, data_manager, django_capture_on_commit_callbacks):
    release = _built(rated_study())
    path = release.zip_file()
    client.force_login(data_manager)

    with django_capture_on_commit_callbacks(execute=True):
        response = client.delete(f"/api/releases/{release.public_id}/")

    assert response.status_code == 200
    body = response.json()
    assert (body["status"], body["deleted_by"], body["download_url"]) == ("done", "dm", None)
    assert body["deleted_at"]
    assert not path.exists()
    assert client.get(f"/api/releases/{release.public_id}/").json()["deleted_by"] == "dm"
    assert client.get(f"/api/releases/{release.public_id}/download/").status_code == 404
    assert ReleaseEvent.objects.get(action=ReleaseAction.DELETED).actor == data_manager


def test_a_failed_build_can_be_deleted_and_then_not_retried(client, data_manager):
    release = _failed(make_study("s1"))
    client.force_login(data_manager)

    assert client.delete(f"/api/releases/{release.public_id}/").status_code == 200
    response = client.post(f"/api/releases/{release.public_id}/retry/")

    assert response.status_code == 409
    assert response.json()["detail"] == (
        f"Release {release.version} is failed and deleted: only a failed build can be built again."
    )
    release.refresh_from_db()
    assert (release.status, release.deleted_by) == (ReleaseStatus.FAILED, data_manager)


@pytest.mark.parametrize("status", [ReleaseStatus.QUEUED, ReleaseStatus.RUNNING])
def test_a_build_in_progress_cannot_be_deleted(client, data_manager, status):
    release = make_release(make_study("s1"), status=status)
    client.force_login(data_manager)

    api = client.delete(f"/api/releases/{release.public_id}/")
    page = client.post(reverse("release_delete", args=[release.public_id]), **HTMX)

    assert api.status_code == 409
    label = "queued" if status == ReleaseStatus.QUEUED else "building"
    assert api.json()["detail"] == f"Release 1.0.0 is still {label}: delete it once it is done or has failed."
    assert page.status_code == 422
    release.refresh_from_db()
    assert release.deleted_at is None
    assert not ReleaseEvent.objects.filter(action=ReleaseAction.DELETED).exists()


def test_a_zip_is_deleted_only_once(client, data_manager):
    release = _built(rated_study())
    client.force_login(data_manager)
    client.delete(f"/api/releases/{release.public_id}/")

    response = client.delete(f"/api/releases/{release.public_id}/")

    assert response.status_code == 409
    assert response.json()["detail"] == f"Release {release.version} was already deleted."
    assert ReleaseEvent.objects.filter(action=ReleaseAction.DELETED).count() == 1


def test_building_new_releases_deletes_no_older_zip(releases_dir):
    study = rated_study()
    built = [_built(study, version=f"1.0.{i}") for i in range(3)]

    assert sorted(p.name for p in releases_dir.iterdir()) == sorted(r.zip_path for r in built)
    assert all(r.zip_file().is_file() for r in built)


def test_a_page_without_javascript_redirects_back_with_a_message(client, data_manager):
    release = _failed(make_study("s1"))
    client.force_login(data_manager)

    response = client.post(reverse("release_retry", args=[release.public_id]), follow=True)

    assert response.redirect_chain[-1][0] == reverse("release_list", args=["s1"])
    assert "is queued again" in response.content.decode()


# --- Who may ------------------------------------------------------------------------------------------


@pytest.mark.parametrize("role", [Role.COORDINATOR, Role.READER, Role.ADJUDICATOR])
def test_other_roles_can_neither_retry_nor_delete(client, role, releases_dir):
    study = rated_study()
    failed = _failed(study, version="9.0.0")
    done = _built(study)
    client.force_login(make_user(role))

    assert client.post(reverse("release_retry", args=[failed.public_id])).status_code == 403
    assert client.post(reverse("release_delete", args=[done.public_id])).status_code == 403
    assert client.post(f"/api/releases/{failed.public_id}/retry/").status_code == 403
    assert client.delete(f"/api/releases/{done.public_id}/").status_code == 403
    failed.refresh_from_db()
    done.refresh_from_db()
    assert (failed.status, done.deleted_at) == (ReleaseStatus.FAILED, None)
    assert done.zip_file().is_file()
    assert not ReleaseEvent.objects.exclude(action=ReleaseAction.REQUESTED).exists()


def test_anonymous_visitors_are_sent_to_log_in(client):
    release = _failed(make_study("s1"))

    response = client.post(reverse("release_delete", args=[release.public_id]))

    assert response.status_code == 302
    assert response["Location"].startswith(reverse("login"))
    assert client.delete(f"/api/releases/{release.public_id}/").status_code == 401
    release.refresh_from_db()
    assert release.deleted_at is None


def test_the_actions_answer_get_with_405(client, data_manager):
    release = _failed(make_study("s1"))
    client.force_login(data_manager)

    assert client.get(reverse("release_retry", args=[release.public_id])).status_code == 405
    assert client.get(reverse("release_delete", args=[release.public_id])).status_code == 405


def test_an_unknown_release_is_404(client, data_manager):
    client.force_login(data_manager)

    assert client.post(reverse("release_retry", args=["6f1c2a4e-0d5b-4c8e-9a7f-3b2d1e0c9a8b"])).status_code == 404


def test_the_list_with_deleted_builds_keeps_its_query_count(client, data_manager):
    client.force_login(data_manager)
    counts = []
    for n in (2, 8):
        study = make_study()
        for i in range(n):
            release = make_release(study, status=ReleaseStatus.DONE, version=f"1.{i}")
            if i % 2:
                Release.objects.filter(pk=release.pk).update(deleted_by=make_user(), deleted_at=release.created_at)
        client.get(reverse("release_list", args=[study.slug]))
        with CaptureQueriesContext(connection) as page:
            client.get(reverse("release_list", args=[study.slug]))
        with CaptureQueriesContext(connection) as api:
            client.get(f"/api/studies/{study.slug}/releases/")
        counts.append((len(page), len(api)))
    assert counts[0] == counts[1]


def test_the_release_audit_trail_is_append_only(client, data_manager):
    release = _failed(make_study("s1"))
    client.force_login(data_manager)
    client.delete(f"/api/releases/{release.public_id}/")
    event = ReleaseEvent.objects.get(action=ReleaseAction.DELETED)

    with pytest.raises(TypeError, match="append-only"):
        event.save()
    with pytest.raises(TypeError, match="append-only"):
        event.delete()
    with pytest.raises(TypeError, match="append-only"):
        ReleaseEvent.objects.update(detail="")
    with pytest.raises(TypeError, match="append-only"):
        ReleaseEvent.objects.all().delete()


def test_deleting_a_failed_build_on_the_page_says_its_version_is_free(client, data_manager):
    release = _failed(make_study("s1"), version="4.0.0")
    client.force_login(data_manager)

    html = client.post(reverse("release_delete", args=[release.public_id]), **HTMX).content.decode()

    assert "The failed build of 4.0.0 is deleted; the version is free." in html
    assert "deleted by dm on" in html
    assert reverse("release_retry", args=[release.public_id]) not in html
