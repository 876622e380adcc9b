"""analyze() against references computed independently from the release rows."""

import dataclasses
import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from scipy import stats as scipy_stats
from statsmodels.stats.multitest import multipletests
from statsmodels.stats.proportion import proportion_confint

from analysis.frames import RELEASE_FILES, ReleaseFrames
from analysis.results import AnalysisInputError, analyze
from tests.analysis.helpers import make_frames

TOLERANCE = 1e-9
IRRCAC = json.loads((Path(__file__).parent / "reference" / "irrcac.json").read_text())
RELEASE_TABLES = [Path(name).stem for name in RELEASE_FILES]
VARIATIONS = ["hedging", "negation--explicit", "terminology"]


def _task1_plan(rng: np.random.Generator, pairs_per_variation: int = 14):
    plan = []
    for variation in VARIATIONS:
        for i in range(pairs_per_variation):
            for report_type in ("original", "alternative"):
                score = int(rng.choice(3, p=[0.6, 0.3, 0.1] if report_type == "original" else [0.3, 0.4, 0.3]))
                plan.append((variation, f"{i:08d}", report_type, (score, score), None))
    return plan


def _row(table, **where):
    mask = np.ones(len(table), dtype=bool)
    for column, value in where.items():
        mask &= table[column] == value
    rows = table[mask]
    assert len(rows) == 1, where
    return rows.iloc[0]


def test_the_degradation_test_equals_scipy_and_statsmodels_on_the_consensus_pairs():
    frames = make_frames(task1=_task1_plan(np.random.default_rng(3)))
    table = analyze(frames).tables["task1_degradation"]

    consensus = frames.task1_consensus.assign(
        score=frames.task1_consensus["rating"].map({"Realistic": 0, "Minor Issues": 1, "Major Issues": 2})
    )
    pivot = consensus.pivot_table(index=["reref_variation", "study_id"], columns="report_type", values="score")
    differences = (pivot["alternative"] - pivot["original"]).groupby(level=0)
    p_values = []
    for variation in VARIATIONS:
        d = differences.get_group(variation).to_numpy()
        expected = scipy_stats.wilcoxon(d, zero_method="pratt", correction=False, method="asymptotic")
        row = _row(table, level="variation", group=variation)
        assert row["statistic"] == pytest.approx(expected.statistic, abs=TOLERANCE)
        assert row["p_value"] == pytest.approx(expected.pvalue, abs=TOLERANCE)
        assert row["mean_difference"] == pytest.approx(d.mean(), abs=TOLERANCE)
        assert (row["worse"], row["same"], row["better"]) == ((d > 0).sum(), (d == 0).sum(), (d < 0).sum())
        p_values.append(expected.pvalue)
    holm = multipletests(p_values, method="holm")[1]
    for variation, adjusted in zip(VARIATIONS, holm, strict=True):
        assert _row(table, level="variation", group=variation)["p_holm"] == pytest.approx(adjusted, abs=TOLERANCE)
    overall = _row(table, level="overall")
    all_differences = (pivot["alternative"] - pivot["original"]).to_numpy()
    expected = scipy_stats.wilcoxon(all_differences, zero_method="pratt", correction=False, method="asymptotic")
    assert overall["p_value"] == pytest.approx(expected.pvalue, abs=TOLERANCE)
    assert overall["p_holm"] is None


def test_the_bootstrap_interval_is_seeded():
    frames = make_frames(task1=_task1_plan(np.random.default_rng(3)))

    first = analyze(frames, seed=1).tables["task1_degradation"]
    again = analyze(frames, seed=1).tables["task1_degradation"]

    assert first.equals(again)
    low, high = _row(first, level="overall")[["ci_low", "ci_high"]]
    assert low < _row(first, level="overall")["mean_difference"] < high


def test_proportions_are_counted_from_the_consensus_with_wilson_intervals():
    plan2 = [("hedging", f"{i:03d}", (score, score), None) for i, score in enumerate([0, 0, 0, 1, 1, 2, 2, 2, 0, 1])]
    frames = make_frames(task1=_task1_plan(np.random.default_rng(5)), task2=plan2)
    results = analyze(frames)

    realistic = results.tables["task1_realistic"]
    consensus = frames.task1_consensus
    for report_type in ("original", "alternative"):
        subset = consensus[consensus["report_type"] == report_type]
        k, n = int((subset["rating"] == "Realistic").sum()), len(subset)
        row = _row(realistic, level="overall", report_type=report_type)
        assert (row["k"], row["n"], row["proportion"]) == (k, n, k / n)
        low, high = proportion_confint(k, n, method="wilson")
        assert (row["ci_low"], row["ci_high"]) == pytest.approx((low, high), abs=TOLERANCE)

    proportions = results.tables["task2_proportions"]
    no_major = _row(proportions, level="overall", measure="no_major_discrepancy")
    equivalent = _row(proportions, level="overall", measure="equivalent")
    assert (no_major["k"], no_major["n"]) == (7, 10)
    assert (equivalent["k"], equivalent["n"]) == (4, 10)
    assert (equivalent["ci_low"], equivalent["ci_high"]) == pytest.approx(
        proportion_confint(4, 10, method="wilson"), abs=TOLERANCE
    )
    ratings = results.tables["task2_ratings"]
    assert _row(ratings, level="overall", rating="Major Discrepancy")[["n", "total", "percent"]].tolist() == [
        3,
        10,
        30.0,
    ]


def _agreement_frames():
    """The irrCAC reference data set as a live study: third reads only where the first two disagreed."""
    plan = []
    for i, (first, second, third) in enumerate(IRRCAC["third_read_on_disagreement_60"]["ratings"]):
        reads = (first, second) if third is None else (first, second, third)
        plan.append(("hedging", f"{i:08d}", "original", reads, first if len(set(reads)) == 3 else None))
    return make_frames(task1=plan, live=True)


def test_live_agreement_on_the_two_initial_reads_equals_irrcac():
    table = analyze(_agreement_frames(), task="task1").tables["agreement"]
    expected = IRRCAC["two_readers_60"]["values"]

    initial = table[(table["source"] == "initial_reads") & (table["level"] == "overall")].set_index("measure")
    for measure in ("fleiss_kappa", "gwet_ac1", "gwet_ac2_ordinal", "krippendorff_alpha_nominal"):
        values = initial.loc[measure, ["value", "ci_low", "ci_high"]].tolist()
        assert values == pytest.approx(expected[measure], abs=TOLERANCE), measure
    assert initial.loc["krippendorff_alpha_ordinal", "value"] == pytest.approx(
        expected["krippendorff_alpha_ordinal"][0], abs=TOLERANCE
    )
    assert initial.loc["percent_agreement", "n_examples"] == 60


def test_alpha_over_all_reads_of_a_release_equals_irrcac_and_carries_the_third_read_note():
    table = analyze(_agreement_frames(), task="task1").tables["agreement"]
    expected = IRRCAC["third_read_on_disagreement_60"]["values"]

    row = _row(table, source="release", level="overall", measure="krippendorff_alpha_nominal_all_reads")
    assert [row["value"], row["ci_low"], row["ci_high"]] == pytest.approx(
        expected["krippendorff_alpha_nominal"], abs=TOLERANCE
    )
    assert "third read exists only where the first two disagreed" in row["note"]


def test_a_release_has_no_initial_read_agreement_and_a_live_study_has_both():
    frames = _agreement_frames()
    release_only = dataclasses.replace(frames, reads=None)

    assert set(analyze(release_only).tables["agreement"]["source"]) == {"release"}
    assert set(analyze(frames).tables["agreement"]["source"]) == {"release", "initial_reads"}
    assert analyze(release_only).document["source"] == "release"
    assert analyze(frames).document["source"] == "live"


def test_it_filters_by_dataset_and_task():
    frames = make_frames(task1=_task1_plan(np.random.default_rng(3)), task2=[("hedging", "1", (0, 0), None)])
    other = make_frames(task1=[("hedging", "9", "original", (2, 2), None)], dataset="iu-xray")
    both = ReleaseFrames(**{name: pd.concat([getattr(frames, name), getattr(other, name)]) for name in RELEASE_TABLES})

    assert analyze(both).document["counts"]["task1"]["examples"] == len(frames.task1_consensus) + 1
    only_iu = analyze(both, dataset="iu-xray")
    assert only_iu.document["counts"]["task1"]["examples"] == 1
    assert only_iu.document["datasets"] == ["iu-xray", "mimic-cxr"]
    assert only_iu.document["filters"] == {"dataset": "iu-xray", "task": None}
    assert only_iu.document["counts"]["task2"]["examples"] == 0
    only_task2 = analyze(both, task="equivalence")
    assert set(only_task2.tables) == {"task2_ratings", "task2_proportions", "agreement", "disagreement", "adjudication"}
    assert only_task2.document["filters"] == {"dataset": None, "task": "task2"}
    with pytest.raises(AnalysisInputError, match="unknown task 'task3'"):
        analyze(both, task="task3")


def test_examples_without_a_consensus_are_left_out():
    frames = make_frames(task2=[("hedging", "1", (0, 0), None), ("hedging", "2", (1, 1), None)])
    frames.task2_consensus.loc[1, "rating"] = ""

    results = analyze(frames, task="task2")

    assert results.document["counts"]["task2"] == {"examples": 1, "annotations": 2}


def test_an_unknown_rating_names_the_file_and_the_value():
    frames = make_frames(task2=[("hedging", "1", (0, 0), None)])
    frames.task2_consensus.loc[0, "rating"] = "Equivalnt"

    with pytest.raises(AnalysisInputError, match=r"task2_consensus.csv: rating 'Equivalnt' is not a task2 label"):
        analyze(frames)


def test_adjudicated_examples_report_the_adjudicators_rating_and_its_distance_from_the_three_reads():
    plan = [
        ("hedging", "1", "original", (0, 1, 2), 2),  # distances 2, 1, 0
        ("hedging", "2", "original", (2, 0, 1), 1),  # distances 1, 1, 0
        ("terminology", "3", "original", (0, 0), None),
    ]
    table = analyze(make_frames(task1=plan), task="task1").tables["adjudication"]

    overall = _row(table, level="overall")
    assert overall["n_adjudicated"] == 2
    assert (overall["rated_realistic_or_equivalent"], overall["rated_minor"], overall["rated_major"]) == (0, 1, 1)
    assert overall["mean_distance_to_reads"] == pytest.approx((1 + 2 / 3) / 2, abs=TOLERANCE)
    assert overall["matched_a_read"] == 2
    assert _row(table, level="variation", group="hedging")["n_adjudicated"] == 2


def test_progress_is_reported_step_by_step_up_to_the_total():
    seen = []
    analyze(
        make_frames(task2=[("hedging", "1", (0, 0), None)]), progress=lambda done, total: seen.append((done, total))
    )

    assert seen == [(1, 4), (2, 4), (3, 4), (4, 4)]
