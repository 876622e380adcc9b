"""manage.py import_reports: the service with a progress bar, a summary and errors by file and line."""

from io import StringIO
from pathlib import Path

import pytest
from django.core.management import CommandError, call_command

from annotation.models import OriginalReport

DATASETS = Path(__file__).parent / "datasets"

pytestmark = pytest.mark.django_db


def run(*args, **options) -> tuple[str, str]:
    out, err = StringIO(), StringIO()
    call_command("import_reports", *args, stdout=out, stderr=err, **options)
    return out.getvalue(), err.getvalue()


def test_it_prints_the_summary_with_sections_and_skipped_ids(tmp_path):
    skipped = tmp_path / "skipped.tsv"
    out, err = run(str(DATASETS / "mimic-cxr/files"), dataset="mimic-cxr", skipped_ids=str(skipped))
    assert out.splitlines() == [
        "15 mimic-cxr reports read: stored 13 new, 0 already stored unchanged, 2 skipped.",
        "With each section: indication 13, comparison 3, technique 1, findings 10, impression 12 (of 15).",
        "Skipped, neither Findings nor Impression: 2 (50000005, 50000013).",
        f"Skipped ids written to {skipped}.",
    ]
    assert "Reading" in err  # the progress bar
    assert skipped.read_text() == (
        "50000005\tneither Findings nor Impression\n50000013\tneither Findings nor Impression\n"
    )
    assert OriginalReport.objects.count() == 13


def test_dry_run_and_no_progress(tmp_path):
    out, err = run(str(DATASETS / "iu-xray/indiana_reports.csv"), dataset="iu-xray", dry_run=True, no_progress=True)
    assert out.startswith("5 iu-xray reports read: would store 4 new")
    assert err == ""
    assert not OriginalReport.objects.exists()


def test_errors_name_file_line_and_field_and_nothing_is_stored(tmp_path):
    path = tmp_path / "df_chexpert_plus_240401.csv"
    path.write_text("path_to_image,section_findings\nx,y\n")
    with pytest.raises(CommandError, match=r"Nothing was stored: 1 problem\(s\) in df_chexpert_plus_240401\.csv\."):
        run(str(path), dataset="chexpert-plus", no_progress=True)
    err = StringIO()
    with pytest.raises(CommandError):
        call_command("import_reports", str(path), dataset="chexpert-plus", no_progress=True, stderr=err)
    assert err.getvalue().startswith(
        "df_chexpert_plus_240401.csv, line 1, field 'section_impression': Required column 'section_impression' is "
        "missing"
    )
    assert not OriginalReport.objects.exists()


def test_an_unknown_dataset_key_is_refused_by_the_parser():
    with pytest.raises(CommandError, match="invalid choice: 'padchest'"):
        run(str(DATASETS), dataset="padchest")
