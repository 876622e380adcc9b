"""The Results page: who may see it, how it is computed off the request, what it shows."""

import io
import json
import re
import shutil
import zipfile
from collections.abc import Iterator
from pathlib import Path

import pytest
from django.db import connection
from django.tasks import default_task_backend
from django.test import override_settings
from django.test.utils import CaptureQueriesContext
from django.urls import reverse
from django.utils.html import escape

from analysis.live import reader_key
from analysis.queueing import request_results
from analysis.services import Scope, results_state
from analysis.tasks import compute_results_task
from annotation.models import Annotation, Example, RatingChoice, Role, Study
from consensus.services import void_annotation
from tests.exports.release_helpers import rated_study
from tests.factories import make_pair, make_study, make_user, rate_open_reads
from tests.module_data import rolled_back

pytestmark = pytest.mark.django_db

HTMX_POLL = {"HTTP_HX_REQUEST": "true", "HTTP_HX_TARGET": "results"}


@pytest.fixture(autouse=True)
def results_dir(settings, tmp_path):
    settings.RESULTS_DIR = tmp_path / "results"
    default_task_backend.clear()
    return settings.RESULTS_DIR


@pytest.fixture
def coordinator():
    return make_user(Role.COORDINATOR, username="coord")


@pytest.fixture
def data_manager():
    return make_user(Role.DATA_MANAGER, username="dm")


def _url(study, **query) -> str:
    url = reverse("study_results", args=[study.slug])
    return url + ("?" + "&".join(f"{k}={v}" for k, v in query.items()) if query else "")


def run_queued() -> None:
    """Be the worker: run every queued computation (the test backend only records them)."""
    for queued in default_task_backend.results:
        compute_results_task.call(*queued.args)
    default_task_backend.clear()


def computed(client, study, callbacks, **query):
    """Open the page (which queues the computation), run it, and open the page again."""
    with callbacks(execute=True):
        client.get(_url(study, **query))
    run_queued()
    return client.get(_url(study, **query))


@pytest.fixture(scope="module")
def _computed_once(django_db_setup, django_db_blocker, tmp_path_factory) -> Iterator[tuple[int, Path]]:
    """A rated study whose results the worker computed, made once for the tests that only read them
    (in a results folder of their own) and rolled back after the module: (its pk, the folder)."""
    folder = tmp_path_factory.mktemp("computed") / "results"
    with override_settings(RESULTS_DIR=folder), rolled_back(django_db_blocker):
        study = rated_study("computed")
        state = request_results(study, Scope())  # queued once the transaction commits: run here instead
        assert compute_results_task.call(str(study.public_id), "", "", state.version)["status"] == "done"
        yield study.pk, folder


@pytest.fixture
def computed_study(_computed_once, db, settings, results_dir) -> Study:
    """That study, its results up to date (each test runs in a savepoint of its own)."""
    pk, settings.RESULTS_DIR = _computed_once
    study = Study.objects.get(pk=pk)
    assert results_state(study, Scope()).is_current
    return study


# --- Who may see it --------------------------------------------------------------------------------


@pytest.mark.parametrize("kind", ["coordinator", "data manager", "superuser"])
def test_it_lets_coordinators_data_managers_and_superusers_in(client, kind, computed_study):
    study = computed_study
    roles = {"coordinator": [Role.COORDINATOR], "data manager": [Role.DATA_MANAGER], "superuser": []}
    client.force_login(make_user(*roles[kind], is_superuser=kind == "superuser"))

    response = client.get(_url(study))

    assert response.status_code == 200
    assert 'id="table-task1_ratings"' in response.content.decode()
    for name in ("task1_ratings", "task1_forest"):
        assert client.get(reverse("results_figure", args=[study.slug, name, "svg"])).status_code == 200
    assert client.get(reverse("results_download", args=[study.slug])).status_code == 200


@pytest.mark.parametrize("role", [Role.READER, Role.ADJUDICATOR, None])
def test_it_refuses_everyone_else(client, role, computed_study):
    study = computed_study
    client.force_login(make_user(role) if role else make_user())

    assert client.get(_url(study)).status_code == 403
    assert client.post(_url(study)).status_code == 403
    assert client.get(reverse("results_figure", args=[study.slug, "task1_ratings", "svg"])).status_code == 403
    assert client.get(reverse("results_download", args=[study.slug])).status_code == 403


def test_it_sends_anonymous_visitors_to_the_login_page(client):
    study = make_study("s1")

    for url in (_url(study), reverse("results_download", args=[study.slug])):
        response = client.get(url)
        assert response.status_code == 302
        assert response["Location"].startswith(reverse("login"))


def test_an_expired_session_polling_the_results_is_sent_to_log_in(client):
    study = make_study("s1")

    response = client.get(_url(study), **HTMX_POLL)

    assert response["HX-Redirect"].startswith(reverse("login"))


def test_the_study_pages_and_the_releases_page_link_to_the_results(client, coordinator, data_manager):
    study = make_study("s1")
    client.force_login(coordinator)
    assert f'href="{_url(study)}"' in client.get(reverse("study_progress", args=[study.slug])).content.decode()
    client.force_login(data_manager)
    assert f'href="{_url(study)}"' in client.get(reverse("release_list", args=[study.slug])).content.decode()


# --- Computed by the worker, never in the request ---------------------------------------------------


def test_the_first_visit_queues_one_computation_and_says_so(client, coordinator, django_capture_on_commit_callbacks):
    study = rated_study()
    client.force_login(coordinator)

    with django_capture_on_commit_callbacks(execute=True):
        first = client.get(_url(study))
        again = client.get(_url(study), **HTMX_POLL)

    [queued] = default_task_backend.results
    assert queued.task.name == "compute_results_task"
    assert queued.args[:3] == [str(study.public_id), "", ""]
    for response in (first, again):
        assert "Computing the results" in response.content.decode()
        assert "waiting for the worker" in response.content.decode()
        assert 'hx-trigger="every 2s"' in response.content.decode()
    assert results_state(study, Scope()).prefix is None


def test_once_computed_it_shows_every_table_with_the_documents_numbers(
    client, coordinator, django_capture_on_commit_callbacks
):
    study = rated_study()
    # The study's own taxonomy names its variations (a coordinator may have relabelled one).
    used = study.variations.filter(pairs__isnull=False).distinct().order_by("position")
    used.filter(pk=used[0].pk).update(label="Structure <em>as</em> a template")
    labels = {variation.key: variation.label for variation in used}
    client.force_login(coordinator)

    response = computed(client, study, django_capture_on_commit_callbacks)

    html = response.content.decode()
    assert "Up to date" in html and 'hx-trigger="every 30s"' in html
    for table in (
        "task1_ratings", "task1_realistic", "task1_degradation", "task2_ratings", "task2_proportions",
        "agreement", "disagreement", "adjudication", "reader-quality",
    ):  # fmt: skip
        assert f'id="table-{table}"' in html, table
    document = response.context["document"]
    assert document["counts"] == {
        "task1": {"examples": 4, "pairs": 2, "annotations": 9},
        "task2": {"examples": 2, "annotations": 4},
    }
    # The 4 Task 1 consensus ratings: 3 Realistic, 1 Minor Issues (tests/exports/release_helpers.py).
    overall = [r for r in document["tables"]["task1_ratings"] if r["level"] == "overall"]
    assert sum(r["n"] for r in overall if r["rating"] == "Realistic") == 3
    rows = _table_rows(html, "task1_realistic")
    assert any(row[:3] == ["Overall", "All", "original"] for row in rows), rows
    # Variations by their labels (escaped), in the taxonomy's order; their keys only in the CSVs.
    shown = list(dict.fromkeys(row[1] for row in rows if row[0] == "Variation"))
    assert shown == [escape(label) for label in labels.values()], shown
    assert "Structure &lt;em&gt;as&lt;/em&gt; a template" in html
    # Reader quality: by account name, as the page says, with times in tenths of a second.
    readers = _table_rows(html, "reader-quality")
    names = [row[0] for row in readers]
    assert len(names) >= 2 and names == sorted(names), names
    assert "Readers in the order of their account names" in html
    assert all(re.fullmatch(r"\d+\.\d s|\d+ min \d\d s|n/a: .+", row[5]) for row in readers), readers
    for key in labels:
        assert f">{key}<" not in html, key
    assert "Task 1: 4 examples, 2 pairs, 9 annotations" in re.sub(r"\s+", " ", html)


def test_the_page_says_what_the_study_found_first_then_figures_and_collapsed_tables_to_download(
    client, coordinator, data_manager, computed_study
):
    study = computed_study
    client.force_login(coordinator)
    html = client.get(_url(study)).content.decode()

    summary = html.index('id="summary-heading"')
    assert summary < html.index('id="task1-heading"') < html.index('id="agreement-heading"')
    assert "Of 2 original reports" in html and "Of 2 pairs" in html
    assert "<details" in html and not re.search(r"<details[^>]*\bopen\b", html)
    assert html.count('<figure class="result-figure">') >= 5 and "PNG, 300 dpi" in html
    for fmt in ("png", "svg", "pdf"):
        assert reverse("results_figure", args=[study.slug, "task1_forest", fmt]) in html

    # Each table downloads as its tidy CSV and as shown, in Markdown and LaTeX.
    client.force_login(data_manager)
    for name, fmt, expected in (
        ("task1_ratings", "csv", "level,group,report_type,rating"),
        ("task1_ratings", "md", "| Overall | All | original |"),
        ("task1_ratings", "tex", "\\toprule"),
    ):
        url = reverse("results_table", args=[study.slug, name, fmt])
        assert url in html
        response = client.get(url)
        assert response.status_code == 200, (name, fmt)
        assert f'filename="{study.slug}-all--both-{name}.{fmt}"' in response["Content-Disposition"]
        assert expected in b"".join(response.streaming_content).decode()
    for name, fmt in (("task1_ratings", "json"), ("nope", "csv"), ("..%2Fresults", "csv")):
        assert client.get(f"/studies/{study.slug}/results/tables/{name}.{fmt}").status_code == 404, (name, fmt)


def _table_rows(html: str, name: str) -> list[list[str]]:
    table = re.search(rf'<table class="data results" id="table-{name}">(.*?)</table>', html, re.DOTALL).group(1)
    body = table.split("<tbody>")[1]
    return [
        [re.sub(r"<[^>]+>", "", cell).strip() for cell in re.findall(r"<t[hd][^>]*>(.*?)</t[hd]>", row, re.DOTALL)]
        for row in re.findall(r"<tr[^>]*>(.*?)</tr>", body, re.DOTALL)
    ]


def test_a_new_rating_makes_it_recompute_while_showing_the_last_results(
    client, coordinator, django_capture_on_commit_callbacks
):
    study = rated_study()
    client.force_login(coordinator)
    computed(client, study, django_capture_on_commit_callbacks)
    pair = make_pair(study, study_id="59000001")
    assert "Up to date" in client.get(_url(study)).content.decode()  # a new pair changes no result

    annotation = Annotation.objects.filter(example__study=study).first()
    with django_capture_on_commit_callbacks(execute=True):
        void_annotation(annotation.public_id, actor=coordinator, reason="Rated the wrong report.")
        response = client.get(_url(study))

    html = response.content.decode()
    assert "New ratings since these results were computed: updating" in html
    assert 'id="table-task1_ratings"' in html
    assert len(default_task_backend.results) == 1
    run_queued()
    assert "Up to date" in client.get(_url(study)).content.decode()
    assert pair.pk


def test_a_failed_computation_says_why_and_can_be_queued_again(
    client, coordinator, django_capture_on_commit_callbacks, monkeypatch
):
    study = rated_study()
    client.force_login(coordinator)
    with django_capture_on_commit_callbacks(execute=True):
        client.get(_url(study))

    def broken(*args, **kwargs):
        raise RuntimeError("boom")

    monkeypatch.setattr("analysis.computing.analyze", broken)
    run_queued()
    html = client.get(_url(study)).content.decode()
    assert "The computation failed: The computation failed unexpectedly" in html
    assert 'hx-trigger="every 2s"' not in html

    monkeypatch.undo()
    with django_capture_on_commit_callbacks(execute=True):
        response = client.post(_url(study))
    assert response.status_code == 302
    run_queued()
    assert "Up to date" in client.get(_url(study)).content.decode()


def test_the_page_reads_the_database_in_a_fixed_number_of_queries(
    client, coordinator, django_capture_on_commit_callbacks
):
    small = rated_study("small")
    client.force_login(coordinator)
    computed(client, small, django_capture_on_commit_callbacks)
    with CaptureQueriesContext(connection) as small_queries:
        client.get(_url(small))

    large = rated_study("large")
    for example in Example.objects.filter(study=large, consensus__isnull=True):
        rate_open_reads(example, RatingChoice.REALISTIC, RatingChoice.REALISTIC)
    computed(client, large, django_capture_on_commit_callbacks)
    with CaptureQueriesContext(connection) as large_queries:
        client.get(_url(large))

    assert len(small_queries) == len(large_queries) <= 14, [q["sql"] for q in large_queries]


# --- Filters ----------------------------------------------------------------------------------------


def test_it_filters_by_task_and_dataset(client, coordinator, django_capture_on_commit_callbacks):
    study = rated_study()
    client.force_login(coordinator)

    task2 = computed(client, study, django_capture_on_commit_callbacks, task="task2")
    mimic = computed(client, study, django_capture_on_commit_callbacks, dataset="mimic-cxr", task="task1")

    assert task2.context["document"]["counts"] == {"task2": {"examples": 2, "annotations": 4}}
    assert 'id="table-task1_ratings"' not in task2.content.decode()
    assert mimic.context["document"]["filters"] == {"dataset": "mimic-cxr", "task": "task1"}
    assert 'id="table-task2_ratings"' not in mimic.content.decode()
    assert '<option value="mimic-cxr" selected>' in mimic.content.decode()


@pytest.mark.parametrize(
    ("query", "message"),
    [
        ({"dataset": "nope"}, "dataset: the study has no dataset &#x27;nope&#x27;. Use one of: mimic-cxr."),
        ({"task": "task3"}, "task: unknown task &#x27;task3&#x27;. Use task1 (realism), task2 (equivalence)"),
    ],
)
def test_an_unknown_filter_is_refused_with_the_choices(client, coordinator, query, message):
    study = rated_study()
    client.force_login(coordinator)

    response = client.get(_url(study, **query))

    assert response.status_code == 400
    assert message in response.content.decode()
    assert default_task_backend.results == []


# --- Figures, CSP and the download -----------------------------------------------------------------


def test_figures_are_image_files_and_the_page_stays_under_the_strict_csp(client, coordinator, computed_study):
    study = computed_study
    client.force_login(coordinator)
    html = client.get(_url(study)).content.decode()

    sources = re.findall(r'<img src="([^"]+)"', html)
    assert {re.search(r"figures/(\w+)\.svg", s).group(1) for s in sources} == {
        "task1_ratings", "task1_forest", "task1_realistic_forest", "task2_ratings", "agreement",
        # the metric sensitivity section's, under the same figure CSP
        "metric_bleu2", "metric_bleu2_reverse", "metric_rougeL", "metric_chrf", "metric_chrf_reverse",
    }  # fmt: skip
    for source in sources:
        svg = client.get(source.replace("&amp;", "&"))
        assert svg["Content-Type"] == "image/svg+xml"
        assert b"<svg" in b"".join(svg.streaming_content)
        assert "script-src" not in svg["Content-Security-Policy"]
        assert "default-src 'none'" in svg["Content-Security-Policy"]
    png = client.get(reverse("results_figure", args=[study.slug, "agreement", "png"]))
    assert png["Content-Type"] == "image/png"
    assert b"".join(png.streaming_content).startswith(b"\x89PNG")
    assert client.get(reverse("results_figure", args=[study.slug, "secret", "svg"])).status_code == 404
    assert client.get(reverse("results_figure", args=[study.slug, "agreement", "html"])).status_code == 404

    page = client.get(_url(study))
    assert "script-src 'self'" in page["Content-Security-Policy"]
    assert "unsafe-inline" not in page["Content-Security-Policy"]
    assert not re.search(r"<script(?![^>]*\bsrc=)", html), "inline script"
    assert not re.search(r"\sstyle=", html) and "<style" not in html, "inline style"


def test_the_download_is_the_whole_analysis_without_reader_quality(client, coordinator, computed_study):
    study = computed_study
    client.force_login(coordinator)

    response = client.get(reverse("results_download", args=[study.slug]))

    assert response["Content-Type"] == "application/zip"
    assert f'filename="{study.slug}-results-all--both.zip"' in response["Content-Disposition"]
    archive = zipfile.ZipFile(io.BytesIO(b"".join(response.streaming_content)))
    names = {name.split("/", 1)[1] for name in archive.namelist()}
    assert {"results.json", "results.md", "tables/agreement.csv", "figures/task1_forest.png"} <= names
    assert {"summary.md", "methods.md", "figures/task1_forest.pdf", "figures/task1_forest.svg"} <= names
    assert {"tables/task1_ratings.md", "tables/task1_ratings.tex"} <= names
    assert not any("reader" in name for name in names)
    usernames = set(Annotation.objects.filter(example__study=study).values_list("reader__username", flat=True))
    keys = {
        reader_key(study, pk)
        for pk in Annotation.objects.filter(example__study=study).values_list("reader_id", flat=True)
    }
    for name in archive.namelist():
        data = archive.read(name)
        assert not any(secret.encode() in data for secret in usernames | keys), name
    document = json.loads(archive.read(f"{study.slug}-results-all--both/results.json"))
    assert document == results_state(study, Scope()).document()


def test_nothing_to_download_before_the_first_computation(client, coordinator):
    study = rated_study()
    client.force_login(coordinator)

    assert client.get(reverse("results_download", args=[study.slug])).status_code == 404
    assert client.get(reverse("results_figure", args=[study.slug, "agreement", "svg"])).status_code == 404


# --- Reader quality: coordinators only --------------------------------------------------------------


def test_reader_quality_is_shown_to_coordinators_only(client, coordinator, data_manager, computed_study):
    study = computed_study
    client.force_login(coordinator)
    html = client.get(_url(study)).content.decode()
    usernames = set(Annotation.objects.filter(example__study=study).values_list("reader__username", flat=True))
    assert "Reader quality" in html
    assert all(f">{name}</a>" in html for name in usernames)

    client.force_login(data_manager)
    html = client.get(_url(study)).content.decode()
    assert "Reader quality" not in html and 'id="table-task1_ratings"' in html
    assert not any(name in html for name in usernames)


def test_an_empty_study_shows_tables_that_say_there_is_nothing_yet(
    client, coordinator, django_capture_on_commit_callbacks
):
    study = make_study("empty")
    client.force_login(coordinator)

    response = computed(client, study, django_capture_on_commit_callbacks)

    assert response.status_code == 200
    assert response.context["document"]["counts"]["task1"]["examples"] == 0
    assert not re.search(r"\bnan\b", response.content.decode(), re.IGNORECASE)
    assert "no examples" in response.content.decode()
    assert request_results(study, Scope()).is_current


def test_results_whose_files_are_gone_are_computed_again_not_a_server_error(
    client, coordinator, django_capture_on_commit_callbacks, results_dir, caplog
):
    study = rated_study()
    client.force_login(coordinator)
    assert computed(client, study, django_capture_on_commit_callbacks).status_code == 200
    shutil.rmtree(results_dir / str(study.public_id))  # a wiped folder, or a bucket's lifecycle rule

    with django_capture_on_commit_callbacks(execute=True):
        response = client.get(_url(study))

    assert response.status_code == 200
    assert results_state(study, Scope()).status == "queued"
    assert "are gone from the results storage; they are computed again" in caplog.text
    run_queued()
    assert results_state(study, Scope()).is_current
    assert "<figure" in client.get(_url(study)).content.decode()
