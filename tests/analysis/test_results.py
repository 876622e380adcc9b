"""analyze() against references computed independently from the release rows."""

import dataclasses
import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from scipy import stats as scipy_stats
from statsmodels.stats.contingency_tables import mcnemar
from statsmodels.stats.multitest import multipletests
from statsmodels.stats.proportion import proportion_confint

from analysis.frames import RELEASE_FILES, ReleaseFrames
from analysis.paired import SignFlip
from analysis.results import AnalysisInputError, Margins, analyze
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


def _sign_flip_p(differences: np.ndarray, exams: np.ndarray) -> float:
    """scipy's exact sign-flip p over the exams' sums (every arrangement listed)."""
    _, exam = np.unique(exams, return_inverse=True)
    sums = np.bincount(exam, weights=differences.astype(float))
    return scipy_stats.permutation_test(
        (sums,), lambda x, axis: np.sum(x, axis=axis), permutation_type="samples", n_resamples=np.inf
    ).pvalue


def _differences(frames) -> pd.DataFrame:
    consensus = frames.task1_consensus.assign(
        score=frames.task1_consensus["rating"].map({"Realistic": 0, "Minor Issues": 1, "Major Issues": 2})
    )
    pivot = consensus.pivot_table(index=["reref_variation", "study_id"], columns="report_type", values="score")
    return (pivot["alternative"] - pivot["original"]).rename("d").reset_index()


def test_the_degradation_test_is_scipys_exact_sign_flip_with_each_exams_pairs_flipped_together():
    # 8 exams, each in all three variations: the overall row has 24 pairs but 8 independent units.
    frames = make_frames(task1=_task1_plan(np.random.default_rng(3), pairs_per_variation=8))
    table = analyze(frames).tables["task1_degradation"]
    pairs = _differences(frames)

    p_values = []
    for variation in VARIATIONS:
        d = pairs.loc[pairs["reref_variation"] == variation, "d"].to_numpy()
        row = _row(table, level="variation", group=variation)
        assert row["p_value"] == pytest.approx(_sign_flip_p(d, np.arange(len(d))), abs=TOLERANCE)
        assert row["mean_difference"] == pytest.approx(d.mean(), abs=TOLERANCE)
        assert (row["worse"], row["same"], row["better"]) == ((d > 0).sum(), (d == 0).sum(), (d < 0).sum())
        assert (row["n_pairs"], row["n_exams"]) == (8, 8)
        assert row["method"] == "exact sign-flip over 8 exams"
        p_values.append(row["p_value"])
    holm = multipletests(p_values, method="holm")[1]
    for variation, adjusted in zip(VARIATIONS, holm, strict=True):
        assert _row(table, level="variation", group=variation)["p_holm"] == pytest.approx(adjusted, abs=TOLERANCE)
    overall = _row(table, level="overall")
    d, exams = pairs["d"].to_numpy(), pairs["study_id"].to_numpy()
    assert (overall["n_pairs"], overall["n_exams"]) == (24, 8)
    assert overall["p_value"] == pytest.approx(_sign_flip_p(d, exams), abs=TOLERANCE)
    # Flipping pairs one by one (2^24 arrangements; analysis.paired, held to scipy in test_paired) differs.
    assert overall["p_value"] != pytest.approx(SignFlip(d).p_value(), abs=1e-6)
    assert overall["p_holm"] is None


def test_each_interval_agrees_with_its_test_and_the_adjusted_one_with_bonferroni():
    frames = make_frames(task1=_task1_plan(np.random.default_rng(3), pairs_per_variation=9))
    table = analyze(frames).tables["task1_degradation"]
    pairs = _differences(frames)

    for row in table.to_dict(orient="records"):
        if row["ci_low"] is None:
            continue
        assert (row["ci_low"] <= 0 <= row["ci_high"]) == (row["p_value"] > 0.05), row
    variations = table[table["level"] == "variation"]
    assert set(variations["adjusted_confidence"]) == {1 - 0.05 / 3}
    for row in variations.to_dict(orient="records"):
        d = pairs.loc[pairs["reref_variation"] == row["group"], "d"].to_numpy()
        for end, inside in ((row["ci_adjusted_low"], 1e-6), (row["ci_adjusted_high"], -1e-6)):
            assert _sign_flip_p(d - (end - inside), np.arange(len(d))) <= 0.05 / 3
        assert row["ci_adjusted_low"] <= row["ci_low"] and row["ci_adjusted_high"] >= row["ci_high"]
    assert table.loc[table["level"] != "variation", "ci_adjusted_low"].isna().all()


def test_the_share_realistic_is_compared_per_variation_by_newcombe_and_mcnemar_and_overall_by_exam():
    frames = make_frames(task1=_task1_plan(np.random.default_rng(8), pairs_per_variation=10))
    table = analyze(frames).tables["task1_realistic_difference"]
    consensus = frames.task1_consensus
    realistic = (consensus["rating"] == "Realistic").astype(int)
    pivot = consensus.assign(r=realistic).pivot_table(
        index=["reref_variation", "study_id"], columns="report_type", values="r"
    )
    p_values = []
    for variation in VARIATIONS:
        part = pivot.loc[variation]
        both = int(((part["original"] == 1) & (part["alternative"] == 1)).sum())
        alt_only = int(((part["original"] == 0) & (part["alternative"] == 1)).sum())
        orig_only = int(((part["original"] == 1) & (part["alternative"] == 0)).sum())
        neither = len(part) - both - alt_only - orig_only
        row = _row(table, level="variation", group=variation)
        assert (row["both_realistic"], row["alternative_only"], row["original_only"], row["neither"]) == (
            both, alt_only, orig_only, neither,
        )  # fmt: skip
        assert row["difference"] == pytest.approx((alt_only - orig_only) / len(part), abs=TOLERANCE)
        expected = mcnemar([[both, alt_only], [orig_only, neither]], exact=True).pvalue
        assert row["p_value"] == pytest.approx(expected, abs=TOLERANCE)
        assert row["method"] == "Newcombe method 10; exact McNemar"
        p_values.append(row["p_value"])
    holm = multipletests(p_values, method="holm")[1]
    assert [_row(table, level="variation", group=v)["p_holm"] for v in VARIATIONS] == pytest.approx(list(holm))
    overall = _row(table, level="overall")
    d = (pivot["alternative"] - pivot["original"]).to_numpy()
    exams = pivot.index.get_level_values("study_id").to_numpy()
    assert overall["p_value"] == pytest.approx(_sign_flip_p(d, exams), abs=TOLERANCE)
    assert overall["method"] == "exact sign-flip over 10 exams"


@pytest.mark.parametrize(
    ("margin", "verdicts"),
    [(None, {""}), (0.95, {"non-inferior"}), (0.0001, {"not shown", "inferior", "non-inferior"})],
)
def test_the_margin_gives_each_row_a_verdict_from_its_interval(margin, verdicts):
    frames = make_frames(task1=_task1_plan(np.random.default_rng(8), pairs_per_variation=10))
    table = analyze(frames, margins=Margins(task1_realistic=margin)).tables["task1_realistic_difference"]

    for row in table.to_dict(orient="records"):
        if margin is None:
            assert row["verdict"] == ""
        elif row["ci_low"] > -margin:
            assert row["verdict"] == "non-inferior"
        elif row["ci_high"] < -margin:
            assert row["verdict"] == "inferior"
        else:
            assert row["verdict"] == "not shown"
    assert set(table["verdict"]) <= verdicts


def test_rows_are_given_per_taxonomy_dimension():
    frames = make_frames(task1=_task1_plan(np.random.default_rng(3), pairs_per_variation=8))
    taxonomy = [
        ("negation--explicit", "Says no", "X"),
        ("terminology", "Words", "Language"),
        ("hedging", "Hedges", "Language"),
    ]
    results = analyze(frames, taxonomy=taxonomy)
    degradation = results.tables["task1_degradation"]

    language = _row(degradation, level="dimension", group="Language")
    assert (language["n_pairs"], language["n_exams"]) == (16, 8)
    assert _row(degradation, level="dimension", group="X")["n_pairs"] == 8
    default = analyze(frames).tables["task1_degradation"]
    assert set(default.loc[default["level"] == "dimension", "group"]) == {"Language"}

    # The taxonomy's order, not the keys' alphabet, in every table; its labels in the document.
    assert list(degradation.loc[degradation["level"] == "dimension", "group"]) == ["X", "Language"]
    assert list(degradation.loc[degradation["level"] == "variation", "group"]) == [
        "negation--explicit", "terminology", "hedging",
    ]  # fmt: skip
    ratings = results.tables["task1_ratings"]
    assert list(dict.fromkeys(ratings.loc[ratings["level"] == "variation", "group"])) == [
        "negation--explicit", "terminology", "hedging",
    ]  # fmt: skip
    assert list(ratings["level"].drop_duplicates()) == ["overall", "dataset", "dimension", "variation"]
    assert results.document["variations"] == [
        {"key": key, "label": label, "dimension": dimension} for key, label, dimension in taxonomy
    ]
    # A variation the taxonomy does not name keeps its key, after the named ones, in no dimension.
    partial = analyze(frames, taxonomy=[("terminology", "Words", "Language")])
    assert [entry["label"] for entry in partial.document["variations"]] == ["Words", "hedging", "negation--explicit"]
    assert [entry["label"] for entry in analyze(frames).document["variations"]] == [
        "Terminology", "Hedging", "Negation: explicit",
    ]  # fmt: skip


def test_the_order_effect_is_fishers_exact_test_on_report_a():
    plan2 = [("hedging", f"{i:03d}", (score, score), None) for i, score in enumerate([0, 0, 0, 1, 1, 2, 2, 2, 0, 1])]
    frames = make_frames(task1=_task1_plan(np.random.default_rng(5)), task2=plan2)
    full = frames.task2_full
    order = _row(analyze(frames).tables["task2_order"], level="overall")

    first = full["report_a_type"] == "original"
    equivalent = full["rating"] == "Equivalent"
    a, b = int((first & equivalent).sum()), int((first & ~equivalent).sum())
    c, d = int((~first & equivalent).sum()), int((~first & ~equivalent).sum())
    assert (order["a_original"], order["a_original_equivalent"], order["a_alternative"]) == (a + b, a, c + d)
    assert order["p_value"] == pytest.approx(scipy_stats.fisher_exact([[a, b], [c, d]]).pvalue, abs=TOLERANCE)


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
    assert set(only_task2.tables) == {
        "task2_ratings", "task2_proportions", "task2_order", "agreement", "disagreement", "adjudication",
    }  # fmt: skip
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


def _agreement(results, **where):
    return _row(results.tables["agreement"], task="task1", **where)


def test_the_first_two_reads_of_a_release_give_the_initial_reads_alpha_when_no_example_split():
    rng = np.random.default_rng(21)
    plan = []
    for i in range(30):
        first, second = (int(x) for x in rng.choice(3, size=2, p=[0.6, 0.3, 0.1]))
        reads = (first, second) if first == second else (first, second, int(rng.choice([first, second])))
        plan.append(("hedging", f"{i:03d}", "original", reads, None))
    results = analyze(make_frames(task1=plan, live=True))

    for metric in ("nominal", "ordinal"):
        release = _agreement(
            results, source="release", level="overall", measure=f"krippendorff_alpha_{metric}_first_two_reads"
        )
        initial = _agreement(results, source="initial_reads", level="overall", measure=f"krippendorff_alpha_{metric}")
        assert release["value"] == pytest.approx(initial["value"], abs=TOLERANCE)
        assert (release["ci_low"], release["ci_high"]) == pytest.approx(
            (initial["ci_low"], initial["ci_high"]), abs=TOLERANCE
        )
        assert release["range_low"] == release["range_high"] == release["value"]
        all_reads = _agreement(
            results, source="release", level="overall", measure=f"krippendorff_alpha_{metric}_all_reads"
        )
        assert all_reads["value"] != pytest.approx(release["value"], abs=1e-6)
        assert all_reads["note"].startswith("Biased by design")


def test_with_three_way_splits_the_first_two_reads_give_alphas_range_over_every_resolution():
    import itertools

    import krippendorff

    rng = np.random.default_rng(22)
    plan, known = [], []
    for i in range(14):
        first, second = (int(x) for x in rng.choice(3, size=2))
        reads = (first, second) if first == second else (first, second, int(rng.choice([first, second])))
        plan.append(("hedging", f"{i:03d}", "original", reads, None))
        known.append(np.bincount([first, second], minlength=3))
    plan += [("hedging", f"s{i}", "original", (0, 1, 2), 1) for i in range(3)]
    results = analyze(make_frames(task1=plan))

    options = [np.array(o) for o in ([1, 1, 0], [1, 0, 1], [0, 1, 1])]
    for metric in ("nominal", "ordinal"):
        alphas = [
            krippendorff.alpha(value_counts=np.array(known + [options[c] for c in combo]), level_of_measurement=metric)
            for combo in itertools.product(range(3), repeat=3)
        ]
        row = _agreement(
            results, source="release", level="overall", measure=f"krippendorff_alpha_{metric}_first_two_reads"
        )
        assert (row["range_low"], row["range_high"]) == pytest.approx((min(alphas), max(alphas)), abs=TOLERANCE)
        assert row["value"] is None and row["ci_low"] is None
        assert "3 three-way splits" in row["note"] and "the 10 ways" in row["note"]


def test_too_many_three_way_splits_to_search_say_so_instead_of_a_range(monkeypatch):
    from analysis import stats

    monkeypatch.setattr(stats, "MAX_COMPOSITIONS", 9)
    plan = [("hedging", f"{i:03d}", "original", (0, 0), None) for i in range(10)]
    plan += [("hedging", f"s{i}", "original", (0, 1, 2), 1) for i in range(3)]

    results = analyze(make_frames(task1=plan))

    row = _agreement(results, source="release", level="overall", measure="krippendorff_alpha_nominal_first_two_reads")
    assert row["range_low"] is None and row["range_high"] is None and row["value"] is None
    assert row["note"].startswith("not computable: which two of the three reads of 3 three-way splits came first")
    assert "the 10 ways they can have been are more than the 9 searched" in row["note"]


def test_the_compositions_searched_are_every_way_of_spreading_the_splits():
    import itertools

    from analysis.stats import _compositions, compositions_count

    for k, parts in ((0, 3), (1, 3), (5, 3), (4, 2), (3, 1)):
        expected = sorted(c for c in itertools.product(range(k + 1), repeat=parts) if sum(c) == k)
        found = sorted(map(tuple, _compositions(k, parts).tolist()))
        assert found == expected and len(found) == compositions_count(k, parts)


def test_an_agreement_row_with_too_few_examples_keeps_its_value_and_shows_no_interval():
    plan = [("hedging", f"{i}", "original", (i % 2, 0, 0) if i % 2 else (0, 0), None) for i in range(9)]
    plan += [("terminology", f"{i}", "original", (i % 3, i % 3), None) for i in range(12)]
    results = analyze(make_frames(task1=plan, live=True))

    few = _agreement(results, source="initial_reads", group="hedging", measure="percent_agreement")
    assert few["value"] is not None and few["ci_low"] is None and few["ci_high"] is None
    assert few["note"] == "too few examples for a useful interval (n = 9; fewer than 10)"
    enough = _agreement(results, source="initial_reads", group="terminology", measure="percent_agreement")
    assert enough["ci_low"] is not None
