"""POST /api/studies/<slug>/imports/: the import service over the API."""

import json

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.test import Client
from django.urls import reverse

from annotation.models import CandidatePair, Study
from tests.factories import csv_bytes, csv_row, jsonl_bytes, make_token


@pytest.fixture
def coordinator_client(client, coordinator):
    client.force_login(coordinator)
    return client


def _url(study: Study) -> str:
    return reverse("study-imports", args=[study.slug])


def _post(client, study: Study, data: bytes, *, name: str = "pairs.csv", headers: dict | None = None, **fields):
    return client.post(_url(study), {"file": SimpleUploadedFile(name, data), **fields}, headers=headers or {})


def test_it_imports_and_returns_201_with_the_counts(coordinator_client, study):
    response = _post(coordinator_client, study, csv_bytes([csv_row(), csv_row()]))
    assert response.status_code == 201
    assert response.json() == {
        "rows": 2,
        "created": 2,
        "unchanged": 0,
        "dry_run": False,
        "summary": "Imported 2 new pairs.",
    }
    assert CandidatePair.objects.filter(study=study).count() == 2


def test_it_imports_jsonl(coordinator_client, study):
    response = _post(coordinator_client, study, jsonl_bytes([csv_row()]), name="pairs.jsonl")
    assert response.status_code == 201
    assert response.json()["created"] == 1


def test_it_returns_200_when_a_reimport_changes_nothing(coordinator_client, study):
    data = csv_bytes([csv_row(), csv_row()])
    _post(coordinator_client, study, data)
    response = _post(coordinator_client, study, data)
    assert response.status_code == 200
    assert response.json() == {
        "rows": 2,
        "created": 0,
        "unchanged": 2,
        "dry_run": False,
        "summary": "Nothing to import: all 2 pairs in the file are already stored, unchanged.",
    }
    assert CandidatePair.objects.count() == 2


def test_it_returns_201_when_a_reimport_adds_pairs(coordinator_client, study):
    old = csv_row()
    _post(coordinator_client, study, csv_bytes([old]))
    response = _post(coordinator_client, study, csv_bytes([old, csv_row()]))
    assert response.status_code == 201
    assert (response.json()["created"], response.json()["unchanged"]) == (1, 1)


def test_a_dry_run_returns_200_and_writes_nothing(coordinator_client, study):
    response = _post(coordinator_client, study, csv_bytes([csv_row(), csv_row()]), dry_run="true")
    assert response.status_code == 200
    assert response.json() == {
        "rows": 2,
        "created": 2,
        "unchanged": 0,
        "dry_run": True,
        "summary": "Would import 2 new pairs.",
    }
    assert not CandidatePair.objects.exists()


def test_it_returns_400_with_every_problem_and_writes_nothing(coordinator_client, study):
    rows = [csv_row(), csv_row(verdict="maybe"), csv_row(), csv_row(study_id="s12x", original_findings="")]
    response = _post(coordinator_client, study, csv_bytes(rows))
    assert response.status_code == 400
    errors = response.json()["errors"]
    assert [(e["line"], e["field"]) for e in errors] == [(3, "verdict"), (5, "study_id")]
    assert errors[0]["message"].startswith("Invalid verdict 'maybe'. Use one of: accepted,")
    assert errors[1]["message"] == "'s12x' is not a mimic-cxr study id: use digits only (optionally prefixed with 's')."
    assert all(set(e) == {"line", "field", "message"} for e in errors)
    assert not CandidatePair.objects.exists()


def test_it_returns_400_for_a_jsonl_key_given_twice_and_writes_nothing(coordinator_client, study):
    row = csv_row()
    line = json.dumps(row)[:-1] + ', "verdict": "rejected"}\n'
    response = _post(coordinator_client, study, jsonl_bytes([csv_row()]) + line.encode(), name="pairs.jsonl")
    assert response.status_code == 400
    [error] = response.json()["errors"]
    assert (error["line"], error["field"]) == (2, "verdict")
    assert error["message"].startswith('The key "verdict" is given twice in this object;')
    assert not CandidatePair.objects.exists()


def test_it_returns_400_for_a_reimport_that_changes_a_stored_pair(coordinator_client, study):
    row = csv_row()
    _post(coordinator_client, study, csv_bytes([row]))
    response = _post(coordinator_client, study, csv_bytes([csv_row(), {**row, "verdict": "rejected"}]))
    assert response.status_code == 400
    [error] = response.json()["errors"]
    assert (error["line"], error["field"]) == (3, "verdict")
    assert CandidatePair.objects.count() == 1
    assert CandidatePair.objects.get().verdict == "accepted"


def test_a_dry_run_returns_400_for_a_bad_file(coordinator_client, study):
    response = _post(coordinator_client, study, csv_bytes([csv_row(dataset="nope")]), dry_run="true")
    assert response.status_code == 400
    assert response.json()["errors"][0]["field"] == "dataset"


def test_it_reports_file_level_problems_without_a_line(coordinator_client, study):
    response = _post(coordinator_client, study, csv_bytes([]))
    assert response.status_code == 400
    assert response.json() == {
        "errors": [
            {"line": None, "field": None, "message": "The file has a header but no rows. Add at least one pair."}
        ]
    }


def test_it_reports_an_empty_file_in_the_same_form(coordinator_client, study):
    response = _post(coordinator_client, study, b"")
    assert response.status_code == 400
    assert response.json() == {
        "errors": [
            {
                "line": None,
                "field": None,
                "message": "The file is empty. Export the candidate pairs again and upload that file.",
            }
        ]
    }


def test_it_requires_a_file(coordinator_client, study):
    response = coordinator_client.post(_url(study), {})
    assert response.status_code == 400
    assert response.json() == {"file": ["No file was submitted."]}


def test_it_only_takes_multipart_uploads(coordinator_client, study):
    response = coordinator_client.post(_url(study), {"file": "x"}, content_type="application/json")
    assert response.status_code == 415


def test_it_404s_for_an_unknown_study(coordinator_client):
    response = coordinator_client.post(reverse("study-imports", args=["nope"]), {})
    assert response.status_code == 404


def test_it_accepts_token_authentication(client, coordinator, study):
    token = make_token(coordinator)
    response = _post(client, study, csv_bytes([csv_row()]), headers={"Authorization": f"Token {token}"})
    assert response.status_code == 201
    assert CandidatePair.objects.filter(study=study).count() == 1


def test_it_denies_readers(client, reader, study):
    client.force_login(reader)
    response = _post(client, study, csv_bytes([csv_row()]))
    assert response.status_code == 403
    assert not CandidatePair.objects.exists()


def test_it_denies_readers_with_a_token(client, reader, study):
    token = make_token(reader)
    response = _post(client, study, csv_bytes([csv_row()]), headers={"Authorization": f"Token {token}"})
    assert response.status_code == 403
    assert not CandidatePair.objects.exists()


def test_it_denies_anonymous_users(client, study):
    response = _post(client, study, csv_bytes([csv_row()]))
    assert response.status_code == 401
    assert response["WWW-Authenticate"] == "Token"
    assert response.json() == {"detail": "Authentication credentials were not provided."}
    assert not CandidatePair.objects.exists()


def test_it_denies_an_invalid_token(client, study):
    response = _post(client, study, csv_bytes([csv_row()]), headers={"Authorization": "Token not-a-token"})
    assert response.status_code == 401
    assert response.json() == {"detail": "Invalid token."}
    assert not CandidatePair.objects.exists()


def test_it_requires_the_csrf_token_with_session_authentication(coordinator, study):
    client = Client(enforce_csrf_checks=True)
    client.force_login(coordinator)
    response = _post(client, study, csv_bytes([csv_row()]))
    assert response.status_code == 403
    assert response.json()["detail"].startswith("CSRF Failed")
    assert not CandidatePair.objects.exists()
