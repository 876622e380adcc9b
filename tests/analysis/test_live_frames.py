"""study_frames: a study's rows as the DataFrames its default release would contain, plus its reads."""

from pathlib import Path

import pandas as pd
import pytest

from analysis.frames import READS, RELEASE_FILES, ReleaseFrames
from analysis.live import reader_key, study_frames
from analysis.release_folder import read_release
from annotation.models import Annotation, Example, RatingChoice, Study, Task
from exports.building import build_release
from tests.exports.test_build_release import hostile_study
from tests.factories import make_reading_study, rate_open_reads
from tests.module_data import rolled_back
from tests.replay import build_published_replay

pytestmark = pytest.mark.django_db


@pytest.fixture(scope="module")
def replay(django_db_setup, django_db_blocker):
    """The published replay, built once for the module and rolled back after it."""
    with rolled_back(django_db_blocker):
        study, _ = build_published_replay(slug="frames-replay")
        yield study


def released_frames(study: Study, folder: Path, *, text: bool = True, **options) -> ReleaseFrames:
    """The release's six files, built by the release service and read by analyze_release's reader."""
    build_release(Study.objects.get(pk=study.pk), folder, license_text="CC0\n", **options)
    return read_release(folder, text=text)


def assert_same_as_release(frames: ReleaseFrames, released: ReleaseFrames) -> None:
    for path in RELEASE_FILES:
        name = Path(path).stem
        pd.testing.assert_frame_equal(getattr(frames, name), getattr(released, name), check_exact=True, obj=name)


def test_the_replay_frames_equal_its_release(replay, tmp_path):
    frames = study_frames(replay)

    assert_same_as_release(frames, released_frames(replay, tmp_path / "release"))
    assert len(frames.task1_full) == 573 and len(frames.task2_full) == 282
    assert (frames.task1_consensus["n_annotations"] == "2").sum() == 147
    assert (frames.task2_consensus["n_annotations"] == "2").sum() == 78


def test_without_text_the_replay_frames_equal_its_release_read_without_text(replay, tmp_path):
    frames = study_frames(replay, text=False)

    assert_same_as_release(frames, released_frames(replay, tmp_path / "release", text=False))
    assert "findings" not in frames.task1_full.columns and "rationale" not in frames.task2_disagreed.columns


def test_hostile_text_survives_exactly_as_in_the_release(tmp_path):
    study = hostile_study()

    frames = study_frames(study)

    assert_same_as_release(frames, released_frames(study, tmp_path / "release"))
    assert frames.task1_disagreed["rationale"].str.contains("\r\n").all()


def test_a_dataset_filter_gives_the_restricted_release(replay, tmp_path):
    frames = study_frames(replay, datasets=["mimic-cxr"])
    empty = study_frames(replay, datasets=["iu-xray"])

    assert_same_as_release(frames, released_frames(replay, tmp_path / "mimic", datasets=["mimic-cxr"]))
    assert_same_as_release(empty, released_frames(replay, tmp_path / "iu", datasets=["iu-xray"]))
    assert all(len(getattr(empty, name)) == 0 for name in ("task1_full", "task2_consensus"))
    assert list(empty.reads.columns) == READS and len(empty.reads) == 0


def test_examples_without_consensus_are_left_out_of_every_frame():
    study, _, _ = make_reading_study(pairs=1, readers=4)
    alternative, original = Example.objects.filter(study=study, task=Task.REALISM).order_by("report_type")
    rate_open_reads(original, RatingChoice.REALISTIC, RatingChoice.REALISTIC)
    rate_open_reads(alternative, RatingChoice.REALISTIC, RatingChoice.MINOR_ISSUES)  # waiting for a third read

    frames = study_frames(study)

    assert frames.task1_consensus["report_type"].tolist() == ["original"]
    assert frames.task1_full["report_type"].tolist() == ["original", "original"]
    assert frames.reads["report_type"].tolist() == ["original", "original"]
    assert len(frames.task2_full) == 0 and len(frames.reads.query("task == 'task2'")) == 0


def test_the_reads_carry_slots_and_opaque_reader_keys_never_accounts(replay):
    reads = study_frames(replay).reads

    assert list(reads.columns) == READS
    assert all(pd.api.types.is_string_dtype(dtype) for dtype in reads.dtypes)
    assert len(reads) == 573 + 282
    assert reads.groupby("task")["slot"].value_counts().to_dict() == {
        ("task1", "1"): 240,
        ("task1", "2"): 240,
        ("task1", "3"): 93,
        ("task2", "1"): 120,
        ("task2", "2"): 120,
        ("task2", "3"): 42,
    }
    annotations = Annotation.objects.filter(example__study=replay).select_related("reader")
    usernames = {a.reader.username for a in annotations}
    user_ids = {str(a.reader_id) for a in annotations}
    assert not set(reads["reader"]) & (usernames | user_ids)
    assert set(reads["reader"]) == {reader_key(replay, a.reader_id) for a in annotations}
    assert not reads.apply(lambda column: column.isin(usernames)).any().any()
    # The same read, as in the full file: one reader per slot of an example, labels as shown.
    assert set(reads["rating"]) <= set(dict(RatingChoice.choices).values())
    assert not reads.duplicated(["task", "dataset", "study_id", "reref_variation", "report_type", "slot"]).any()
    assert not reads.duplicated(["task", "dataset", "study_id", "reref_variation", "report_type", "reader"]).any()


def test_each_read_is_its_annotation_in_key_then_slot_order(replay):
    """The reads come after the full files' records (exports.rows.READ_COLUMNS): each row is one settled
    annotation of an example with a consensus, with its slot, rating label, rationale and time."""
    labels = dict(RatingChoice.choices)
    annotations = Annotation.objects.filter(
        example__study=replay, voided_at__isnull=True, settled_at__isnull=False, example__consensus__isnull=False
    ).select_related("example__pair__dataset", "example__pair__variation", "assignment")
    expected = pd.DataFrame(
        [
            (
                "task1" if a.example.task == Task.REALISM else "task2",
                a.example.pair.dataset.key,
                a.example.pair.source_study_id,
                a.example.pair.variation.key,
                a.example.report_type,
                str(a.assignment.slot),
                reader_key(replay, a.reader_id),
                labels[a.rating],
                a.rationale,
                "" if a.duration_ms is None else str(a.duration_ms),
            )
            for a in annotations
        ],
        columns=READS,
    )
    expected = expected.sort_values(READS[:6]).reset_index(drop=True).astype(str)

    reads = study_frames(replay).reads

    assert expected["slot"].nunique() == 3 and expected["task"].nunique() == 2 and expected["rationale"].ne("").any()
    pd.testing.assert_frame_equal(reads, expected, check_exact=True)


def test_a_readers_key_differs_between_studies():
    first, readers, _ = make_reading_study(pairs=1, readers=1, assign=False)
    second, _, _ = make_reading_study(pairs=1, readers=1, assign=False)

    assert reader_key(first, readers[0].pk) != reader_key(second, readers[0].pk)
    assert reader_key(first, readers[0].pk) == reader_key(first, readers[0].pk)
