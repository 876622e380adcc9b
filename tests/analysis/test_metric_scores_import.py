"""Imported metric scores of a live study: the service, the command, the API, the page and the results."""

import io

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.core.management import CommandError, call_command
from rest_framework.test import APIClient

from analysis.computing import compute_results
from analysis.models import ImportedMetric, MetricScore
from analysis.services import Scope, data_version, import_metric_scores, results_state
from annotation.importing import ImportRejected
from annotation.models import CandidatePair, Role
from tests.exports.release_helpers import rated_study
from tests.factories import make_user

pytestmark = pytest.mark.django_db
HEADER = "dataset,study_id,reref_variation,metric,score,perfect_score\n"


@pytest.fixture(autouse=True)
def results_dir(settings, tmp_path):
    settings.RESULTS_DIR = tmp_path / "results"


@pytest.fixture
def study():
    return rated_study()


def scores_csv(study, metric="green", values=(0.8, 0.6), perfect="1", prefix="") -> bytes:
    pairs = CandidatePair.objects.filter(study=study, sampled=True).order_by("pk")
    lines = [
        f"{p.dataset.key},{prefix}{p.source_study_id},{p.variation.key},{metric},{value},{perfect}\n"
        for p, value in zip(pairs, values, strict=False)
    ]
    return (HEADER + "".join(lines)).encode()


def stored(study) -> list[tuple]:
    return sorted(
        MetricScore.objects.filter(metric__study=study).values_list("metric__name", "pair__source_study_id", "score")
    )


def test_it_imports_scores_for_sampled_pairs_and_says_so(study):
    report = import_metric_scores(study, scores_csv(study, prefix="s"))  # MIMIC's 's' prefix is stripped

    assert (report.created, report.unchanged, report.replaced) == (2, 0, 0)
    assert sorted(score for _, _, score in stored(study)) == [0.6, 0.8]
    assert ImportedMetric.objects.get(study=study).perfect_score == 1.0


def test_importing_the_same_file_again_changes_nothing(study):
    import_metric_scores(study, scores_csv(study))
    version = data_version(study)

    report = import_metric_scores(study, scores_csv(study))

    assert (report.created, report.unchanged) == (0, 2)
    assert data_version(study) == version


@pytest.mark.parametrize(
    ("content", "message"),
    [
        (b"dataset,study_id,metric,score\n", "line 1, field 'reref_variation': Required column"),
        (HEADER.encode() + b"mimic-cxr,1,hedging,green,NaN,1\n", "line 2, field 'score': 'NaN' is not a finite number"),
        (HEADER.encode() + b"mimic-cxr,1,hedging,green,0.5,1\n", "line 2, field 'study_id': No sampled pair"),
        (b"\xff\xfe", "not valid UTF-8"),
    ],
)
def test_a_bad_file_is_refused_naming_line_and_field_and_nothing_is_stored(study, content, message):
    with pytest.raises(ImportRejected, match=message.replace("(", r"\(")):
        import_metric_scores(study, content)

    assert not ImportedMetric.objects.exists() and not MetricScore.objects.exists()


def test_one_bad_row_keeps_every_good_row_out(study):
    good = scores_csv(study, values=(0.8,))
    with pytest.raises(ImportRejected):
        import_metric_scores(study, good + b"mimic-cxr,nope,hedging,green,0.5,1\n")

    assert not MetricScore.objects.exists()


def test_a_changed_score_is_refused_unless_replacing(study):
    import_metric_scores(study, scores_csv(study, values=(0.8, 0.6)))
    version = data_version(study)

    with pytest.raises(ImportRejected, match="line 2, field 'score': Metric 'green' is already stored"):
        import_metric_scores(study, scores_csv(study, values=(0.5, 0.6)))
    assert data_version(study) == version

    report = import_metric_scores(study, scores_csv(study, values=(0.5, 0.6)), replace=True)

    assert report.replaced == 1
    assert sorted(score for _, _, score in stored(study)) == [0.5, 0.6]
    assert data_version(study) != version


def test_a_dry_run_stores_nothing(study):
    report = import_metric_scores(study, scores_csv(study), dry_run=True)

    assert report.created == 2 and not MetricScore.objects.exists()


def test_the_command_imports_and_reports_problems(study, tmp_path):
    path = tmp_path / "green.csv"
    path.write_bytes(scores_csv(study))
    out = io.StringIO()

    call_command("import_metric_scores", str(path), "--study", study.slug, stdout=out)

    assert "Imported 2 new scores" in out.getvalue()
    path.write_bytes(HEADER.encode() + b"mimic-cxr,1,hedging,green,x,1\n")
    with pytest.raises(CommandError, match="line 2, field 'score'"):
        call_command("import_metric_scores", str(path), "--study", study.slug)


def test_the_computed_results_treat_imported_metrics_like_builtin_ones(study):
    import_metric_scores(study, scores_csv(study))

    compute_results(study, Scope())

    document = results_state(study, Scope()).document()["metric_sensitivity"]
    names = [(m["metric"], m["direction"]) for m in document["metrics"]]
    assert ("green", "imported") in names and ("bleu2", "forward") in names
    green = next(r for r in document["table"] if r["metric"] == "green" and r["level"] == "overall")
    assert green["n_equivalent"] == 2 and green["drop_from_perfect"] == pytest.approx(1 - 0.7)


def test_only_task1_results_have_no_metric_sensitivity(study):
    compute_results(study, Scope(task="task1"))

    assert "metric_sensitivity" not in results_state(study, Scope(task="task1")).document()


# API -----------------------------------------------------------------------------------------------


def post(client, study, content: bytes, **fields):
    upload = SimpleUploadedFile("scores.csv", content, content_type="text/csv")
    return client.post(f"/api/studies/{study.slug}/metric-scores/", {"file": upload, **fields}, format="multipart")


def test_the_api_imports_for_coordinators(study):
    client = APIClient()
    client.force_authenticate(make_user(Role.COORDINATOR))

    response = post(client, study, scores_csv(study))

    assert response.status_code == 201, response.content
    assert response.json()["created"] == 2
    again = post(client, study, scores_csv(study))
    assert again.status_code == 200 and again.json()["unchanged"] == 2


def test_the_api_answers_problems_with_line_and_field(study):
    client = APIClient()
    client.force_authenticate(make_user(Role.COORDINATOR))

    response = post(client, study, HEADER.encode() + b"mimic-cxr,1,hedging,green,x,1\n")

    assert response.status_code == 400
    assert response.json()["errors"][0] == {
        "line": 2,
        "field": "score",
        "message": "'x' is not a finite number. Write it like 0.734.",
    }
    assert not MetricScore.objects.exists()


@pytest.mark.parametrize(("roles", "code"), [((), 401), ((Role.READER,), 403), ((Role.DATA_MANAGER,), 403)])
def test_the_api_refuses_everyone_but_coordinators(study, roles, code):
    client = APIClient()
    if code != 401:
        client.force_authenticate(make_user(*roles))

    assert post(client, study, scores_csv(study)).status_code == code
    assert not MetricScore.objects.exists()


# The page ------------------------------------------------------------------------------------------


def test_the_results_page_shows_the_metric_sensitivity_section_and_serves_its_figures(client, study):
    compute_results(study, Scope())
    client.force_login(make_user(Role.COORDINATOR))

    page = client.get(f"/studies/{study.slug}/results/").content.decode()

    assert 'id="metric-sensitivity-heading"' in page
    assert 'id="table-metric_bleu2"' in page
    assert 'id="table-metric_chrf_reverse"' in page
    assert f'action="/studies/{study.slug}/results/metric-scores/"' in page
    figure = client.get(f"/studies/{study.slug}/results/figures/metric_bleu2.svg")
    assert figure.status_code == 200 and figure["Content-Type"] == "image/svg+xml"
    assert client.get(f"/studies/{study.slug}/results/figures/metric_..%2Fsecret.svg").status_code == 404


def test_data_managers_see_the_section_without_the_import_form(client, study):
    compute_results(study, Scope())
    client.force_login(make_user(Role.DATA_MANAGER))

    page = client.get(f"/studies/{study.slug}/results/").content.decode()

    assert 'id="metric-sensitivity-heading"' in page
    assert "results/metric-scores/" not in page


def test_the_page_upload_imports_or_shows_the_problems(client, study):
    client.force_login(make_user(Role.COORDINATOR))
    url = f"/studies/{study.slug}/results/metric-scores/"

    bad = client.post(url, {"file": SimpleUploadedFile("s.csv", HEADER.encode() + b"mimic-cxr,1,hedging,g,x,1\n")})

    assert bad.status_code == 400
    assert "line 2, field &#x27;score&#x27;" in bad.content.decode()
    good = client.post(url, {"file": SimpleUploadedFile("s.csv", scores_csv(study))})
    assert good.status_code == 302 and MetricScore.objects.count() == 2


@pytest.mark.parametrize("roles", [(Role.READER,), (Role.DATA_MANAGER,)])
def test_the_page_upload_is_for_coordinators_only(client, study, roles):
    client.force_login(make_user(*roles))

    response = client.post(
        f"/studies/{study.slug}/results/metric-scores/", {"file": SimpleUploadedFile("s.csv", scores_csv(study))}
    )

    assert response.status_code == 403
    assert not MetricScore.objects.exists()
