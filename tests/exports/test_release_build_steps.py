"""The steps of a release build: its progress, its work folder, the judges' section of its README."""

from pathlib import Path

import pytest

from annotation.models import Annotation, Example, RatingChoice, Role, Study, Task
from consensus.services import void_annotation
from exports import building
from exports.building import build_release
from tests.factories import make_reading_study, make_user, rate_open_reads

pytestmark = pytest.mark.django_db

LICENSE = "Licence text.\n"


def rated_study() -> Study:
    """Two pairs, every example rated to a unanimous consensus.

    Enough readers for every third read (the default): a voided rating is read again by another reader.
    """
    study, _, _ = make_reading_study(pairs=2)
    for example in Example.objects.filter(study=study).order_by("pk"):
        rating = RatingChoice.REALISTIC if example.task == Task.REALISM else RatingChoice.EQUIVALENT
        rate_open_reads(example, rating, rating)
    return study


def test_the_progress_steps_file_by_file_and_counts_no_voided_or_unsettled_rating(tmp_path):
    study = rated_study()
    example = Example.objects.filter(study=study, task=Task.REALISM).order_by("pk").first()
    # One rating voided (its example goes back for another read), and that read rated while its
    # reader can still take it back: neither is in the release, so neither is counted.
    voided = example.annotations.order_by("pk").first()
    void_annotation(voided.public_id, actor=make_user(Role.COORDINATOR), reason="Wrong example.")
    Study.objects.filter(pk=study.pk).update(undo_window_seconds=300)
    rate_open_reads(Example.objects.get(pk=example.pk), RatingChoice.REALISTIC)
    in_study = Annotation.objects.filter(example__study=study)
    assert (in_study.filter(voided_at__isnull=False).count(), in_study.filter(settled_at__isnull=True).count()) == (
        1,
        1,
    )

    calls = []
    summary = build_release(
        Study.objects.get(pk=study.pk),
        tmp_path / "release",
        license_text=LICENSE,
        include_unfinished=True,
        progress=lambda done, total: calls.append((done, total)),
    )

    counts = summary.row_counts
    task1 = [counts["task1/task1_full.csv"], counts["task1/task1_consensus.csv"]]
    task2 = [counts["task2/task2_full.csv"], counts["task2/task2_consensus.csv"]]
    # Task 1: 4 examples, 2 settled ratings each but the one re-opened (1); Task 2: 2 examples, 2 each.
    assert (task1, task2) == ([7, 4], [4, 2])
    total = sum(task1) + sum(task2)
    # After each task's full file and after its consensus file, then the end.
    steps = [task1[0], sum(task1), sum(task1) + task2[0], total, total]
    assert calls == [(step, total) for step in steps]


def test_the_progress_advances_every_chunk_of_a_full_file(tmp_path, monkeypatch):
    # A full file of a real study runs to tens of thousands of rows: its progress moves every
    # CHUNK rows, not only when the file is done.
    monkeypatch.setattr(building, "CHUNK", 3)
    study = rated_study()
    calls = []
    summary = build_release(
        study, tmp_path / "release", license_text=LICENSE, progress=lambda done, total: calls.append((done, total))
    )

    counts = summary.row_counts
    assert [counts[f"task{n}/task{n}_{kind}.csv"] for n in (1, 2) for kind in ("full", "consensus")] == [8, 4, 4, 2]
    # Task 1's full file: 3, 6, then the last 2; its consensus file: 4. Task 2's: 3, then 1; then 2.
    assert calls == [(done, 18) for done in (3, 6, 8, 12, 15, 16, 18, 18)]


def test_the_first_release_creates_the_folders_above_it(tmp_path):
    # A fresh server: not even the media folder exists yet.
    out = tmp_path / "media" / "releases" / "study" / "1.0.0"
    build_release(rated_study(), out, license_text=LICENSE)
    assert (out / "task1" / "task1_full.csv").is_file()
    assert [p.name for p in (tmp_path / "media" / "releases" / "study").iterdir()] == ["1.0.0"]


def test_the_release_is_written_in_a_hidden_work_folder_beside_it_and_appears_whole(tmp_path):
    study = rated_study()
    out = tmp_path / "release"
    seen = []

    def progress(done, total):
        if done < total:
            seen.append((out.exists(), [p.name for p in tmp_path.iterdir()]))

    build_release(study, out, license_text=LICENSE, progress=progress)

    assert seen
    for destination_exists, beside in seen:
        # Under its own name only when it is whole; meanwhile a hidden folder that says what it is.
        assert not destination_exists
        assert len(beside) == 1 and beside[0].startswith(".release-"), beside
    assert [p.name for p in tmp_path.iterdir()] == ["release"]


@pytest.mark.parametrize("include_judges", [False, True])
def test_the_readme_has_the_judges_section_exactly_when_the_judges_are_included(tmp_path, include_judges):
    out = tmp_path / "release"
    build_release(rated_study(), out, license_text=LICENSE, include_judges=include_judges)
    readme = Path(out / "README.md").read_text(encoding="utf-8")
    assert ("## Automated judges" in readme) is include_judges
    assert ("same blinded interface: 0 judges. They never took part" in readme) is include_judges
