"""What a study half-way through gives: a clear 'not computable' with its reason, never NaN or a crash."""

import json
import math

import pytest

from analysis import report
from analysis.figure_jobs import render_figure
from analysis.names import FIGURES
from analysis.report import write_results
from analysis.results import analyze
from tests.analysis.helpers import make_frames


def _assert_no_nan(results, outdir=None):
    for name, table in results.tables.items():
        for value in table.to_numpy().ravel():
            assert not (isinstance(value, float) and math.isnan(value)), name
    json.dumps(results.document, allow_nan=False)
    if outdir is not None:
        write_results(results, outdir)
        for path in outdir.rglob("*"):
            if path.suffix in {".csv", ".md", ".json"}:
                text = path.read_text()
                assert ",nan" not in text.lower() and "| nan" not in text.lower(), path
                assert "NaN" not in text, path
        for name in FIGURES:
            assert (outdir / "figures" / f"{name}.png").stat().st_size > 0


def _row(table, **where):
    for column, value in where.items():
        table = table[table[column] == value]
    assert len(table) == 1, where
    return table.iloc[0]


def test_a_variation_with_one_pair_is_not_tested_and_says_why(tmp_path):
    plan = [("hedging", "1", "original", (0, 0), None), ("hedging", "1", "alternative", (2, 2), None)]
    plan += [("terminology", str(i), rt, (i % 3, i % 3), None) for i in range(6) for rt in ("original", "alternative")]
    plan += [("terminology", "9", "alternative", (1, 1), None), ("terminology", "9", "original", (0, 0), None)]
    results = analyze(make_frames(task1=plan))

    one_pair = _row(results.tables["task1_degradation"], level="variation", group="hedging")
    assert one_pair["n_pairs"] == 1
    assert one_pair["p_value"] is None and one_pair["p_holm"] is None and one_pair["ci_low"] is None
    assert "test: 1 pair: the test needs at least 2" in one_pair["note"]
    assert "interval: 1 pair" in one_pair["note"]
    assert one_pair["mean_difference"] == 2.0
    tested = _row(results.tables["task1_degradation"], level="variation", group="terminology")
    assert tested["p_value"] is not None and tested["p_holm"] == tested["p_value"]
    _assert_no_nan(results, tmp_path / "out")


def test_all_pairs_rated_alike_are_not_tested_and_say_why():
    plan = [("hedging", str(i), rt, (1, 1), None) for i in range(5) for rt in ("original", "alternative")]
    row = _row(analyze(make_frames(task1=plan)).tables["task1_degradation"], level="overall")

    assert row["p_value"] is None
    assert "every exam's differences sum to 0 (5 pairs)" in row["note"]
    assert "too few exams for a useful interval (n = 5)" in row["note"]
    assert (row["mean_difference"], row["ci_low"], row["ci_high"]) == (0.0, None, None)


def test_six_pairs_rated_alike_have_a_zero_width_interval_shown_as_such():
    plan = [("hedging", str(i), rt, (1, 1), None) for i in range(6) for rt in ("original", "alternative")]
    row = _row(analyze(make_frames(task1=plan)).tables["task1_degradation"], level="overall")

    assert (row["mean_difference"], row["ci_low"], row["ci_high"]) == (0.0, 0.0, 0.0)
    assert "zero-width interval" in row["note"]


def test_all_ratings_identical_leave_kappa_and_alpha_undefined_with_the_reason(tmp_path):
    plan = [("hedging", str(i), "original", (0, 0), None) for i in range(8)]
    results = analyze(make_frames(task1=plan, live=True))
    agreement = results.tables["agreement"]
    initial = agreement[(agreement["source"] == "initial_reads") & (agreement["level"] == "overall")]
    initial = initial[initial["task"] == "task1"]
    initial = initial.set_index("measure")

    assert initial.loc["fleiss_kappa", "value"] is None
    assert "kappa is undefined" in initial.loc["fleiss_kappa", "note"]
    assert initial.loc["krippendorff_alpha_nominal", "value"] is None
    assert "alpha is undefined" in initial.loc["krippendorff_alpha_ordinal", "note"]
    assert initial.loc["percent_agreement", "value"] == 1.0
    assert initial.loc["gwet_ac1", "value"] == 1.0
    _assert_no_nan(results, tmp_path / "out")


def test_no_task2_examples_yet_gives_empty_tables_with_a_note_and_a_figure_that_says_so(tmp_path):
    results = analyze(make_frames(task1=[("hedging", "1", "original", (0, 0), None)]))

    ratings = results.tables["task2_ratings"]
    assert set(ratings["n"]) == {0} and set(ratings["note"]) == {"no examples"}
    assert set(ratings["percent"]) == {None}
    proportions = results.tables["task2_proportions"]
    assert set(proportions["proportion"]) == {None} and set(proportions["note"]) == {"no examples"}
    svg = render_figure(results, "task2_ratings", "svg").decode()
    assert "No Task 2 examples with a consensus yet." in svg
    _assert_no_nan(results, tmp_path / "out")


def test_an_empty_release_gives_every_table_and_figure_without_a_number_it_cannot_have(tmp_path):
    results = analyze(make_frames())

    assert results.document["counts"] == {
        "task1": {"examples": 0, "pairs": 0, "annotations": 0},
        "task2": {"examples": 0, "annotations": 0},
    }
    degradation = _row(results.tables["task1_degradation"], level="overall")
    assert degradation["n_pairs"] == 0 and degradation["mean_difference"] is None
    agreement = results.tables["agreement"]
    assert set(agreement["value"]) == {None}
    assert all(agreement["note"])
    for name in FIGURES:
        assert render_figure(results, name, "png").startswith(b"\x89PNG")
    _assert_no_nan(results, tmp_path / "out")


def test_fewer_than_two_examples_with_two_reads_leave_agreement_undefined():
    results = analyze(make_frames(task1=[("hedging", "1", "original", (0, 0), None)], live=True))
    agreement = results.tables["agreement"]
    kappa = _row(agreement, task="task1", source="initial_reads", level="overall", measure="fleiss_kappa")

    assert kappa["value"] is None
    assert kappa["note"] == "fewer than 2 examples with two or more reads"


@pytest.mark.parametrize("task", ["task1", "task2"])
def test_a_task_filter_leaves_the_other_tasks_figures_saying_so(task):
    results = analyze(make_frames(), task=task)
    for name in FIGURES:
        assert render_figure(results, name, "svg").startswith(b"<?xml")


def test_every_figure_renders_for_a_study_with_a_single_pair():
    plan = [("hedging", "1", "original", (0, 0), None), ("hedging", "1", "alternative", (2, 2), None)]
    results = analyze(make_frames(task1=plan, task2=[("hedging", "1", (0, 1, 1), None)], live=True))

    for name in FIGURES:
        for fmt in ("svg", "png"):
            assert render_figure(results, name, fmt)


def test_results_written_with_their_fits_left_to_run_have_the_models_rows(tmp_path, monkeypatch):
    monkeypatch.setattr(report, "render_figures", lambda results, outdir: [])  # the document is what is read here
    task1 = [("terminology", "1", "original", (0, 0), None), ("terminology", "1", "alternative", (1, 1), None)]
    results = analyze(make_frames(task1, []), defer_fits=True)
    assert results.tables["task1_mixed_model"].empty  # until they are run

    write_results(results, tmp_path)

    written = json.loads((tmp_path / "results.json").read_text())["tables"]
    for name in ("task1_mixed_model", "task1_realistic_mixed_model"):
        [row] = written[name]
        assert row["note"].startswith("not computable from a release")
