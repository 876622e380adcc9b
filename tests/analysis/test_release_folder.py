import pytest

from analysis.frames import TASK1_FULL, TASK2_FULL
from analysis.release_folder import NotARelease, read_release
from tests.analysis.helpers import make_frames, write_release


@pytest.fixture
def release(tmp_path):
    frames = make_frames(
        task1=[("hedging", "00123", "original", (0, 0), None)], task2=[("hedging", "00123", (1, 1), None)]
    )
    return write_release(frames, tmp_path / "release")


def test_it_reads_every_column_as_text_so_leading_zeros_and_none_survive(tmp_path):
    frames = make_frames(task1=[("hedging", "007", "original", (0, 0), None)])
    frames.task1_full.loc[:, "findings"] = "None"
    frames.task1_full.loc[:, "impression"] = "NA"
    folder = write_release(frames, tmp_path / "release")

    read = read_release(folder)

    assert read.task1_full["study_id"].tolist() == ["007", "007"]
    assert read.task1_full["findings"].tolist() == ["None", "None"]
    assert read.task1_full["impression"].tolist() == ["NA", "NA"]
    assert read.task1_full["indication"].tolist() == ["", ""]
    assert read.task1_full.columns.tolist() == TASK1_FULL
    assert read.reads is None


def test_without_text_it_keeps_only_the_columns_the_analysis_reads(release):
    read = read_release(release, text=False)

    assert read.task1_full.columns.tolist() == [
        "dataset", "study_id", "reref_variation", "report_type", "annotation_index", "rating",
    ]  # fmt: skip
    assert read.task2_consensus.columns.tolist() == [
        "dataset", "study_id", "reref_variation", "rating", "label_source", "n_annotations",
    ]  # fmt: skip


def test_given_file_names_it_reads_the_text_of_those_files_only(release):
    read = read_release(release, text={"task2_full"})

    assert read.task2_full.columns.tolist() == TASK2_FULL
    assert "findings" not in read.task1_full.columns and "rationale" not in read.task1_full.columns
    assert "rationale" not in read.task2_disagreed.columns
    assert read.task1_full.columns.tolist() == read_release(release, text=False).task1_full.columns.tolist()


def test_it_refuses_a_folder_without_a_release_file_naming_the_file(release):
    (release / "task2" / "task2_disagreed.csv").unlink()

    with pytest.raises(NotARelease, match=r"task2/task2_disagreed.csv: missing"):
        read_release(release)


def test_it_refuses_a_file_without_a_column_naming_the_file_and_the_column(release):
    path = release / "task1" / "task1_consensus.csv"
    path.write_text(path.read_text().replace("label_source", "source"))

    with pytest.raises(NotARelease, match=r"task1/task1_consensus.csv: no column 'label_source'"):
        read_release(release)


def test_it_refuses_an_empty_file_and_a_path_that_is_not_a_folder(release):
    (release / "task1" / "task1_full.csv").write_text("")
    with pytest.raises(NotARelease, match=r"task1/task1_full.csv: empty file"):
        read_release(release)
    with pytest.raises(NotARelease, match="not a folder"):
        read_release(release / "README.md")


def test_it_reads_a_file_saved_with_a_byte_order_mark(release):
    path = release / "task2" / "task2_consensus.csv"
    path.write_bytes(b"\xef\xbb\xbf" + path.read_bytes())

    assert read_release(release).task2_consensus["dataset"].tolist() == ["mimic-cxr"]
