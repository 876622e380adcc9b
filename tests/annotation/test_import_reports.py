"""import_reports: each dataset's own layout, read from fixture files written in that layout."""

import gzip
import json
import shutil
import zipfile
from pathlib import Path

import pytest

from annotation.importing import ImportRejected
from annotation.models import Dataset, OriginalReport
from annotation.reports import mimic_report_sections
from annotation.services import NO_FINDINGS_OR_IMPRESSION, import_reports

DATASETS = Path(__file__).parent / "datasets"
MIMIC = DATASETS / "mimic-cxr"
GOLDEN = json.loads((MIMIC / "golden.json").read_text())["reports"]
SECTIONS = ("indication", "comparison", "technique", "findings", "impression")

pytestmark = pytest.mark.django_db


def stored(dataset: str) -> dict[str, dict[str, str]]:
    return {
        values.pop("source_study_id"): values
        for values in OriginalReport.objects.filter(dataset__key=dataset).values("source_study_id", *SECTIONS)
    }


def dataset(key: str) -> Dataset:
    return Dataset.objects.get(key=key)


def mimic_zip(tmp_path: Path, folder: Path = MIMIC / "files") -> Path:
    """The reports folder zipped as MIMIC-CXR distributes it (members under files/)."""
    path = tmp_path / "mimic-cxr-reports.zip"
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as archive:
        for file in sorted(folder.rglob("*")):
            if file.is_file():
                archive.write(file, Path("files") / file.relative_to(folder))
    return path


# --- MIMIC-CXR ----------------------------------------------------------------------------------


@pytest.mark.parametrize("study_id", sorted(GOLDEN))
def test_the_mimic_split_matches_the_golden_set(study_id):
    expected = GOLDEN[study_id]
    path = next((MIMIC / "files").glob(f"p*/p*/s{study_id}.txt"))
    sections = mimic_report_sections(path.read_text())
    if expected.get("skipped"):
        assert not sections["findings"] and not sections["impression"]
    else:
        assert sections == {name: expected[name] for name in SECTIONS}


def test_it_imports_the_mimic_folder_as_the_golden_set_says(db):
    report = import_reports(dataset("mimic-cxr"), MIMIC / "files")
    kept = {sid: {n: v[n] for n in SECTIONS} for sid, v in GOLDEN.items() if not v.get("skipped")}
    assert stored("mimic-cxr") == kept
    assert report.reports == len(GOLDEN)
    assert report.created == len(kept)
    assert report.skipped == {NO_FINDINGS_OR_IMPRESSION: ["50000005", "50000013"]}
    assert report.with_section["impression"] == sum(1 for v in kept.values() if v["impression"])
    assert report.with_section["technique"] == 1


def test_it_imports_the_zip_as_distributed_like_the_folder(db, tmp_path):
    report = import_reports(dataset("mimic-cxr"), mimic_zip(tmp_path))
    assert report.created == 13
    assert stored("mimic-cxr")["50000001"]["comparison"] == "___"
    source = OriginalReport.objects.get(source_study_id="50000001").source
    assert source == "files/p10/p10000001/s50000001.txt"


def test_a_second_import_changes_nothing_and_says_so(db, tmp_path):
    import_reports(dataset("mimic-cxr"), mimic_zip(tmp_path))
    first = list(OriginalReport.objects.values_list("pk", "created_at").order_by("pk"))
    again = import_reports(dataset("mimic-cxr"), MIMIC / "files")
    assert (again.created, again.unchanged) == (0, 13)
    assert list(OriginalReport.objects.values_list("pk", "created_at").order_by("pk")) == first
    assert again.summary_lines()[0].startswith("15 mimic-cxr reports read: nothing to store, 13 already stored")


def test_dry_run_stores_nothing_and_reports_the_same(db):
    report = import_reports(dataset("mimic-cxr"), MIMIC / "files", dry_run=True)
    assert report.created == 13
    assert not OriginalReport.objects.exists()
    assert report.summary_lines()[0].startswith("15 mimic-cxr reports read: would store 13 new")


def test_split_csv_keeps_only_the_split(db, tmp_path):
    split = tmp_path / "mimic-cxr-2.0.0-split.csv.gz"
    with gzip.open(split, "wt") as handle:
        handle.write("dicom_id,study_id,subject_id,split\n")
        handle.write("d1,50000001,10000001,test\nd2,50000001,10000001,test\nd3,50000002,10000001,train\n")
        handle.write("d4,50000011,11000004,test\nd5,50000014,12000005,validate\n")
    report = import_reports(dataset("mimic-cxr"), mimic_zip(tmp_path), split_csv=split, split="test")
    assert sorted(stored("mimic-cxr")) == ["50000001", "50000011"]
    assert report.notes == ["13 reports outside the split were left out."]
    with pytest.raises(ImportRejected, match=r"No study is in split .tset.\. The file.s splits are: test, train"):
        import_reports(dataset("mimic-cxr"), MIMIC / "files", split_csv=split, split="tset")
    with pytest.raises(ImportRejected, match="Give both the split file"):
        import_reports(dataset("mimic-cxr"), MIMIC / "files", split="test")


def broken_copy(tmp_path: Path) -> Path:
    folder = tmp_path / "files"
    shutil.copytree(MIMIC / "files", folder)
    return folder


def test_a_bad_report_file_names_file_and_line_and_nothing_is_stored(db, tmp_path):
    folder = broken_copy(tmp_path)
    (folder / "p12/p12000005/s50000014.txt").write_bytes(b" FINAL REPORT\n INDICATION: caf\xe9\n")
    (folder / "p10/p10000002/s50000006.txt").write_bytes(b" FINAL REPORT\n\n\n FINDINGS: \x00\n")
    with pytest.raises(ImportRejected) as rejected:
        import_reports(dataset("mimic-cxr"), mimic_zip(tmp_path, folder))
    messages = [str(problem) for problem in rejected.value.problems]
    assert messages == [
        "files/p10/p10000002/s50000006.txt, line 4: The report contains a NUL byte: it is not a text file.",
        "files/p12/p12000005/s50000014.txt, line 2: Byte 0xe9 is not valid UTF-8. Take the file from the dataset "
        "as distributed.",
    ]
    assert not OriginalReport.objects.exists()


def test_a_problem_after_thousands_of_written_reports_rolls_them_all_back(db, tmp_path):
    folder = tmp_path / "files"
    for number in range(5_100):
        path = folder / f"p10/p10{number:06d}/s5{number:07d}.txt"
        path.parent.mkdir(parents=True)
        path.write_text(f" FINAL REPORT\n FINDINGS:  Case {number}.\n")
    (folder / "p10/p10005099/s55099999.txt").write_bytes(b"\xff")
    with pytest.raises(ImportRejected, match=r"s55099999\.txt, line 1: Byte 0xff"):
        import_reports(dataset("mimic-cxr"), folder)
    assert not OriginalReport.objects.exists()


def test_a_report_listed_twice_is_an_error_naming_both(db, tmp_path):
    folder = broken_copy(tmp_path)
    (folder / "p19/p19000001").mkdir(parents=True)
    shutil.copy(folder / "p10/p10000001/s50000001.txt", folder / "p19/p19000001/s50000001.txt")
    with pytest.raises(ImportRejected) as rejected:
        import_reports(dataset("mimic-cxr"), folder)
    (problem,) = rejected.value.problems
    assert problem.file == "p19/p19000001/s50000001.txt"
    assert "Study 50000001 is read a second time (first from p10/p10000001/s50000001.txt)" in problem.message


def test_a_stored_report_is_never_changed_by_an_import(db, tmp_path):
    import_reports(dataset("mimic-cxr"), MIMIC / "files")
    folder = broken_copy(tmp_path)
    (folder / "p10/p10000001/s50000002.txt").write_text(" FINAL REPORT\n FINDINGS:  Something else.\n")
    with pytest.raises(ImportRejected) as rejected:
        import_reports(dataset("mimic-cxr"), folder)
    (problem,) = rejected.value.problems
    assert problem.file == "p10/p10000001/s50000002.txt"
    assert problem.message.startswith("Study 50000002 is already stored with different text.")
    assert stored("mimic-cxr")["50000002"]["impression"] == "Mild pulmonary edema."


def test_a_path_that_is_neither_folder_nor_zip_is_refused(db, tmp_path):
    path = tmp_path / "reports.txt"
    path.write_text("not a zip")
    with pytest.raises(ImportRejected, match="neither a folder nor a zip file"):
        import_reports(dataset("mimic-cxr"), path)
    with pytest.raises(ImportRejected, match="no such file or folder"):
        import_reports(dataset("mimic-cxr"), tmp_path / "missing.zip")


# --- IU X-ray -----------------------------------------------------------------------------------


def test_it_imports_indiana_reports_csv(db):
    report = import_reports(dataset("iu-xray"), DATASETS / "iu-xray/indiana_reports.csv")
    reports = stored("iu-xray")
    assert sorted(reports) == ["1", "2", "3", "5"]
    assert reports["1"] == {
        "indication": "Positive TB test",
        "comparison": "None.",
        "technique": "Xray Chest PA and Lateral",
        "findings": "The cardiac silhouette and mediastinum size are within normal limits. There is no pulmonary "
        "edema. There are no XXXX of a pleural effusion.",
        "impression": "Normal chest x-XXXX.",
    }
    assert reports["2"]["findings"] == "Borderline cardiomegaly.\nMidline sternotomy XXXX. Clear lungs."
    assert reports["3"]["technique"] == "PA and lateral chest XXXX, XXXX XXXX"
    assert report.skipped == {NO_FINDINGS_OR_IMPRESSION: ["4"]}
    assert report.with_section == {"indication": 4, "comparison": 4, "technique": 5, "findings": 3, "impression": 3}


def test_an_iu_file_without_its_columns_names_them(db, tmp_path):
    path = tmp_path / "indiana_reports.csv"
    path.write_text("uid,image,indication,findings,impression\n1,x,y,z,w\n")
    with pytest.raises(ImportRejected) as rejected:
        import_reports(dataset("iu-xray"), path)
    (problem,) = rejected.value.problems
    assert (problem.file, problem.line, problem.field) == ("indiana_reports.csv", 1, "comparison")


def test_a_broken_csv_row_names_file_and_line(db, tmp_path):
    path = tmp_path / "indiana_reports.csv"
    path.write_text(
        'uid,MeSH,Problems,image,indication,comparison,findings,impression\n1,a,b,c,d,e,"f\ng",h\n2,a,b,c,d,e,"f"x,h\n'
    )
    with pytest.raises(ImportRejected) as rejected:
        import_reports(dataset("iu-xray"), path)
    (problem,) = rejected.value.problems
    assert (problem.file, problem.line) == ("indiana_reports.csv", 4)
    assert not OriginalReport.objects.exists()


# --- CheXpert Plus ------------------------------------------------------------------------------


def test_it_imports_the_chexpert_plus_csv_one_report_per_study(db):
    report = import_reports(dataset("chexpert-plus"), DATASETS / "chexpert-plus/df_chexpert_plus_240401.csv")
    reports = stored("chexpert-plus")
    assert sorted(reports) == ["patient00001/study1", "patient00002/study1", "patient64541/study1"]
    assert reports["patient00001/study1"] == {
        "indication": "Fever, eval for pneumonia.",
        "comparison": "None.",
        "technique": "AP portable.",
        "findings": "Lungs are clear.\nNo effusion.",
        "impression": "1. No acute cardiopulmonary process.",
    }
    assert reports["patient00002/study1"]["indication"] == "Cough."
    assert reports["patient64541/study1"]["indication"] == 'Chest pain, "rule out" pneumothorax.'
    assert report.reports == 5
    assert report.skipped == {
        "its image rows hold different reports": ["patient00003/study2"],
        NO_FINDINGS_OR_IMPRESSION: ["patient00004/study1"],
    }


def test_a_chexpert_row_without_a_study_path_names_line_and_field(db, tmp_path):
    path = tmp_path / "df_chexpert_plus_240401.csv"
    path.write_text(
        "path_to_image,section_findings,section_impression\n"
        "train/patient00001/study1/view1_frontal.jpg,a,b\nview1_frontal.jpg,a,b\n"
    )
    with pytest.raises(ImportRejected) as rejected:
        import_reports(dataset("chexpert-plus"), path)
    (problem,) = rejected.value.problems
    assert (problem.file, problem.line, problem.field) == ("df_chexpert_plus_240401.csv", 3, "path_to_image")


# --- ReXGradient-160K ---------------------------------------------------------------------------

REX_EXPECTED = {
    "1.2.826.0.1.1000.1": {
        "indication": "Cough and fever.",
        "comparison": "",
        "technique": "",
        "findings": "The lungs are clear. The heart is normal in size.",
        "impression": "No acute cardiopulmonary abnormality.",
    },
    "1.2.826.0.1.1000.2": {
        "indication": "",
        "comparison": "Radiograph ___.",
        "technique": "",
        "findings": "",
        "impression": "Stable right pleural effusion.",
    },
    "1.2.826.0.1.1000.4": {
        "indication": 'Shortness of breath, "SOB".',
        "comparison": "",
        "technique": "",
        "findings": "Mild interstitial prominence,\nunchanged.",
        "impression": "",
    },
}


@pytest.mark.parametrize("name", ["test_metadata.csv", "test_metadata_view_position.json"])
def test_it_imports_rexgradient_metadata_none_is_missing(db, name):
    report = import_reports(dataset("rexgradient"), DATASETS / "rexgradient" / name)
    assert stored("rexgradient") == REX_EXPECTED
    assert report.skipped == {NO_FINDINGS_OR_IMPRESSION: ["1.2.826.0.1.1000.3"]}


def test_rexgradient_json_lines_and_lists_are_read_too(db, tmp_path):
    records = list(json.loads((DATASETS / "rexgradient/test_metadata_view_position.json").read_text()).values())
    (tmp_path / "list.json").write_text(json.dumps(records))
    import_reports(dataset("rexgradient"), tmp_path / "list.json")
    assert stored("rexgradient") == REX_EXPECTED
    (tmp_path / "more.jsonl").write_text(json.dumps({**records[0], "StudyInstanceUid": "9.9"}) + "\n\n{oops\n")
    with pytest.raises(ImportRejected) as rejected:
        import_reports(dataset("rexgradient"), tmp_path / "more.jsonl")
    (problem,) = rejected.value.problems
    assert (problem.file, problem.line) == ("more.jsonl", 3)


def test_a_rexgradient_json_lines_record_with_a_key_twice_is_refused_naming_it(db, tmp_path):
    records = list(json.loads((DATASETS / "rexgradient/test_metadata_view_position.json").read_text()).values())
    line = json.dumps(records[0])[:-1] + ', "Findings": "Something else."}'
    (tmp_path / "twice.jsonl").write_text(json.dumps(records[1]) + "\n" + line + "\n")
    with pytest.raises(ImportRejected) as rejected:
        import_reports(dataset("rexgradient"), tmp_path / "twice.jsonl")
    (problem,) = rejected.value.problems
    assert (problem.file, problem.line, problem.field) == ("twice.jsonl", 2, "Findings")
    assert not stored("rexgradient")


def test_a_rexgradient_record_without_its_study_id_is_named(db, tmp_path):
    path = tmp_path / "test_metadata_view_position.json"
    path.write_text(json.dumps({"GRDN1": {"Indication": "x", "Comparison": "", "Findings": "y", "Impression": ""}}))
    with pytest.raises(ImportRejected) as rejected:
        import_reports(dataset("rexgradient"), path)
    (problem,) = rejected.value.problems
    assert problem.field == "StudyInstanceUid"
    assert "Entry 'GRDN1' has no StudyInstanceUid" in problem.message


def test_a_dataset_without_a_reader_is_refused(db):
    custom = Dataset.objects.create(key="padchest", name="PadChest")
    with pytest.raises(ImportRejected, match="cannot read padchest's own files"):
        import_reports(custom, DATASETS)
