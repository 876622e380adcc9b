"""manage.py import_pairs: the import service from the command line."""

import io
from pathlib import Path

import pytest
from django.core.management import CommandError, call_command

from annotation.models import DEFAULT_TAXONOMY, CandidatePair, Study
from tests.factories import csv_bytes, csv_row, jsonl_bytes


def _write(tmp_path: Path, data: bytes, name: str = "pairs.csv") -> Path:
    path = tmp_path / name
    path.write_bytes(data)
    return path


def _run(path: Path, *args: str) -> tuple[str, str]:
    stdout, stderr = io.StringIO(), io.StringIO()
    call_command("import_pairs", str(path), *args, stdout=stdout, stderr=stderr)
    return stdout.getvalue(), stderr.getvalue()


def test_it_imports_into_an_existing_study(study, tmp_path):
    path = _write(tmp_path, csv_bytes([csv_row(), csv_row()]))
    stdout, _ = _run(path, "--study", "s1", "--no-progress")
    assert stdout == "Imported 2 new pairs.\n"
    assert CandidatePair.objects.filter(study=study).count() == 2


def test_it_imports_jsonl(study, tmp_path):
    path = _write(tmp_path, jsonl_bytes([csv_row()]), name="pairs.jsonl")
    _run(path, "--study", "s1", "--no-progress")
    assert CandidatePair.objects.filter(study=study).count() == 1


def test_it_creates_a_missing_study_with_the_default_taxonomy_and_says_so(db, tmp_path):
    path = _write(tmp_path, csv_bytes([csv_row()]))
    stdout, _ = _run(path, "--study", "reref-2026", "--no-progress")
    assert stdout == (
        "Created study 'reref-2026' with the default ReRef taxonomy (12 variations).\nImported 1 new pair.\n"
    )
    study = Study.objects.get(slug="reref-2026")
    assert study.name == "reref-2026"
    assert list(study.variations.values_list("key", flat=True)) == [key for key, _, _ in DEFAULT_TAXONOMY]
    assert len(DEFAULT_TAXONOMY) == 12
    assert study.pairs.count() == 1


def test_it_names_the_study_it_creates(db, tmp_path):
    path = _write(tmp_path, csv_bytes([csv_row()]))
    _run(path, "--study", "reref-2026", "--name", "ReRef reader study 2026", "--no-progress")
    assert Study.objects.get(slug="reref-2026").name == "ReRef reader study 2026"


def test_a_dry_run_creates_neither_the_study_nor_pairs(db, tmp_path):
    path = _write(tmp_path, csv_bytes([csv_row(), csv_row()]))
    stdout, _ = _run(path, "--study", "reref-2026", "--dry-run", "--no-progress")
    assert stdout == (
        "Would create study 'reref-2026' with the default ReRef taxonomy (12 variations).\nWould import 2 new pairs.\n"
    )
    assert not Study.objects.filter(slug="reref-2026").exists()
    assert not CandidatePair.objects.exists()


def test_a_dry_run_into_an_existing_study_imports_nothing(study, tmp_path):
    path = _write(tmp_path, csv_bytes([csv_row()]))
    stdout, _ = _run(path, "--study", "s1", "--dry-run", "--no-progress")
    assert stdout == "Would import 1 new pair.\n"
    assert not CandidatePair.objects.exists()


def test_it_says_when_a_reimport_changes_nothing(study, tmp_path):
    path = _write(tmp_path, csv_bytes([csv_row(), csv_row()]))
    _run(path, "--study", "s1", "--no-progress")
    stdout, _ = _run(path, "--study", "s1", "--no-progress")
    assert stdout == "Nothing to import: all 2 pairs in the file are already stored, unchanged.\n"
    assert CandidatePair.objects.count() == 2


def test_it_writes_every_problem_to_stderr_and_imports_nothing(study, tmp_path):
    rows = [csv_row(), csv_row(verdict="maybe"), csv_row(), csv_row(dataset="mimic")]
    path = _write(tmp_path, csv_bytes(rows))
    stderr = io.StringIO()
    with pytest.raises(CommandError, match=r"^Nothing was imported: 2 problem\(s\) in pairs\.csv\.$"):
        call_command("import_pairs", str(path), "--study", "s1", stdout=io.StringIO(), stderr=stderr)
    lines = stderr.getvalue().splitlines()
    assert len(lines) == 2
    assert lines[0].startswith("pairs.csv: line 3, field 'verdict': Invalid verdict 'maybe'. Use one of:")
    assert lines[1].startswith("pairs.csv: line 5, field 'dataset': Unknown dataset 'mimic'. Use one of:")
    assert not CandidatePair.objects.exists()


def test_it_writes_file_level_problems_to_stderr(study, tmp_path):
    path = _write(tmp_path, b"dataset,study_id\r\n\xff\r\n")
    stderr = io.StringIO()
    with pytest.raises(CommandError):
        call_command("import_pairs", str(path), "--study", "s1", stdout=io.StringIO(), stderr=stderr)
    assert stderr.getvalue().startswith("pairs.csv: line 2: Byte 0xff is not valid UTF-8.")


def test_it_does_not_create_the_study_when_the_file_is_rejected(db, tmp_path):
    path = _write(tmp_path, csv_bytes([csv_row(reref_variation="nope")]))
    with pytest.raises(CommandError):
        _run(path, "--study", "reref-2026")
    assert not Study.objects.exists()
    assert not CandidatePair.objects.exists()


def test_a_rejected_dry_run_fails_too(db, tmp_path):
    path = _write(tmp_path, csv_bytes([csv_row(verdict="nope")]))
    with pytest.raises(CommandError):
        _run(path, "--study", "reref-2026", "--dry-run")
    assert not Study.objects.exists()


def test_it_shows_a_progress_bar_on_stderr(study, tmp_path):
    path = _write(tmp_path, csv_bytes([csv_row() for _ in range(3)]))
    stdout, stderr = _run(path, "--study", "s1")
    assert "Importing: 100%" in stderr
    assert "3/3" in stderr
    assert "Importing:" not in stdout


def test_it_shows_no_progress_bar_when_asked_not_to(study, tmp_path):
    path = _write(tmp_path, csv_bytes([csv_row()]))
    _, stderr = _run(path, "--study", "s1", "--no-progress")
    assert stderr == ""


def test_it_reports_a_missing_file(db, tmp_path):
    missing = tmp_path / "nope.csv"
    with pytest.raises(CommandError, match=r"nope\.csv: no such file\."):
        _run(missing, "--study", "reref-2026")
    assert not Study.objects.exists()


def test_it_reports_a_directory_given_as_the_file(db, tmp_path):
    with pytest.raises(CommandError, match="no such file"):
        _run(tmp_path, "--study", "reref-2026")


def test_it_requires_the_study(db, tmp_path):
    path = _write(tmp_path, csv_bytes([csv_row()]))
    with pytest.raises(CommandError, match="--study"):
        call_command("import_pairs", str(path))
