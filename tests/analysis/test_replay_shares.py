import pytest

from analysis.release_folder import read_release
from analysis.results import analyze
from exports.building import build_release
from tests.replay import build_published_replay

pytestmark = [pytest.mark.django_db, pytest.mark.slow]  # the published-shape replay


def _overall(table, measure, task):
    rows = table[(table["task"] == task) & (table["measure"] == measure) & (table["level"] == "overall")]
    assert len(rows) == 1
    return rows.iloc[0]


def test_the_published_replay_gives_the_published_two_annotation_shares(tmp_path):
    study, _ = build_published_replay()
    build_release(study, tmp_path / "release", license_text="CC BY 4.0\n")

    results = analyze(read_release(tmp_path / "release"))

    agreement = results.tables["agreement"]
    task1 = _overall(agreement, "two_reads_agreed", "task1")
    task2 = _overall(agreement, "two_reads_agreed", "task2")
    assert task1["value"] == 147 / 240 and task1["n_examples"] == 240
    assert task2["value"] == 78 / 120 and task2["n_examples"] == 120
    settled = results.tables["disagreement"].set_index(["task", "level"])[
        ["two_reads_agreed", "third_read_settled", "adjudicated"]
    ]
    assert settled.loc[("task1", "overall")].tolist() == [147, 78, 15]
    assert settled.loc[("task2", "overall")].tolist() == [78, 41, 1]
    assert results.document["counts"] == {
        "task1": {"examples": 240, "pairs": 120, "annotations": 573},
        "task2": {"examples": 120, "annotations": 282},
    }
