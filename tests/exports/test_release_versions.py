"""A version number names one content for ever: a second build of a taken version is refused everywhere."""

import io
import threading

import pytest
from django.core.management import CommandError, call_command
from django.db import IntegrityError, connections, transaction
from django.tasks import default_task_backend
from django.urls import reverse

from annotation.models import Role
from exports.building import ReleaseRefused
from exports.models import Release, ReleaseStatus
from exports.services import delete_release, next_free_version, request_release
from exports.tasks import build_release_task
from tests.exports.release_helpers import make_release, rated_study
from tests.factories import make_study, make_user

TAKEN = "Version 3.0.0 of s1 is already built or building"


@pytest.fixture(autouse=True)
def releases_dir(settings, tmp_path):
    settings.RELEASES_DIR = tmp_path / "releases"
    default_task_backend.clear()
    return settings.RELEASES_DIR


def _request(study, version: str = "3.0.0", user=None) -> Release:
    return request_release(
        study,
        user=user or make_user(Role.DATA_MANAGER),
        version=version,
        datasets=None,
        include_unfinished=False,
        license_text="CC0\n",
    )


@pytest.mark.django_db
@pytest.mark.parametrize("status", [ReleaseStatus.QUEUED, ReleaseStatus.RUNNING, ReleaseStatus.DONE])
def test_a_version_held_by_a_build_is_refused_naming_the_next_free_one(status):
    study = make_study("s1")
    make_release(study, version="3.0.0", status=status)

    with pytest.raises(ReleaseRefused, match=f"{TAKEN}.*Use the next free version, 3.0.1.") as refused:
        _request(study)

    assert refused.value.field == "version"  # the form shows it under the version
    assert Release.objects.count() == 1


@pytest.mark.django_db
def test_the_next_free_version_named_skips_every_version_this_study_holds():
    study = make_study("s1")
    make_release(study, version="3.0.0", status=ReleaseStatus.DONE)
    make_release(study, version="3.0.1", status=ReleaseStatus.QUEUED)
    make_release(make_study("s2"), version="3.0.2", status=ReleaseStatus.DONE)  # free in study s1

    with pytest.raises(ReleaseRefused) as refused:
        _request(study)

    assert str(refused.value).endswith("Use the next free version, 3.0.2.")


@pytest.mark.django_db
def test_a_deleted_zip_keeps_its_version_taken(tmp_path):
    study = rated_study("s1")
    built = make_release(study, version="3.0.0")
    build_release_task.call(str(built.public_id))
    built.refresh_from_db()
    delete_release(built, user=make_user(Role.DATA_MANAGER))

    with pytest.raises(ReleaseRefused, match=TAKEN):
        _request(study)


@pytest.mark.django_db
def test_a_failed_build_gives_its_version_back():
    study = make_study("s1")
    make_release(study, version="3.0.0", status=ReleaseStatus.FAILED, error="Nope.")

    again = _request(study)

    assert (again.version, again.status) == ("3.0.0", ReleaseStatus.QUEUED)


@pytest.mark.django_db
def test_the_same_version_of_another_study_is_free():
    make_release(make_study("s1"), version="3.0.0")

    assert _request(make_study("s2")).version == "3.0.0"


@pytest.mark.django_db
def test_the_next_free_version_skips_every_taken_one():
    study = make_study("s1")
    for version in ("3.0.0", "3.0.1", "3.0.3"):
        make_release(study, version=version, status=ReleaseStatus.DONE)
    make_release(study, version="3.0.2", status=ReleaseStatus.FAILED)

    assert next_free_version(study, "3.0.0") == "3.0.2"
    assert next_free_version(study, "3.0.3") == "3.0.4"
    assert next_free_version(study, "7") == "8"


@pytest.mark.django_db
def test_the_database_refuses_a_second_build_of_a_version():
    study = make_study("s1")
    make_release(study, version="3.0.0", status=ReleaseStatus.DONE)

    with pytest.raises(IntegrityError), transaction.atomic():
        make_release(study, version="3.0.0")
    make_release(study, version="3.0.0", status=ReleaseStatus.FAILED)  # failed builds don't count
    with pytest.raises(IntegrityError), transaction.atomic():
        Release.objects.filter(status=ReleaseStatus.FAILED).update(status=ReleaseStatus.QUEUED)


@pytest.mark.postgres
@pytest.mark.django_db(transaction=True)
def test_two_requests_racing_for_one_version_give_one_build():
    study = make_study("s1")
    users = [make_user(Role.DATA_MANAGER) for _ in range(4)]
    barrier = threading.Barrier(len(users))
    outcomes = []

    def request(user):
        try:
            barrier.wait()
            outcomes.append(_request(study, user=user))
        except ReleaseRefused as refused:
            outcomes.append(refused)
        finally:
            connections.close_all()

    threads = [threading.Thread(target=request, args=(user,)) for user in users]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()

    assert sum(isinstance(outcome, Release) for outcome in outcomes) == 1
    assert all("Use the next free version, 3.0.1." in str(o) for o in outcomes if not isinstance(o, Release))
    assert Release.objects.filter(study=study, version="3.0.0").count() == 1


@pytest.mark.django_db
def test_the_page_refuses_a_taken_version(client):
    study = make_study("s1", license_text="CC0\n")
    make_release(study, version="3.0.0", status=ReleaseStatus.DONE)
    client.force_login(make_user(Role.DATA_MANAGER))

    response = client.post(
        reverse("release_list", args=["s1"]),
        {"version": "3.0.0", "license_text": "CC0\n"},
        HTTP_HX_REQUEST="true",
    )

    assert response.status_code == 422
    assert "Use the next free version, 3.0.1." in response.content.decode()
    assert Release.objects.count() == 1


@pytest.mark.django_db
def test_the_api_refuses_a_taken_version(client):
    study = make_study("s1")
    make_release(study, version="3.0.0", status=ReleaseStatus.DONE)
    client.force_login(make_user(Role.DATA_MANAGER))

    response = client.post(
        "/api/studies/s1/releases/", {"version": "3.0.0", "license_text": "x"}, content_type="application/json"
    )

    assert response.status_code == 400
    assert "Use the next free version, 3.0.1." in response.json()["detail"]
    assert Release.objects.count() == 1
    assert default_task_backend.results == []


@pytest.mark.django_db
def test_the_command_refuses_a_taken_version_and_writes_nothing(tmp_path):
    study = make_study("s1", license_text="CC0\n")
    make_release(study, version="3.0.0", status=ReleaseStatus.DONE)

    with pytest.raises(CommandError, match=f"{TAKEN}.*3.0.1"):
        call_command("export_release", "--study=s1", f"--out={tmp_path / 'out'}", "--version=3.0.0", "--no-progress")

    assert not (tmp_path / "out").exists()
    assert Release.objects.count() == 1


@pytest.mark.django_db
def test_a_command_build_takes_its_version(client, tmp_path, releases_dir):
    study = rated_study("s1")
    out = io.StringIO()

    call_command("export_release", "--study=s1", f"--out={tmp_path / 'out'}", "--version=3.0.0", stdout=out)

    release = Release.objects.get()
    assert (release.version, release.status, release.requested_by) == ("3.0.0", ReleaseStatus.DONE, None)
    assert release.row_counts["task1/task1_full.csv"] == 9
    assert (tmp_path / "out" / "README.md").is_file()
    assert not release.can_download  # the command writes a folder, not a zip
    assert not releases_dir.exists() or list(releases_dir.iterdir()) == []
    with pytest.raises(ReleaseRefused, match=TAKEN):
        _request(study)
    client.force_login(make_user(Role.DATA_MANAGER))
    [listed] = client.get("/api/studies/s1/releases/").json()["results"]
    assert (listed["requested_by"], listed["status"], listed["download_url"]) == (None, "done", None)
    assert "with the export_release command" in client.get(reverse("release_list", args=["s1"])).content.decode()
