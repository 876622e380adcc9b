import json
import struct
from importlib.metadata import version

import pytest
from django.core.management import CommandError, call_command

from analysis.names import CAPTIONS, FIGURES
from analysis.release_folder import read_release
from analysis.results import analyze
from analysis.writeup import summary_markdown
from tests.analysis.helpers import make_frames, write_release

PLAN1 = [
    (variation, f"{i:08d}", report_type, reads, adjudication)
    for variation in ("hedging", "terminology")
    for i, (reads, adjudication) in enumerate([((0, 0), None), ((0, 1, 1), None), ((0, 1, 2), 2), ((2, 2), None)])
    for report_type in ("original", "alternative")
]
PLAN2 = [("hedging", f"{i:08d}", reads, None) for i, reads in enumerate([(0, 0), (1, 0, 0), (2, 2)])]


@pytest.fixture
def release(tmp_path):
    return write_release(make_frames(task1=PLAN1, task2=PLAN2), tmp_path / "release")


def test_it_writes_tables_figures_results_md_and_json_from_files_alone(release, tmp_path):
    out = tmp_path / "results"

    # No django_db mark: a single query would fail this test.
    call_command("analyze_release", str(release), "--out", str(out))

    document = json.loads((out / "results.json").read_text())
    assert "metric_sensitivity" in document  # tested in test_metric_sensitivity.py
    del document["metric_sensitivity"]
    assert document == json.loads(json.dumps(analyze(read_release(release)).document))
    assert document["counts"] == {
        "task1": {"examples": 16, "pairs": 8, "annotations": 40},
        "task2": {"examples": 3, "annotations": 7},
    }
    for name in document["tables"]:
        assert (out / "tables" / f"{name}.csv").is_file()
    for name in FIGURES:
        assert (out / "figures" / f"{name}.svg").read_bytes().startswith(b"<?xml")
        png = (out / "figures" / f"{name}.png").read_bytes()
        assert png.startswith(b"\x89PNG")
        # 300 dpi: the pHYs chunk holds pixels per metre (300 / 0.0254 = 11811).
        assert struct.unpack(">II", png[png.index(b"pHYs") + 4 : png.index(b"pHYs") + 12]) == (11811, 11811)
        assert (out / "figures" / f"{name}.pdf").read_bytes().startswith(b"%PDF")
    markdown = (out / "results.md").read_text()
    assert "![Task 1, realism: consensus ratings per variation](figures/task1_ratings.png)" in markdown
    assert f"*Task 1, realism: consensus ratings per variation.* {CAPTIONS['task1_ratings']}" in markdown
    # The tables as shown, by label, in Markdown and LaTeX (booktabs, escaped); the tidy CSV keeps keys.
    shown = (out / "tables" / "task1_ratings.md").read_text()
    assert "| Overall | All | original | 2 (25.0%) | 2 (25.0%) | 4 (50.0%) | 8 |" in shown
    assert "| Variation | Terminology |" in shown and "terminology" not in shown
    latex = (out / "tables" / "task1_realistic.tex").read_text()
    assert "\\toprule" in latex and "\\midrule" in latex and "\\bottomrule" in latex
    assert "\\caption{Task 1, realism: proportion rated Realistic (Wilson 95\\% CI)}" in latex
    assert "terminology" in (out / "tables" / "task1_ratings.csv").read_text()
    # The summary and the methods, beside them.
    assert (out / "summary.md").read_text() == summary_markdown(document)
    methods_text = (out / "methods.md").read_text()
    assert "Holm S. A simple sequentially rejective multiple test procedure" in methods_text
    assert f"- scipy {version('scipy')}" in methods_text and f"- statsmodels {version('statsmodels')}" in methods_text


def test_the_same_release_gives_the_same_files(release, tmp_path):
    call_command("analyze_release", str(release), "--out", str(tmp_path / "a"))
    call_command("analyze_release", str(release), "--out", str(tmp_path / "b"))

    files = sorted(p.relative_to(tmp_path / "a") for p in (tmp_path / "a").rglob("*") if p.is_file())
    for path in files:
        assert (tmp_path / "a" / path).read_bytes() == (tmp_path / "b" / path).read_bytes(), path


def test_it_filters_by_dataset_and_task(release, tmp_path):
    call_command("analyze_release", str(release), "--out", str(tmp_path / "r"), "--task", "task2")

    document = json.loads((tmp_path / "r" / "results.json").read_text())
    assert document["filters"] == {"dataset": None, "task": "task2"}
    assert set(document["counts"]) == {"task2"}


def test_it_refuses_a_folder_that_is_not_a_release_naming_the_file(release, tmp_path):
    (release / "task1" / "task1_consensus.csv").unlink()

    with pytest.raises(CommandError, match=r"task1/task1_consensus.csv: missing"):
        call_command("analyze_release", str(release), "--out", str(tmp_path / "r"))
    assert not (tmp_path / "r").exists()


def test_it_refuses_an_unknown_rating_naming_the_file(release, tmp_path):
    path = release / "task2" / "task2_consensus.csv"
    path.write_text(path.read_text().replace("Equivalent", "Same"))

    with pytest.raises(CommandError, match=r"task2_consensus.csv: rating 'Same'"):
        call_command("analyze_release", str(release), "--out", str(tmp_path / "r"))
