"""Judges and the release: the default release never changes; --include-judges adds two documented files."""

import csv
import io
import json
from pathlib import Path

import pytest
from django.conf import settings
from django.core.management import call_command
from frictionless import Package

from annotation.models import Example, RatingChoice, Task
from exports.building import build_release
from judges.models import JudgeRead
from tests.factories import make_reading_study, rate_open_reads
from tests.judges.helpers import enrol, make_judge, run_judge

pytestmark = pytest.mark.django_db

LICENSE = "Licence text.\n"
TASK_FILES = [f"task{n}/task{n}_{kind}.csv" for n in (1, 2) for kind in ("full", "disagreed", "consensus")]
JUDGE_HEADERS = {
    "judges/task1_judges.csv": "dataset,study_id,reref_variation,report_type,judge_index,rating,rationale",
    "judges/task2_judges.csv": "dataset,study_id,reref_variation,judge_index,report_a_type,rating,rationale",
}


def files(folder: Path) -> dict[str, bytes]:
    return {p.relative_to(folder).as_posix(): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


def rows(data: bytes) -> list[dict]:
    return list(csv.DictReader(io.StringIO(data.decode("utf-8"), newline="")))


def rated_study():
    """Two pairs rated to consensus, but one Task 2 example left with one read (no consensus)."""
    # Enough readers for every third read (the default): every example but the last takes one.
    study, _, _ = make_reading_study(pairs=2)
    examples = list(Example.objects.filter(study=study).order_by("pk"))
    for example in examples[:-1]:
        first = RatingChoice.REALISTIC if example.task == Task.REALISM else RatingChoice.EQUIVALENT
        second = RatingChoice.MINOR_ISSUES if example.task == Task.REALISM else RatingChoice.MINOR_DISCREPANCY
        rate_open_reads(example, first, second, second)
    rate_open_reads(examples[-1], RatingChoice.EQUIVALENT)
    return study


def test_judges_leave_the_default_release_byte_identical_and_include_judges_adds_two_files(tmp_path):
    study = rated_study()
    without = tmp_path / "without"
    build_release(study, without, license_text=LICENSE)

    judges = [make_judge("gpt-like-judge"), make_judge("rules-judge")]
    for judge in judges:
        enrol(study, judge)
        run_judge(judge, choose=lambda item: item["labels"][1]["value"])
    with_judges_default = tmp_path / "with-judges-default"
    build_release(study, with_judges_default, license_text=LICENSE)
    included = tmp_path / "included"
    summary = build_release(study, included, license_text=LICENSE, include_judges=True)

    assert files(with_judges_default) == files(without)
    assert not (with_judges_default / "judges").exists()
    extra = files(included)
    assert {path: extra[path] for path in TASK_FILES} == {path: files(without)[path] for path in TASK_FILES}
    for path, header in JUDGE_HEADERS.items():
        assert extra[path].startswith(header.encode() + b"\r\n")
        assert f" {path}\n" in extra["SHA256SUMS.txt"].decode()
        assert f"`{path}`" in extra["README.md"].decode()
    task1, task2 = rows(extra["judges/task1_judges.csv"]), rows(extra["judges/task2_judges.csv"])
    # The README's table of files lists both, with their rows.
    readme = extra["README.md"].decode()
    for path, task, count in (("judges/task1_judges.csv", 1, len(task1)), ("judges/task2_judges.csv", 2, len(task2))):
        assert (
            f"| `{path}` | {count} | rating of a Task {task} example by an automated judge (not a radiologist; "
            "see below) |\n"
        ) in readme
    released = JudgeRead.objects.rated().filter(example__consensus__isnull=False)
    assert len(task1) == released.filter(task=Task.REALISM).count() == 2 * 4
    assert len(task2) == released.filter(task=Task.EQUIVALENCE).count() == 2 * 1
    assert {r["judge_index"] for r in task1} == {r["judge_index"] for r in task2} == {"0", "1"}
    assert {r["rating"] for r in task1} == {"Minor Issues"} and {r["rating"] for r in task2} == {"Minor Discrepancy"}
    assert {r["report_a_type"] for r in task2} <= {"original", "alternative"}
    assert summary.judges == 2
    for data in extra.values():
        for judge in judges:
            assert judge.username.encode() not in data
    keys = [(r["dataset"], r["study_id"], r["reref_variation"], r["report_type"], r["judge_index"]) for r in task1]
    assert keys == sorted(keys)


def test_a_release_with_judges_validates_against_the_datapackage(tmp_path):
    study = rated_study()
    judge = make_judge()
    enrol(study, judge)
    run_judge(judge, choose=lambda item: item["labels"][2]["value"])
    folder = tmp_path / "release"
    build_release(study, folder, license_text=LICENSE, include_judges=True)
    descriptor = json.loads((Path(settings.BASE_DIR) / "exports" / "datapackage.json").read_text(encoding="utf-8"))

    report = Package(descriptor, basepath=str(folder)).validate()

    assert report.valid, report.flatten(["type", "fieldName", "rowNumber", "note"])[:10]


def test_export_release_include_judges_writes_the_judges_folder(tmp_path, capsys):
    study = rated_study()
    study.license_text = LICENSE
    study.save()
    judge = make_judge()
    enrol(study, judge, tasks=[Task.EQUIVALENCE])
    run_judge(judge)

    call_command(
        "export_release", "--study", study.slug, "--out", str(tmp_path / "r"), "--include-judges", "--no-progress"
    )

    out = capsys.readouterr().out
    assert "judges/task2_judges.csv: 1 rows" in out  # the example without a consensus is left out
    assert "judges/task1_judges.csv: 0 rows" in out
    assert (tmp_path / "r" / "judges" / "task1_judges.csv").read_bytes() == JUDGE_HEADERS[
        "judges/task1_judges.csv"
    ].encode() + b"\r\n"


def test_the_judges_files_hold_the_chosen_datasets_only(tmp_path):
    from annotation.models import CandidatePair, Dataset

    study = rated_study()
    moved = CandidatePair.objects.filter(study=study).order_by("-pk").first()  # its Task 2 has no consensus
    CandidatePair.objects.filter(pk=moved.pk).update(dataset=Dataset.objects.get(key="iu-xray"))
    judge = make_judge()
    enrol(study, judge)
    run_judge(judge)

    folder = tmp_path / "release"
    build_release(study, folder, license_text=LICENSE, include_judges=True, datasets=["mimic-cxr"])

    released = files(folder)
    for path in JUDGE_HEADERS:
        judged = rows(released[path])
        assert judged, path
        assert {r["dataset"] for r in judged} == {"mimic-cxr"}, path
    assert moved.source_study_id not in {r["study_id"] for r in rows(released["judges/task1_judges.csv"])}


def test_the_judges_files_follow_include_unfinished(tmp_path):
    study = rated_study()
    judge = make_judge()
    enrol(study, judge)
    run_judge(judge)
    unfinished = Example.objects.get(study=study, consensus__isnull=True)

    finished_only, everything = tmp_path / "finished", tmp_path / "everything"
    build_release(study, finished_only, license_text=LICENSE, include_judges=True)
    build_release(study, everything, license_text=LICENSE, include_judges=True, include_unfinished=True)

    def task2_ids(folder):
        return [r["study_id"] for r in rows(files(folder)["judges/task2_judges.csv"])]

    assert unfinished.pair.source_study_id not in task2_ids(finished_only)
    assert unfinished.pair.source_study_id in task2_ids(everything)
