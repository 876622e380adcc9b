"""import_rewrites: rewrites joined to stored original reports, imported as candidate pairs.

The command, the study page and the API all call the same service, which goes through the pair
import: a rewrite row plus its original is exactly a row of a pair file.
"""

import json
from io import StringIO
from pathlib import Path

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.core.management import CommandError, call_command
from django.urls import reverse

from annotation.importing import ImportRejected
from annotation.models import CandidatePair, Dataset, Example, Role, Study
from annotation.services import import_pairs, import_reports, import_rewrites
from tests.factories import csv_bytes, jsonl_bytes, make_assignment, make_study, make_token, make_user

DATASETS = Path(__file__).parent / "datasets"
REWRITE_COLUMNS = [
    "dataset",
    "study_id",
    "reref_variation",
    "verdict",
    "alternative_findings",
    "alternative_impression",
    "model",
    "attempt",
    "verifier_reasons",
]
HTMX = {"HX-Request": "true"}

pytestmark = pytest.mark.django_db


@pytest.fixture
def originals(db):
    import_reports(Dataset.objects.get(key="mimic-cxr"), DATASETS / "mimic-cxr/files")
    import_reports(Dataset.objects.get(key="iu-xray"), DATASETS / "iu-xray/indiana_reports.csv")


def rewrite(**overrides) -> dict:
    row = {
        "dataset": "mimic-cxr",
        "study_id": "s50000001",
        "reref_variation": "hedging",
        "verdict": "accepted",
        "alternative_findings": "The lungs are probably clear.",
        "alternative_impression": "Likely no acute cardiopulmonary process.",
        "model": "writer-7b",
        "attempt": "2",
        "verifier_reasons": "meaning kept",
    }
    row.update(overrides)
    return row


def rewrites_csv(rows: list[dict]) -> bytes:
    return csv_bytes(rows, columns=REWRITE_COLUMNS)


def test_a_rewrite_becomes_a_pair_with_its_original(originals, study):
    report = import_rewrites(study, rewrites_csv([rewrite()]), filename="rewrites.csv")
    assert (report.rows, report.created) == (1, 1)
    pair = CandidatePair.objects.get(study=study)
    assert pair.source_study_id == "50000001"
    assert pair.indication == "___ year old woman with cough and fever, evaluate for pneumonia."
    assert (pair.comparison, pair.technique) == ("___", "Chest PA and lateral")
    assert pair.original_findings.startswith("The lungs are clear without consolidation")
    assert pair.original_impression == "No acute cardiopulmonary process."
    assert pair.alternative_findings == "The lungs are probably clear."
    assert pair.generator == {"model": "writer-7b", "attempt": 2, "verifier_reasons": "meaning kept"}


def test_it_is_exactly_the_pair_file_import(originals):
    """The same pair, once from a rewrite file and once from the pair file written by hand."""
    by_rewrite, by_pair_file = make_study("rewrites"), make_study("pairs")
    import_rewrites(by_rewrite, rewrites_csv([rewrite(dataset="iu-xray", study_id="2")]), filename="r.csv")
    pair_row = {
        **rewrite(dataset="iu-xray", study_id="2"),
        "indication": "Preop surgery.",
        "comparison": "None.",
        "technique": "Chest, 2 views, frontal and lateral",
        "original_findings": "Borderline cardiomegaly.\nMidline sternotomy XXXX. Clear lungs.",
        "original_impression": "No acute pulmonary findings.",
    }
    columns = [*REWRITE_COLUMNS, "indication", "comparison", "technique", "original_findings", "original_impression"]
    import_pairs(by_pair_file, csv_bytes([pair_row], columns=columns), filename="p.csv")
    fields = ["dataset_id", "source_study_id", "variation__key", "verdict", "generator", "indication", "comparison"]
    fields += ["technique", "original_findings", "original_impression", "alternative_findings"]
    fields += ["alternative_impression", "sampled"]
    assert list(CandidatePair.objects.filter(study=by_rewrite).values(*fields)) == list(
        CandidatePair.objects.filter(study=by_pair_file).values(*fields)
    )


def test_jsonl_keeps_generator_metadata_as_json(originals, study):
    row = rewrite(attempt=3, verifier_reasons=["meaning kept", "hedge added"])
    import_rewrites(study, jsonl_bytes([row]), filename="rewrites.jsonl")
    assert CandidatePair.objects.get(study=study).generator == {
        "model": "writer-7b",
        "attempt": 3,
        "verifier_reasons": ["meaning kept", "hedge added"],
    }


def test_a_rewrite_without_its_original_names_the_row_and_nothing_is_imported(originals, study):
    rows = [rewrite(), rewrite(study_id="50000005"), rewrite(dataset="iu-xray", study_id="99"), rewrite(dataset="x")]
    with pytest.raises(ImportRejected) as rejected:
        import_rewrites(study, rewrites_csv(rows), filename="rewrites.csv")
    problems = rejected.value.problems
    assert [(p.line, p.field) for p in problems] == [(3, "study_id"), (4, "study_id"), (5, "dataset")]
    assert problems[0].message.startswith("No original report of mimic-cxr study 50000005 is stored.")
    assert "never stored" in problems[0].message
    assert not CandidatePair.objects.exists()


def test_the_pair_checks_apply_to_rewrites(originals, study):
    rows = [rewrite(), rewrite(verdict="maybe"), rewrite(alternative_findings="", alternative_impression=""), rewrite()]
    with pytest.raises(ImportRejected) as rejected:
        import_rewrites(study, rewrites_csv(rows), filename="rewrites.csv")
    assert [(p.line, p.field) for p in rejected.value.problems] == [
        (3, "verdict"),
        (4, "alternative_findings"),
        (5, None),
    ]
    assert "Duplicate pair" in rejected.value.problems[2].message


def test_a_rewrite_file_with_a_pair_files_columns_is_refused(originals, study):
    data = rewrites_csv([rewrite()]).replace(b"verifier_reasons", b"original_findings", 1)
    with pytest.raises(ImportRejected) as rejected:
        import_rewrites(study, data, filename="rewrites.csv")
    (problem,) = rejected.value.problems
    assert (problem.line, problem.field) == (1, "original_findings")


def test_importing_again_changes_nothing_and_other_metadata_is_refused(originals, study):
    import_rewrites(study, rewrites_csv([rewrite()]), filename="rewrites.csv")
    again = import_rewrites(study, rewrites_csv([rewrite()]), filename="rewrites.csv")
    assert (again.created, again.unchanged) == (0, 1)
    with pytest.raises(ImportRejected) as rejected:
        import_rewrites(study, rewrites_csv([rewrite(attempt="3")]), filename="rewrites.csv")
    (problem,) = rejected.value.problems
    assert problem.field == "generator"


def test_a_study_is_set_up_from_the_datasets_files_and_rewrites_alone(db, tmp_path):
    out = StringIO()
    call_command("import_reports", str(DATASETS / "mimic-cxr/files"), dataset="mimic-cxr", no_progress=True, stdout=out)
    call_command("import_reports", str(DATASETS / "iu-xray/indiana_reports.csv"), dataset="iu-xray", stdout=out)
    rows = [rewrite(study_id=sid) for sid in ("50000001", "50000002", "50000003")]
    rows += [rewrite(dataset="iu-xray", study_id=uid, reref_variation="terminology") for uid in ("1", "2")]
    path = tmp_path / "rewrites.csv"
    path.write_bytes(rewrites_csv(rows))
    call_command("import_rewrites", str(path), study="from-files", no_progress=True, stdout=out)
    call_command("sample_pairs", study="from-files", per_variation=2, seed=3, stdout=out)
    study = Study.objects.get(slug="from-files")
    assert "Created study 'from-files'" in out.getvalue()
    assert "Imported 5 new pairs." in out.getvalue()
    assert Example.objects.filter(study=study).count() == 3 * 4


def test_the_command_names_line_and_field_and_imports_nothing(originals, tmp_path):
    path = tmp_path / "rewrites.csv"
    path.write_bytes(rewrites_csv([rewrite(), rewrite(study_id="123")]))
    err = StringIO()
    with pytest.raises(CommandError, match="Nothing was imported: 1 problem"):
        call_command("import_rewrites", str(path), study="s1", no_progress=True, stderr=err)
    assert err.getvalue().startswith(
        "rewrites.csv: line 3, field 'study_id': No original report of mimic-cxr study 123 is stored."
    )
    assert not CandidatePair.objects.exists()


# --- The study page -----------------------------------------------------------------------------


def _upload(client, study: Study, data: bytes, name: str = "rewrites.csv", **fields):
    url = reverse("study_import_rewrites", args=[study.slug])
    return client.post(url, {"file": SimpleUploadedFile(name, data), **fields}, headers=HTMX)


def test_the_study_page_has_the_rewrites_form(client, coordinator, study):
    client.force_login(coordinator)
    html = client.get(reverse("study_detail", args=[study.slug])).content.decode()
    assert 'id="rewrites-heading"' in html
    assert 'id="id_rewrites_file"' in html and 'id="id_file"' in html


def test_a_coordinator_uploads_rewrites_on_the_study_page(originals, client, coordinator, study):
    client.force_login(coordinator)
    response = _upload(client, study, rewrites_csv([rewrite()]))
    assert response.status_code == 200
    html = response.content.decode()
    assert 'id="rewrites-panel"' in html and "<html" not in html
    assert '<p class="success" role="status">Imported 1 new pair.</p>' in html
    assert '<div id="summary" hx-swap-oob="true">' in html


def test_the_upload_lists_problems_escaped_and_imports_nothing(originals, client, coordinator, study):
    client.force_login(coordinator)
    response = _upload(client, study, rewrites_csv([rewrite(study_id="<b>1</b>", dataset="iu-xray")]))
    assert response.status_code == 422
    html = response.content.decode()
    assert "Nothing was imported." in html
    assert "study &lt;b&gt;1&lt;/b&gt; is stored" in html
    assert not CandidatePair.objects.exists()


def test_the_upload_without_javascript_renders_the_whole_page(originals, client, coordinator, study):
    client.force_login(coordinator)
    url = reverse("study_import_rewrites", args=[study.slug])
    response = client.post(url, {"file": SimpleUploadedFile("r.csv", rewrites_csv([rewrite()]))})
    assert response.status_code == 200
    assert "<html" in response.content.decode()
    assert "Imported 1 new pair." in response.content.decode()


@pytest.mark.parametrize("role", [Role.READER, Role.DATA_MANAGER, Role.ADJUDICATOR])
def test_the_upload_requires_the_coordinator_role(originals, client, study, role):
    client.force_login(make_user(role))
    assert _upload(client, study, rewrites_csv([rewrite()])).status_code == 403
    assert not CandidatePair.objects.exists()


def test_the_upload_requires_login_and_a_get_goes_to_the_form(originals, client, coordinator, study):
    url = reverse("study_import_rewrites", args=[study.slug])
    response = client.post(url, {"file": SimpleUploadedFile("r.csv", rewrites_csv([rewrite()]))})
    assert response.status_code == 302 and "/accounts/login/" in response["Location"]
    assert _upload(client, study, rewrites_csv([rewrite()]))["HX-Redirect"].startswith("/accounts/login/")
    client.force_login(coordinator)
    # An address typed or bookmarked goes to the form itself.
    response = client.get(reverse("study_import_rewrites", args=[study.slug]))
    assert response.status_code == 302 and response["Location"] == f"/studies/{study.slug}/#rewrites-heading"
    assert _upload(client, Study(slug="nope"), rewrites_csv([rewrite()])).status_code == 404


# --- The API ------------------------------------------------------------------------------------


def _api(client, study: Study, data: bytes, name: str = "rewrites.csv", **extra):
    url = reverse("study-rewrites", args=[study.slug])
    return client.post(url, {"file": SimpleUploadedFile(name, data)}, **extra)


def test_the_api_imports_rewrites(originals, client, coordinator, study):
    client.force_login(coordinator)
    response = _api(client, study, rewrites_csv([rewrite()]))
    assert response.status_code == 201
    expected = {"rows": 1, "created": 1, "unchanged": 0, "dry_run": False, "summary": "Imported 1 new pair."}
    assert response.json() == expected
    assert _api(client, study, rewrites_csv([rewrite()])).status_code == 200


def test_the_api_answers_400_naming_the_row(originals, client, coordinator, study):
    client.force_login(coordinator)
    response = _api(client, study, rewrites_csv([rewrite(study_id="1")]))
    assert response.status_code == 400
    (error,) = response.json()["errors"]
    assert (error["line"], error["field"]) == (2, "study_id")
    assert not CandidatePair.objects.exists()


def test_the_api_refuses_other_roles_and_anonymous_calls(originals, client, study):
    assert _api(client, study, rewrites_csv([rewrite()])).status_code == 401
    reader = make_user(Role.READER)
    token = make_token(reader)
    response = _api(client, study, rewrites_csv([rewrite()]), headers={"Authorization": f"Token {token}"})
    assert response.status_code == 403
    assert not CandidatePair.objects.exists()


# --- Blinding -----------------------------------------------------------------------------------


def test_generator_metadata_never_reaches_a_reader(originals, client, study):
    marker = "GENERATOR-MARKER-7"
    row = rewrite(model=marker, verifier_reasons=[marker], attempt=9)
    import_rewrites(study, jsonl_bytes([row]), filename="rewrites.jsonl")
    pair = CandidatePair.objects.get(study=study)
    reader = make_user(Role.READER)
    client.force_login(reader)
    for task, report_type in (("realism", "alternative"), ("equivalence", "")):
        example = Example.objects.create(study=study, pair=pair, task=task, report_type=report_type)
        assignment = make_assignment(example, reader)
        page = client.get(reverse("reading_page", args=[assignment.public_id]))
        api = client.get(reverse("reading-detail", args=[assignment.public_id]))
        assert page.status_code == api.status_code == 200
        for response in (page, api):
            body = response.content.decode()
            assert marker not in body and "writer" not in body
            assert json.dumps(marker) not in body
