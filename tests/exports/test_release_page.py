"""The data manager's releases page: queue a build, watch it, download the zip."""

import logging
import re
import zipfile
from datetime import timedelta

import pytest
from django.db import connection
from django.tasks import default_task_backend
from django.test.utils import CaptureQueriesContext
from django.urls import reverse
from django.utils import timezone
from django_tasks_db.models import DBTaskResult

from annotation.models import Example, Role
from exports.building import ReleaseRefused
from exports.models import Release, ReleaseStatus
from exports.tasks import build_release_task
from tests.exports.release_helpers import RELEASE_FILES, ROW_COUNTS, make_release, rated_study, sha256_of
from tests.factories import make_study, make_user

pytestmark = pytest.mark.django_db

HTMX = {"HTTP_HX_REQUEST": "true"}
POLL = {"HTTP_HX_REQUEST": "true", "HTTP_HX_TARGET": "releases"}


@pytest.fixture(autouse=True)
def releases_dir(settings, tmp_path):
    settings.RELEASES_DIR = tmp_path / "releases"
    default_task_backend.clear()
    return settings.RELEASES_DIR


@pytest.fixture
def data_manager():
    return make_user(Role.DATA_MANAGER, username="dm")


def _url(study) -> str:
    return reverse("release_list", args=[study.slug])


# The service's refusals, word for word (as HTML).
REFUSALS = {
    "version": "Version &#x27;v1&#x27; is not digits and dots (e.g. 1.0.0).",
    "license_text": "A release needs its licence text: supply a licence file, or set the study&#x27;s licence.",
}


def _options(**overrides) -> dict:
    return {"version": "1.0.0", "license_text": "CC BY 4.0\n", **overrides}


# --- Who may see it -------------------------------------------------------------------------------


@pytest.mark.parametrize("kind", ["data manager", "superuser"])
def test_it_lets_data_managers_and_superusers_in(client, kind):
    study = make_study("s1")
    user = make_user(Role.DATA_MANAGER) if kind == "data manager" else make_user(is_superuser=True)
    client.force_login(user)

    assert client.get(_url(study)).status_code == 200
    assert client.get(reverse("release_index")).status_code == 200


@pytest.mark.parametrize("role", [Role.COORDINATOR, Role.READER, Role.ADJUDICATOR])
def test_it_refuses_other_roles(client, role):
    study = make_study("s1")
    client.force_login(make_user(role))

    assert client.get(_url(study)).status_code == 403
    assert client.post(_url(study), _options()).status_code == 403
    assert client.get(reverse("release_index")).status_code == 403
    assert not Release.objects.exists()


def test_it_sends_anonymous_visitors_to_the_login_page(client):
    study = make_study("s1")

    response = client.get(_url(study))

    assert response.status_code == 302
    assert response["Location"].startswith(reverse("login"))


def test_an_expired_session_polling_the_list_is_sent_to_log_in(client):
    study = make_study("s1")

    response = client.get(_url(study), **POLL)

    assert response.status_code == 200
    assert response["HX-Redirect"].startswith(reverse("login"))


def _nav(response) -> str:
    return re.search(r'<nav aria-label="Main">.*?</nav>', response.content.decode(), re.DOTALL).group(0)


def test_the_nav_links_to_releases_for_data_managers_only(client, data_manager):
    client.force_login(data_manager)
    assert f'href="{reverse("release_index")}"' in _nav(client.get(reverse("home"), follow=True))

    client.force_login(make_user(Role.COORDINATOR))
    assert f'href="{reverse("release_index")}"' not in _nav(client.get(reverse("study_list")))


def test_a_data_managers_home_page_is_the_studies_and_their_releases(client, data_manager):
    client.force_login(data_manager)

    response = client.get(reverse("home"))

    assert response.status_code == 302
    assert response["Location"] == reverse("release_index")


def test_the_index_lists_every_study_with_its_state_and_last_release(client, data_manager):
    first, second = make_study("alpha"), make_study("beta")
    make_release(first, version="1.0.0", status=ReleaseStatus.DONE)
    make_release(first, version="1.1.0", status=ReleaseStatus.FAILED)
    client.force_login(data_manager)

    response = client.get(reverse("release_index"))

    last = {study.slug: (study.last_version, study.last_status_label) for study in response.context["studies"]}
    assert last == {"alpha": ("1.1.0", "Failed"), "beta": (None, "")}
    html = response.content.decode()
    assert _url(second) in html
    assert "1.1.0 (failed)" in html
    assert html.count("not sampled yet") == 2


def test_the_index_says_how_far_the_reading_is(client, data_manager):
    from annotation.models import RatingChoice, Task
    from tests.factories import make_reading_study, rate_open_reads

    rated_study()  # every example has its consensus
    reading, _, _ = make_reading_study(pairs=1, readers=4)
    rate_open_reads(
        Example.objects.get(study=reading, task=Task.EQUIVALENCE), RatingChoice.EQUIVALENT, RatingChoice.EQUIVALENT
    )
    client.force_login(data_manager)

    html = client.get(reverse("release_index")).content.decode()

    assert "finished: all 6 examples have a consensus" in html
    assert "in progress: 1 of 3 examples have a consensus" in html


def test_the_index_shows_the_last_release_that_is_not_deleted(client, data_manager):
    from datetime import UTC, datetime

    study = make_study("alpha")
    kept = make_release(study, version="1.0.0", status=ReleaseStatus.DONE)
    make_release(study, version="1.0.1", status=ReleaseStatus.DONE, deleted_at=datetime(2026, 3, 1, tzinfo=UTC))
    client.force_login(data_manager)

    response = client.get(reverse("release_index"))

    [listed] = response.context["studies"]
    assert (listed.last_version, listed.last_status_label, listed.last_release_at) == (
        "1.0.0",
        "Done",
        kept.created_at,
    )


def test_a_build_that_waits_without_a_worker_is_explained_in_the_data_managers_words(
    client, data_manager, django_capture_on_commit_callbacks, settings
):
    settings.TASKS = {"default": {"BACKEND": "django_tasks_db.DatabaseBackend", "QUEUES": ["default"]}}
    study = rated_study()
    client.force_login(data_manager)
    assert "worker" not in client.get(_url(study)).content.decode().split("<main", 1)[1].lower()
    with django_capture_on_commit_callbacks(execute=True):
        client.post(_url(study), _options())
    assert DBTaskResult.objects.count() == 1
    assert "not running" not in client.get(_url(study)).content.decode()

    DBTaskResult.objects.update(run_after=timezone.now() - timedelta(minutes=2))

    for url in (_url(study), reverse("release_index")):
        html = client.get(url).content.decode()
        assert "the background worker that builds releases is not running. Ask your administrator" in html
        assert "manage.py" not in html


# --- Queuing a build ------------------------------------------------------------------------------


def test_the_form_is_prefilled_with_the_studys_licence(client, data_manager):
    study = make_study("s1", license_text="Our licence & terms\n")
    client.force_login(data_manager)

    response = client.get(_url(study))

    assert response.context["form"]["license_text"].value() == "Our licence & terms\n"
    assert "Our licence &amp; terms" in response.content.decode()
    # A box a licence fits in: tall, full width (app.css), fixed-width font.
    assert re.search(
        r'<textarea name="license_text" cols="80" rows="18" class="licence-text"', response.content.decode()
    )


def test_the_form_offers_the_studys_sampled_datasets(client, data_manager):
    study = rated_study()
    client.force_login(data_manager)

    response = client.get(_url(study))

    assert [key for key, _ in response.context["form"].fields["datasets"].choices] == ["mimic-cxr"]


def test_posting_the_form_queues_a_build_without_running_it(
    client, data_manager, releases_dir, django_capture_on_commit_callbacks
):
    study = rated_study()
    client.force_login(data_manager)

    with django_capture_on_commit_callbacks(execute=True):
        response = client.post(_url(study), _options(datasets=["mimic-cxr"], include_unfinished="on"))

    assert response.status_code == 302
    release = Release.objects.get()
    assert release.status == ReleaseStatus.QUEUED
    assert (release.version, release.datasets, release.include_unfinished) == ("1.0.0", ["mimic-cxr"], True)
    assert release.requested_by == data_manager
    assert release.license_text == "CC BY 4.0\n"
    # Queued on the Tasks framework (the test settings' Dummy backend only records it) and not built.
    [queued] = default_task_backend.results
    assert queued.task.func is build_release_task.func
    assert queued.args == [str(release.public_id)]
    assert not releases_dir.exists() or not any(releases_dir.iterdir())
    page = client.get(response["Location"]).content.decode()
    assert "Release 1.0.0 is queued" in page
    assert "waiting for the worker" in page


def test_posting_with_htmx_answers_the_form_and_the_list(client, data_manager, django_capture_on_commit_callbacks):
    study = rated_study()
    client.force_login(data_manager)

    with django_capture_on_commit_callbacks(execute=True):
        response = client.post(_url(study), _options(), **HTMX)

    assert response.status_code == 200
    html = response.content.decode()
    assert 'id="release-form-panel"' in html
    assert re.search(r'<div id="releases" hx-swap-oob="true"[^>]*hx-trigger="every 2s"', html)
    assert "<progress" in html
    # A fresh form for the next build.
    assert response.context["form"].is_bound is False
    assert len(default_task_backend.results) == 1


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"version": "v1"}, "Version &#x27;v1&#x27; is not digits and dots"),
        ({"license_text": "   "}, "A release needs its licence text"),
        ({"license_text": ""}, "A release needs its licence text"),
        ({"datasets": ["iu-xray"]}, "Select a valid choice"),
    ],
)
def test_it_refuses_bad_options_and_queues_nothing(
    client, data_manager, options, message, django_capture_on_commit_callbacks
):
    study = rated_study()
    client.force_login(data_manager)

    with django_capture_on_commit_callbacks(execute=True):
        response = client.post(_url(study), _options(**options), **HTMX)

    assert response.status_code == 422
    assert message in response.content.decode()
    assert not Release.objects.exists()
    assert default_task_backend.results == []


@pytest.mark.parametrize(
    ("options", "field"),
    [({"version": "v1"}, "version"), ({"license_text": "   "}, "license_text")],
)
def test_a_refused_option_is_marked_on_its_own_field(client, data_manager, options, field):
    # The service refuses these (the form lets them through): its refusal names the field, so the
    # field is marked invalid and described by the error, for a screen reader as for the eye.
    study = rated_study()
    client.force_login(data_manager)

    response = client.post(_url(study), _options(**options), **HTMX)

    assert response.status_code == 422
    html = response.content.decode()
    control = re.search(rf'<(?:input|textarea)[^>]* name="{field}"[^>]*>', html).group(0)
    assert 'aria-invalid="true"' in control
    assert re.search(rf'aria-describedby="[^"]*\bid_{field}_error\b', control), control
    error = re.search(rf'<ul class="errorlist" id="id_{field}_error"><li>(.*?)</li></ul>', html).group(1)
    assert error == REFUSALS[field]
    assert not Release.objects.exists()


# --- The build, run by the task -----------------------------------------------------------------


def test_running_the_task_builds_the_zip(client, data_manager, releases_dir):
    study = rated_study()
    release = make_release(study, user=data_manager)

    build_release_task.call(str(release.public_id))

    release.refresh_from_db()
    assert release.status == ReleaseStatus.DONE
    assert release.progress == 100
    assert release.finished_at is not None
    assert release.error == ""
    assert release.row_counts == ROW_COUNTS
    path = release.zip_file()
    assert path.parent == releases_dir
    assert release.sha256 == sha256_of(path)
    with zipfile.ZipFile(path) as archive:
        assert {name.removeprefix("s1-1.0.0/") for name in archive.namelist()} == RELEASE_FILES
        assert all(name.startswith("s1-1.0.0/") for name in archive.namelist())
    # Only the zip is left behind: the build folder is gone.
    assert [p.name for p in releases_dir.iterdir()] == [path.name]

    client.force_login(data_manager)
    html = client.get(_url(study)).content.decode()
    assert release.sha256 in html
    assert "task1/task1_full.csv</dt><dd>9</dd>" in html
    assert reverse("release_download", args=[release.public_id]) in html


def test_a_refused_build_says_why(client, data_manager, monkeypatch):
    study = rated_study()
    release = make_release(study)

    def refuse(*args, **kwargs):
        raise ReleaseRefused("Unknown dataset(s): chexpert-plus. Use one of: mimic-cxr.")

    monkeypatch.setattr("exports.tasks.build_release", refuse)
    build_release_task.call(str(release.public_id))

    release.refresh_from_db()
    assert release.status == ReleaseStatus.FAILED
    assert release.error == "Unknown dataset(s): chexpert-plus. Use one of: mimic-cxr."
    client.force_login(data_manager)
    html = client.get(_url(study)).content.decode()
    assert "Unknown dataset(s): chexpert-plus. Use one of: mimic-cxr." in html
    assert "Download" not in html


def test_an_invalid_option_stored_on_the_release_fails_the_build_with_its_reason(client, data_manager):
    study = rated_study()
    release = make_release(study, version="1.0-beta")

    build_release_task.call(str(release.public_id))

    release.refresh_from_db()
    assert release.status == ReleaseStatus.FAILED
    client.force_login(data_manager)
    assert "Version &#x27;1.0-beta&#x27; is not digits and dots" in client.get(_url(study)).content.decode()


def test_an_unexpected_error_is_logged_and_shown_without_a_traceback(client, data_manager, monkeypatch, caplog):
    study = rated_study()
    release = make_release(study)

    def crash(*args, **kwargs):
        raise RuntimeError("disk on fire at /secret/path")

    monkeypatch.setattr("exports.tasks.build_release", crash)
    with caplog.at_level(logging.ERROR, logger="readingroom.exports"):
        build_release_task.call(str(release.public_id))

    release.refresh_from_db()
    assert release.status == ReleaseStatus.FAILED
    assert "failed unexpectedly" in release.error
    assert "disk on fire" in caplog.text
    client.force_login(data_manager)
    html = client.get(_url(study)).content.decode()
    assert "failed unexpectedly" in html
    assert "disk on fire" not in html
    assert "Traceback" not in html


# --- Watching it build ------------------------------------------------------------------------------


def test_the_list_polls_while_a_build_is_queued_or_running_and_stops_after(client, data_manager):
    study = rated_study()
    release = make_release(study, status=ReleaseStatus.RUNNING, progress=40)
    client.force_login(data_manager)

    polling = client.get(_url(study), **POLL)

    assert polling.status_code == 200
    html = polling.content.decode()
    assert html.lstrip().startswith('<div id="releases"')
    assert 'hx-trigger="every 2s"' in html
    assert '<progress max="100" value="40"' in html
    assert "<form" not in html  # only the list fragment

    Release.objects.filter(pk=release.pk).update(status=ReleaseStatus.QUEUED, progress=0)
    build_release_task.call(str(release.public_id))
    done = client.get(_url(study), **POLL).content.decode()

    assert "hx-trigger" not in done
    assert "<progress" not in done
    assert "Done" in done


def test_the_page_does_not_poll_when_nothing_is_building(client, data_manager):
    study = make_study("s1")
    make_release(study, status=ReleaseStatus.DONE)
    make_release(study, status=ReleaseStatus.FAILED, error="Nope.")
    client.force_login(data_manager)

    html = client.get(_url(study)).content.decode()

    assert "hx-trigger" not in html
    assert "Nope." in html


def test_the_list_shows_each_builds_options(client, data_manager):
    study = make_study("s1")
    make_release(study, version="2.1", datasets=["iu-xray", "mimic-cxr"], include_unfinished=True)
    make_release(study, version="2.0")
    client.force_login(data_manager)

    html = client.get(_url(study)).content.decode()

    assert "datasets: iu-xray, mimic-cxr" in html
    assert "unfinished examples included" in html
    assert "datasets: all" in html
    assert "examples with a consensus only" in html


def test_the_list_query_count_does_not_grow_with_the_builds(client, data_manager):
    client.force_login(data_manager)
    counts = []
    for n in (2, 10):
        study = make_study()
        for i in range(n):
            make_release(study, status=[ReleaseStatus.DONE, ReleaseStatus.RUNNING][i % 2], row_counts=ROW_COUNTS)
        client.get(_url(study))  # warm the session and permission caches
        with CaptureQueriesContext(connection) as page:
            assert client.get(_url(study)).status_code == 200
        with CaptureQueriesContext(connection) as poll:
            assert client.get(_url(study), **POLL).status_code == 200
        counts.append((len(page), len(poll)))
    assert counts[0] == counts[1]
    assert counts[1][0] <= 8


def test_the_index_query_count_does_not_grow_with_the_studies(client, data_manager):
    client.force_login(data_manager)
    counts = []
    for n in (2, 10):
        for _ in range(n):
            make_release(make_study())
        client.get(reverse("release_index"))
        with CaptureQueriesContext(connection) as queries:
            assert client.get(reverse("release_index")).status_code == 200
        counts.append(len(queries))
    assert counts[0] == counts[1]


# --- Download ------------------------------------------------------------------------------------------


def test_download_streams_the_zip_as_slug_version(client, data_manager):
    study = rated_study()
    release = make_release(study, version="1.2.0")
    build_release_task.call(str(release.public_id))
    release.refresh_from_db()
    client.force_login(data_manager)

    response = client.get(reverse("release_download", args=[release.public_id]))

    assert response.status_code == 200
    assert response.streaming
    assert response["Content-Type"] == "application/zip"
    assert response["Content-Disposition"] == 'attachment; filename="s1-1.2.0.zip"'
    assert b"".join(response.streaming_content) == release.zip_file().read_bytes()


@pytest.mark.parametrize("status", [ReleaseStatus.QUEUED, ReleaseStatus.RUNNING, ReleaseStatus.FAILED])
def test_download_is_404_unless_the_build_is_done(client, data_manager, status):
    release = make_release(make_study("s1"), status=status)
    client.force_login(data_manager)

    assert client.get(reverse("release_download", args=[release.public_id])).status_code == 404


def test_download_is_404_when_the_zip_is_gone_from_the_disk(client, data_manager):
    release = make_release(make_study("s1"), status=ReleaseStatus.DONE, zip_path="missing.zip")
    client.force_login(data_manager)

    assert client.get(reverse("release_download", args=[release.public_id])).status_code == 404


@pytest.mark.parametrize("role", [Role.COORDINATOR, Role.READER])
def test_download_is_refused_to_other_roles(client, role):
    study = rated_study()
    release = make_release(study)
    build_release_task.call(str(release.public_id))
    client.force_login(make_user(role))

    assert client.get(reverse("release_download", args=[release.public_id])).status_code == 403
