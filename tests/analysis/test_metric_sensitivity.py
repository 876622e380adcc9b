"""Metric sensitivity: the table over Task 2 consensus, Spearman's interval, release texts, analyze_release."""

import io
import json
import math
import tracemalloc

import numpy as np
import pandas as pd
import pytest
from django.core.management import CommandError, call_command
from scipy import stats as scipy_stats

from analysis.management.commands import analyze_release
from analysis.sensitivity import (
    PAIR_TEXTS,
    SCORES,
    builtin_scores,
    fisher_interval,
    release_pair_texts,
    sensitivity,
    spearman,
)
from exports.columns import TASK2_FULL
from tests.analysis.helpers import make_frames, write_release


def consensus(rows):
    return pd.DataFrame(
        [{"dataset": "mimic-cxr", "study_id": s, "reref_variation": v, "rating": r} for v, s, r in rows]
    ).astype(str)


def scores(rows, metric="bleu2", direction="forward"):
    return pd.DataFrame([("mimic-cxr", s, v, metric, direction, x) for v, s, x in rows], columns=SCORES).astype(
        {"score": float}
    )


RATED = [
    ("hedging", "1", "Equivalent", 0.9),
    ("hedging", "2", "Minor Discrepancy", 0.7),
    ("hedging", "3", "Equivalent", 0.8),
    ("hedging", "4", "Major Discrepancy", 0.3),
    ("hedging", "5", "Major Discrepancy", 0.5),
    ("structure", "6", "Equivalent", 0.4),
    ("structure", "7", "Major Discrepancy", 0.2),
]


def test_the_table_splits_clinically_equivalent_from_major_pairs_per_variation():
    table = sensitivity(
        scores([(v, s, x) for v, s, _, x in RATED]), consensus([(v, s, r) for v, s, r, _ in RATED])
    ).table
    hedging = table[(table["level"] == "variation") & (table["group"] == "hedging")].iloc[0]

    assert hedging["n_pairs"] == 5
    assert hedging["n_equivalent"] == 3
    assert hedging["mean_equivalent"] == pytest.approx(0.8, abs=1e-12)
    assert hedging["median_equivalent"] == pytest.approx(0.8, abs=1e-12)
    assert hedging["n_major"] == 2
    assert hedging["mean_major"] == pytest.approx(0.4, abs=1e-12)
    assert hedging["perfect"] == 1.0
    assert hedging["drop_from_perfect"] == pytest.approx(0.2, abs=1e-12)
    expected = scipy_stats.spearmanr([0.9, 0.7, 0.8, 0.3, 0.5], [0, 1, 0, 2, 2]).statistic
    assert abs(hedging["spearman_rho"] - expected) < 1e-9
    overall = table[table["level"] == "overall"].iloc[0]
    assert overall["n_pairs"] == 7


def test_pairs_without_a_task2_consensus_are_left_out():
    result = sensitivity(
        scores([("hedging", "1", 0.9), ("hedging", "99", 0.1)]),
        consensus([("hedging", "1", "Equivalent"), ("hedging", "99", "")]),
    )

    assert result.table.iloc[0]["n_pairs"] == 1
    assert list(result.scores["study_id"]) == ["1"]


def test_what_the_data_do_not_define_is_none_with_the_reason():
    table = sensitivity(
        scores([("hedging", "1", 0.9), ("hedging", "2", 0.8)], metric="green", direction="imported"),
        consensus([("hedging", "1", "Equivalent"), ("hedging", "2", "Equivalent")]),
    ).table
    row = table.iloc[0]

    assert row["spearman_rho"] is None and row["ci_low"] is None
    assert row["drop_from_perfect"] is None
    assert "no perfect score was given" in row["note"]
    assert "at least 4" in row["note"]
    assert row["n_major"] == 0 and row["mean_major"] is None


@pytest.mark.parametrize(
    ("values", "ratings", "reason"),
    [
        ([0.5, 0.5, 0.5, 0.5], [0, 1, 2, 0], "same value on every pair"),
        ([0.1, 0.2, 0.3, 0.4], [1, 1, 1, 1], "same consensus rating"),
        ([0.1, 0.2, 0.3], [0, 1, 2], "at least 4"),
    ],
)
def test_spearman_says_why_it_is_not_computable(values, ratings, reason):
    result = spearman(np.array(values), np.array(ratings))

    assert result.rho is None and reason in result.note


def test_spearman_equals_scipy_and_its_fisher_machinery_equals_scipys_pearson_interval():
    rng = np.random.default_rng(3)
    ratings = rng.integers(0, 3, 60)
    values = 0.8 - 0.1 * ratings + rng.normal(0, 0.1, 60)

    result = spearman(values, ratings)

    reference = scipy_stats.spearmanr(values, ratings).statistic
    assert abs(result.rho - reference) < 1e-9
    # With variance 1 / (n - 3) the Fisher-z interval is scipy's Pearson interval on the ranks.
    ranks_x, ranks_y = scipy_stats.rankdata(values), scipy_stats.rankdata(ratings)
    pearson = scipy_stats.pearsonr(ranks_x, ranks_y).confidence_interval(0.95)
    low, high = fisher_interval(result.rho, 1 / (len(values) - 3))
    assert abs(low - pearson.low) < 1e-9 and abs(high - pearson.high) < 1e-9
    # Bonett and Wright's variance widens it.
    z, se = np.arctanh(reference), math.sqrt((1 + reference**2 / 2) / 57)
    assert abs(result.low - math.tanh(z - scipy_stats.norm.ppf(0.975) * se)) < 1e-9
    assert abs(result.high - math.tanh(z + scipy_stats.norm.ppf(0.975) * se)) < 1e-9
    assert result.low < low and result.high > high


TASK2_FULL_COLUMNS = list(TASK2_FULL)


def test_release_texts_follow_report_a_type():
    full = pd.DataFrame(
        [
            ["mimic-cxr", "1", "hedging", "0", "alternative", "Equivalent", "", "", "", "",
             "Alt F.", "Alt I.", "Orig F.", ""],
            ["mimic-cxr", "1", "hedging", "1", "original", "Equivalent", "", "", "", "",
             "Orig F.", "", "Alt F.", "Alt I."],
        ],
        columns=TASK2_FULL_COLUMNS,
    )  # fmt: skip

    pairs = release_pair_texts(full)

    assert list(pairs.columns) == PAIR_TEXTS
    assert pairs.iloc[0].tolist() == ["mimic-cxr", "1", "hedging", "Orig F.", "Alt F. Alt I."]


def test_release_texts_take_the_memory_of_the_texts_not_of_the_longest_times_the_pairs():
    """A 100,000-pair release's texts once peaked at 600 MB here: as fixed-width arrays, every pair was
    as wide as the longest report. One long report among 2,000 pairs must cost about its own size."""
    rows = [
        ["mimic-cxr", f"{i:08d}", "hedging", "0", "original", "Equivalent", "", "", "", "",
         "Orig F." * (20_000 if i == 0 else 1), "", "Alt F.", ""]
        for i in range(2000)
    ]  # fmt: skip
    full = pd.DataFrame(rows, columns=TASK2_FULL_COLUMNS)
    tracemalloc.start()
    try:
        pairs = release_pair_texts(full)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()

    assert pairs["original"].str.len().max() == 140_000
    assert peak < 10_000_000, f"{peak:,} bytes traced for 140,000 characters of text"


def test_builtin_scores_list_both_directions_except_rouge_l_which_is_symmetric():
    pairs = pd.DataFrame([["mimic-cxr", "1", "hedging", "No effusion.", "Possibly no effusion."]], columns=PAIR_TEXTS)

    found = builtin_scores(pairs)

    assert sorted(zip(found["metric"], found["direction"], strict=True)) == [
        ("bleu2", "forward"), ("bleu2", "reverse"), ("chrf", "forward"), ("chrf", "reverse"), ("rougeL", "forward"),
    ]  # fmt: skip


# analyze_release ---------------------------------------------------------------------------------

PLAN2 = [("hedging", f"{i:08d}", reads, None) for i, reads in enumerate([(0, 0), (1, 1), (2, 2), (0, 0), (2, 2)])]


@pytest.fixture
def release(tmp_path):
    frames = make_frames(task2=PLAN2)
    full = frames.task2_full
    full["report_a_findings"] = "The heart is normal. " + full["study_id"]
    full["report_b_findings"] = "Possibly the heart is normal. " + full["study_id"]
    return write_release(frames, tmp_path / "release")


def test_analyze_release_writes_the_sensitivity_table_figures_and_per_pair_scores(release, tmp_path):
    out = tmp_path / "out"

    call_command("analyze_release", str(release), "--out", str(out), "--metric-cache", str(tmp_path / "c.sqlite3"))

    document = json.loads((out / "results.json").read_text())
    metrics = [(m["metric"], m["direction"]) for m in document["metric_sensitivity"]["metrics"]]
    assert metrics == [("bleu2", "forward"), ("bleu2", "reverse"), ("rougeL", "forward"), ("chrf", "forward"),
                       ("chrf", "reverse")]  # fmt: skip
    assert (out / "tables" / "metric_sensitivity.csv").is_file()
    scores = pd.read_csv(out / "tables" / "metric_scores.csv", dtype=str, keep_default_na=False)
    assert len(scores) == 5 * 5
    assert (out / "figures" / "metric_bleu2.svg").read_bytes().startswith(b"<?xml")
    assert (out / "figures" / "metric_chrf_reverse.png").is_file()
    assert "metric_bleu2.png" in (out / "results.md").read_text()


def test_analyze_release_scores_many_new_pairs_only_when_asked_and_says_so(release, tmp_path, monkeypatch):
    """More pairs than SCORE_WITHOUT_ASKING not in the cache leave the metric sensitivity out (the rest of
    the analysis stays within its time), with what to do; --score-metrics scores them, and a rerun reads
    them from the cache without being asked."""
    monkeypatch.setattr(analyze_release, "SCORE_WITHOUT_ASKING", 4)  # the release has 5 pairs
    cache = str(tmp_path / "c.sqlite3")

    def run(out, *extra):
        printed = io.StringIO()
        call_command("analyze_release", str(release), "--out", str(tmp_path / out), "--metric-cache", cache, *extra,
                     stdout=printed)  # fmt: skip
        return json.loads((tmp_path / out / "results.json").read_text()), printed.getvalue()

    left_out, said = run("default")
    asked, _ = run("asked", "--score-metrics")
    cached, said_again = run("cached")

    assert "metric_sensitivity" not in left_out and not list((tmp_path / "default" / "figures").glob("metric_*"))
    assert "Metric sensitivity left out: 5 of the release's 5 pairs have not been scored here yet" in said
    assert "--score-metrics" in said
    assert left_out["tables"] == asked["tables"]  # the rest of the analysis is all there
    assert len(asked["metric_sensitivity"]["metrics"]) == 5
    assert cached["metric_sensitivity"] == asked["metric_sensitivity"] and "left out" not in said_again


def test_analyze_release_treats_imported_scores_like_the_builtin_ones(release, tmp_path):
    csv = tmp_path / "green.csv"
    csv.write_text(
        "dataset,study_id,reref_variation,metric,score,perfect_score\n"
        + "".join(f"mimic-cxr,{i:08d},hedging,green,{0.9 - 0.1 * i},1\n" for i in range(5))
    )

    call_command("analyze_release", str(release), "--out", str(tmp_path / "out"), "--metric-scores", str(csv))

    table = pd.read_csv(tmp_path / "out" / "tables" / "metric_sensitivity.csv")
    green = table[(table["metric"] == "green") & (table["level"] == "overall")].iloc[0]
    assert green["direction"] == "imported"
    assert green["n_equivalent"] == 3  # Equivalent, Minor, Equivalent
    assert green["drop_from_perfect"] == pytest.approx(1 - (0.9 + 0.8 + 0.6) / 3)


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ("dataset,study_id,reref_variation,metric\n", "Required column 'score' is missing"),
        ("dataset,study_id,reref_variation,metric,score\nmimic-cxr,00000000,hedging,green,high\n",
         "line 2, field 'score': 'high' is not a finite number"),
        ("dataset,study_id,reref_variation,metric,score\nmimic-cxr,00000000,hedging,bleu2,0.5\n",
         "line 2, field 'metric'"),
        ("dataset,study_id,reref_variation,metric,score\nmimic-cxr,99999999,hedging,green,0.5\n",
         "line 2, field 'study_id': No Task 2 pair mimic-cxr / 99999999 / hedging"),
        ("dataset,study_id,reref_variation,metric,score\nmimic-cxr,00000000,hedging,green,0.5\n"
         "mimic-cxr,00000000,hedging,green,0.6\n", "line 3: Duplicate score"),
    ],
)  # fmt: skip
def test_analyze_release_refuses_a_bad_score_file_naming_line_and_field_and_writes_nothing(
    release, tmp_path, content, message
):
    csv = tmp_path / "bad.csv"
    csv.write_text(content)
    out = tmp_path / "out"

    with pytest.raises(CommandError, match=message.replace("(", r"\(").replace("'", "'")):
        call_command("analyze_release", str(release), "--out", str(out), "--metric-scores", str(csv))
    assert not out.exists()


def test_the_box_plots_are_matplotlibs_boxplot_drawn_as_collections():
    """A sensitivity figure's boxes (analysis.sensitivity_figures.box_plots) have the quartiles,
    median, whiskers (to the furthest value within 1.5 IQR) and caps of matplotlib's own boxplot of
    the same values, drawn at the same heights and widths; outliers stretch no whisker."""
    from matplotlib.figure import Figure

    from analysis.sensitivity_figures import BOX_HEIGHT, box_plots

    rng = np.random.default_rng(3)
    values = [np.array([0.4]), np.array([0.2, 0.9]), rng.normal(50, 10, 40), np.r_[rng.uniform(0, 1, 20), 9.0, -7.0]]
    heights = [3.2, 2.8, 1.2, 0.8]
    axes = Figure().add_subplot()
    box_plots(axes, list(zip(heights, values, strict=True)), "#0072B2")
    options = {"widths": BOX_HEIGHT, "orientation": "horizontal", "showfliers": False, "patch_artist": True}
    reference = Figure().add_subplot().boxplot(values, positions=heights, **options)
    boxes, whiskers_and_caps, medians = axes.collections

    def extent(vertices):
        return np.r_[vertices.min(axis=0), vertices.max(axis=0)]

    for path, box in zip(boxes.get_paths(), reference["boxes"], strict=True):
        np.testing.assert_allclose(extent(path.vertices), extent(box.get_path().vertices), atol=1e-12)
    expected = []
    for index in range(len(values)):
        expected += [reference["whiskers"][2 * index], reference["whiskers"][2 * index + 1]]
        expected += [reference["caps"][2 * index], reference["caps"][2 * index + 1]]
    for segment, line in zip(whiskers_and_caps.get_segments(), expected, strict=True):
        np.testing.assert_allclose(segment, line.get_xydata(), atol=1e-12)
    for segment, line in zip(medians.get_segments(), reference["medians"], strict=True):
        np.testing.assert_allclose(segment, line.get_xydata(), atol=1e-12)
