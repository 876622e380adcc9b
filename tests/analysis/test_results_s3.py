"""Study results kept in an S3-compatible object store (READINGROOM_STORAGE=s3), over HTTP against
moto's server on loopback: which version is current is a database row, the files are in the
bucket, the web server serves figures and tables from it, and nothing stays on the worker's disk."""

import hashlib
import urllib.request

import pytest
from django.core.files.storage import storages
from django.tasks import default_task_backend
from django.utils import timezone

from analysis import metrics
from analysis.computing import compute_results
from analysis.models import CachedMetricScores, ComputedResults
from analysis.services import Scope, results_state, scope_prefix, store_results
from annotation.models import Annotation, Role
from consensus.services import void_annotation
from tests.analysis.test_results_page import computed
from tests.exports.release_helpers import rated_study
from tests.factories import make_user

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def results_dir(settings, tmp_path):
    settings.RESULTS_DIR = tmp_path / "results"  # the worker's scratch folder only
    default_task_backend.clear()
    return settings.RESULTS_DIR


def test_computed_results_are_in_the_bucket_and_the_page_serves_them(
    client, s3_server, s3_bucket, results_dir, django_capture_on_commit_callbacks
):
    study = rated_study()
    client.force_login(make_user(Role.COORDINATOR))

    page = computed(client, study, django_capture_on_commit_callbacks).content.decode()

    [kept] = ComputedResults.objects.filter(study=study)
    prefix = f"results/{study.public_id}/all--both/{kept.version}/"
    keys = s3_server.keys(s3_bucket)
    assert keys and all(key.startswith(prefix) for key in keys)
    assert {f"{prefix}results.zip", f"{prefix}reader_quality.json", f"{prefix}analysis/results.json"} <= set(keys)
    assert "Up to date" in page
    assert [path for path in results_dir.rglob("*") if path.is_file()] == []  # scratch only, and gone

    figure = client.get(f"/studies/{study.slug}/results/figures/task1_forest.svg")
    assert figure.status_code == 200
    stored = s3_server.client().get_object(Bucket=s3_bucket, Key=f"{prefix}analysis/figures/task1_forest.svg")
    assert b"".join(figure.streaming_content) == stored["Body"].read()

    download = client.get(f"/studies/{study.slug}/results/download/")
    assert download.status_code == 302
    with urllib.request.urlopen(download["Location"], timeout=10) as answer:  # noqa: S310 (loopback)
        assert answer.read()[:2] == b"PK"
        assert answer.headers["Content-Disposition"] == f'attachment; filename="{study.slug}-results-all--both.zip"'


def test_new_results_replace_the_old_version_in_the_bucket(
    client, s3_server, s3_bucket, django_capture_on_commit_callbacks
):
    study = rated_study()
    coordinator = make_user(Role.COORDINATOR)
    client.force_login(coordinator)
    computed(client, study, django_capture_on_commit_callbacks)
    first = ComputedResults.objects.get(study=study).version

    annotation = Annotation.objects.filter(example__study=study).first()
    void_annotation(annotation.public_id, actor=coordinator, reason="Rated the wrong report.")
    computed(client, study, django_capture_on_commit_callbacks)

    second = ComputedResults.objects.get(study=study).version
    assert second != first
    versions = {key.split("/")[3] for key in s3_server.keys(s3_bucket)}
    assert versions == {second}


def test_results_whose_objects_are_gone_from_the_bucket_are_computed_again(
    client, s3_server, s3_bucket, django_capture_on_commit_callbacks
):
    study = rated_study()
    client.force_login(make_user(Role.COORDINATOR))
    computed(client, study, django_capture_on_commit_callbacks)
    bucket = s3_server.client()
    for key in s3_server.keys(s3_bucket):  # as a lifecycle rule would
        bucket.delete_object(Bucket=s3_bucket, Key=key)

    page = computed(client, study, django_capture_on_commit_callbacks)

    assert page.status_code == 200 and "Up to date" in page.content.decode()
    assert (
        f"results/{study.public_id}/all--both/{results_state(study, Scope()).computed_version}/analysis/results.json"
        in (s3_server.keys(s3_bucket))
    )


def test_results_of_rows_read_before_the_kept_ones_are_not_kept(s3_server, s3_bucket, tmp_path):
    study, scope = rated_study(), Scope()
    later, earlier = timezone.now(), timezone.now() - timezone.timedelta(minutes=5)
    for version, read_at in (("newer", later), ("older", earlier)):
        folder = tmp_path / version
        (folder / "analysis").mkdir(parents=True)
        (folder / "analysis" / "results.json").write_text(f'{{"version": "{version}"}}')
        store_results(study, scope, version, read_at, folder)

    assert ComputedResults.objects.get(study=study).version == "newer"
    assert results_state(study, scope).document() == {"version": "newer"}
    assert {key.split("/")[3] for key in s3_server.keys(s3_bucket)} == {"newer"}
    assert not any(path.exists() for path in (tmp_path / "newer", tmp_path / "older"))


def test_the_metric_scores_are_cached_in_the_database_for_every_worker(s3_server, s3_bucket, monkeypatch):
    study = rated_study()
    compute_results(study, Scope(task="task2"))
    cached = CachedMetricScores.objects.count()
    assert cached > 0

    def never(*args, **kwargs):
        raise AssertionError("scored again")

    monkeypatch.setattr(metrics, "_score_chunk", never)
    monkeypatch.setattr(metrics, "score_pair", never)
    compute_results(study, Scope(dataset="mimic-cxr", task="task2"))  # another scope, the same pairs

    assert CachedMetricScores.objects.count() == cached
    assert storages["results"].exists(
        f"{scope_prefix(study, Scope(dataset='mimic-cxr', task='task2'))}/"
        f"{ComputedResults.objects.get(study=study, dataset='mimic-cxr').version}/results.zip"
    )


def test_the_database_cache_answers_as_the_file_cache(tmp_path):
    keys = [hashlib.blake2b(str(n).encode(), digest_size=32).digest() for n in range(5)]
    rows = {key: tuple(n / 3 + 0.1 * i for i in range(len(metrics.COLUMNS))) for n, key in enumerate(keys[:3])}
    database, file = metrics.DatabaseMetricCache(), metrics.MetricCache(tmp_path / "cache.sqlite3")
    database.put(rows)
    file.put(rows)

    found, expected = database.get(keys), file.get(keys)
    assert set(found) == set(expected) == set(keys[:3])
    assert all(found[key] == expected[key] == rows[key] for key in found)  # bit for bit
