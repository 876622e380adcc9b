"""analysis.mixed against R's lme4 (lmer, glmer) and lmerTest on stored data (reference/make_mixed_reference.R
regenerates them)."""

import dataclasses
import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from analysis import mixed
from analysis.frames import RELEASE_FILES, ReleaseFrames
from analysis.mixed import MixedFit, fit_glmm, fit_lmm
from analysis.result_data import TASK1_LABELS
from analysis.results import MAX_LOGIT_VARIANCE, analyze, with_fits
from analysis.stats import NotComputable

REFERENCE = Path(__file__).parent / "reference" / "mixed"
TOLERANCE = 1e-6  # the same estimator, each optimizer stopped at its own tolerance
FORMULAS = {
    "overall": ("reader", "exam", "reader:variation"),
    "overall_without_interaction": ("reader", "exam"),
}


# "overshoot": random scores on a live study's design on which L-BFGS-B, unbounded, ran theta to where
# X'V^-1 X could not be factorised (analysis.mixed.THETA_MAX); lme4 fits it with every variance finite.
DATA_SETS = ("small", "published", "overshoot")


def _cases():
    for name in DATA_SETS:
        reference = json.loads((REFERENCE / f"{name}.json").read_text())
        for fit in reference["fits"]:
            yield pytest.param(name, fit, id=f"{name}-{fit}")


def _design(data: pd.DataFrame, fit: str) -> tuple[pd.DataFrame, np.ndarray, dict[str, np.ndarray]]:
    """The reads of one stored fit, its fixed-effects matrix and its random terms."""
    if fit.startswith("variation:"):
        data = data[data["variation"] == fit.split(":", 1)[1]]
    terms = FORMULAS.get(fit, ("reader", "exam"))
    codes = {
        "reader": data["reader"].to_numpy(),
        "exam": data["exam"].to_numpy(),
        "reader:variation": (data["reader"] + ":" + data["variation"]).to_numpy(),
    }
    X = np.column_stack([np.ones(len(data)), data["alternative"].to_numpy()])
    return data, X, {t: codes[t] for t in terms}


def _fit(data: pd.DataFrame, fit: str) -> MixedFit:
    data, X, terms = _design(data, fit)
    return fit_lmm(data["score"].to_numpy(), X, ["(Intercept)", "alternative"], terms)


@pytest.mark.parametrize(("name", "fit"), list(_cases()))
def test_the_reml_fit_equals_lme4s(name, fit):
    data = pd.read_csv(REFERENCE / f"{name}.csv", dtype={"reader": str, "exam": str, "variation": str})
    expected = json.loads((REFERENCE / f"{name}.json").read_text())["fits"][fit]

    ours = _fit(data, fit)

    assert ours.beta == pytest.approx(expected["beta"], abs=TOLERANCE)
    assert ours.se == pytest.approx(expected["se"], abs=TOLERANCE)
    assert ours.reml_deviance == pytest.approx(expected["reml_deviance"], abs=TOLERANCE)
    for term, variance in expected["variances"].items():
        assert ours.variances[term] == pytest.approx(variance, abs=TOLERANCE), term
    _, _, low, high, _ = ours.wald("alternative")
    assert (low, high) == pytest.approx(expected["ci"], abs=TOLERANCE)


@pytest.mark.parametrize(("name", "fit"), list(_cases()))
def test_the_t_test_on_satterthwaites_df_equals_lmertests(name, fit):
    data = pd.read_csv(REFERENCE / f"{name}.csv", dtype={"reader": str, "exam": str, "variation": str})
    expected = json.loads((REFERENCE / f"{name}.json").read_text())["fits"][fit]["satterthwaite"]

    _, _, df, low, high, p = _fit(data, fit).t_test("alternative")

    assert df == pytest.approx(expected["df"], rel=TOLERANCE)
    assert (low, high) == pytest.approx(expected["ci"], abs=TOLERANCE)
    assert p == pytest.approx(expected["p"], abs=TOLERANCE)


def test_with_few_exams_the_t_interval_is_wider_than_walds():
    data = pd.read_csv(REFERENCE / "small.csv", dtype={"reader": str, "exam": str, "variation": str})

    ours = _fit(data, "variation:v01")
    _, _, wald_low, wald_high, wald_p = ours.wald("alternative")
    _, _, df, low, high, p = ours.t_test("alternative")

    assert df < 30
    assert low < wald_low and high > wald_high and p > wald_p


@pytest.mark.parametrize("name", ["small", "published"])
def test_the_ordinal_model_comes_to_the_same_conclusion(name):
    # clmm estimates another quantity (a log-odds ratio, not a difference in score), so only its
    # direction and its significance are compared; the README gives both numbers.
    data = pd.read_csv(REFERENCE / f"{name}.csv", dtype={"reader": str, "exam": str, "variation": str})
    clmm = json.loads((REFERENCE / f"{name}.json").read_text())["clmm"]

    estimate, _, _, _, p = _fit(data, "overall_without_interaction").wald("alternative")

    assert np.sign(estimate) == np.sign(clmm["estimate"])
    assert (p < 0.05) == (clmm["p"] < 0.05)


def _logistic_cases():
    for name in DATA_SETS:
        reference = json.loads((REFERENCE / f"{name}.json").read_text())
        for fit in reference["logistic"]:
            yield pytest.param(name, fit, id=f"{name}-{fit}")


def _fit_logistic(data: pd.DataFrame, fit: str, max_variance: float | None = MAX_LOGIT_VARIANCE):
    data, X, terms = _design(data, fit)
    realistic = (data["score"] == 0).astype(int).to_numpy()
    return fit_glmm(realistic, X, ["(Intercept)", "alternative"], terms, max_variance=max_variance)


@pytest.mark.parametrize(("name", "fit"), list(_logistic_cases()))
def test_the_logistic_fit_equals_glmers(name, fit):
    # Laplace's deviance is minimized by both; the standard errors come from lme4's own
    # finite-difference Hessian (deriv12, step 1e-4), so they agree to its precision, not to 1e-9.
    data = pd.read_csv(REFERENCE / f"{name}.csv", dtype={"reader": str, "exam": str, "variation": str})
    expected = json.loads((REFERENCE / f"{name}.json").read_text())["logistic"][fit]

    ours = _fit_logistic(data, fit)

    if max(expected["variances"].values()) > MAX_LOGIT_VARIANCE:
        # Near-complete separation: the likelihood is flat and each optimizer stops somewhere on it.
        # Searched up to the results' bound, ours stops there and says why; searched without one, it
        # must end at least as far down as glmer.
        assert isinstance(ours, NotComputable) and "near-complete separation" in ours.reason
        unbounded = _fit_logistic(data, fit, max_variance=None)
        assert unbounded.deviance <= expected["deviance"] + 1e-6
        assert max(unbounded.variances.values()) > MAX_LOGIT_VARIANCE
        return
    _assert_equals_glmers(ours, expected)


def _assert_equals_glmers(ours: mixed.LogisticFit, expected: dict) -> None:
    assert ours.deviance == pytest.approx(expected["deviance"], abs=1e-5)
    assert ours.beta == pytest.approx(expected["beta"], rel=1e-5, abs=1e-5)
    assert ours.se == pytest.approx(expected["se"], rel=1e-4)
    for term, variance in expected["variances"].items():
        assert ours.variances[term] == pytest.approx(variance, rel=1e-4, abs=1e-5), term
    assert ours.wald("alternative")[4] == pytest.approx(expected["p"], rel=1e-3, abs=1e-6)


@pytest.mark.parametrize("solved", ["densely", "by blocks", "by sparse blocks"])
def test_each_way_of_solving_the_laplace_system_gives_glmers_fit(monkeypatch, solved):
    # The model's size chooses the way (DENSE_MODEL_CELLS, BLOCK_PAIRS): each is held to glmer on the same reads.
    monkeypatch.setattr(mixed, "DENSE_MODEL_CELLS", 10**12 if solved == "densely" else 0)
    monkeypatch.setattr(mixed, "BLOCK_PAIRS", 0 if solved == "by sparse blocks" else 10**12)
    data = pd.read_csv(REFERENCE / "small.csv", dtype={"reader": str, "exam": str, "variation": str})
    expected = json.loads((REFERENCE / "small.json").read_text())["logistic"]["overall"]
    _, X, terms = _design(data, "overall")

    laplace = mixed._Laplace(np.zeros(len(X)), X, terms)
    assert (laplace.dense is not None, laplace.pairs) == {
        "densely": (True, True),
        "by blocks": (False, True),
        "by sparse blocks": (False, False),
    }[solved]
    _assert_equals_glmers(_fit_logistic(data, "overall"), expected)


def test_a_logistic_model_of_reads_all_alike_says_why():
    X = np.column_stack([np.ones(8), [0, 0, 0, 0, 1, 1, 1, 1]])
    terms = {"reader": np.arange(8) % 4, "exam": np.arange(8) % 2}
    assert "complete separation" in fit_glmm(np.array([1, 1, 1, 1, 0, 0, 0, 0]), X, ["a", "b"], terms).reason


def test_what_cannot_be_fitted_says_why():
    X = np.column_stack([np.ones(6), [0, 0, 0, 1, 1, 1]])
    assert (
        "one reader only" in fit_lmm(np.arange(6), X, ["a", "b"], {"reader": np.zeros(6), "exam": np.arange(6)}).reason
    )
    assert (
        "cannot be told apart"
        in fit_lmm(
            np.arange(6), np.ones((6, 2)), ["a", "b"], {"reader": np.arange(6) % 2, "exam": np.arange(6) % 3}
        ).reason
    )


def test_a_fit_that_runs_to_the_bound_of_theta_says_why_and_shows_no_numbers(monkeypatch):
    data = pd.read_csv(REFERENCE / "small.csv", dtype={"reader": str, "exam": str, "variation": str})
    # The exams' standard deviation is about half the residual's here; a bound below it is reached.
    monkeypatch.setattr(mixed, "THETA_MAX", 0.2)

    fit = _fit(data, "overall_without_interaction")

    assert isinstance(fit, NotComputable)
    assert "residual variance cannot be estimated" in fit.reason


def test_a_fit_whose_every_start_fails_to_factorise_says_why(monkeypatch):
    data = pd.read_csv(REFERENCE / "small.csv", dtype={"reader": str, "exam": str, "variation": str})

    def singular(self, theta):
        raise np.linalg.LinAlgError("not positive definite")

    monkeypatch.setattr(mixed._Profile, "solve", singular)

    fit = _fit(data, "overall_without_interaction")

    assert isinstance(fit, NotComputable)
    assert "could not be factorised" in fit.reason


def _live_frames(data: pd.DataFrame) -> ReleaseFrames:
    """The stored reads as a live study's frames: every report has a consensus (which does not enter the model)."""
    examples = data.drop_duplicates(["variation", "exam", "alternative"])
    key = pd.DataFrame(
        {
            "dataset": "mimic-cxr",
            "study_id": examples["exam"].to_numpy(),
            "reref_variation": examples["variation"].to_numpy(),
            "report_type": np.where(examples["alternative"] == 1, "alternative", "original"),
        }
    )
    consensus = key.assign(rating="Realistic", label_source="unanimous", n_annotations="2")
    full = key.loc[key.index.repeat(2)].assign(annotation_index="0", rating="Realistic", rationale="")
    reads = pd.DataFrame(
        {
            "task": "task1",
            "dataset": "mimic-cxr",
            "study_id": data["exam"].to_numpy(),
            "reref_variation": data["variation"].to_numpy(),
            "report_type": np.where(data["alternative"] == 1, "alternative", "original"),
            "slot": np.tile(["1", "2"], len(data) // 2),
            "reader": data["reader"].to_numpy(),
            "rating": np.array(TASK1_LABELS)[data["score"].to_numpy()],
            "rationale": "",
            "duration_ms": "",
        }
    )
    tables = {Path(name).stem: pd.DataFrame(columns=columns) for name, columns in RELEASE_FILES.items()}
    tables["task1_consensus"] = consensus.reindex(columns=RELEASE_FILES["task1/task1_consensus.csv"], fill_value="")
    tables["task1_full"] = full.reindex(columns=RELEASE_FILES["task1/task1_full.csv"], fill_value="")
    return ReleaseFrames(**{name: frame.astype(str) for name, frame in tables.items()}, reads=reads)


@pytest.fixture(scope="module")
def published_live():
    """The published-shape reads analysed as a live study, once for the tests that read its tables."""
    data = pd.read_csv(REFERENCE / "published.csv", dtype={"reader": str, "exam": str, "variation": str})
    return data, analyze(_live_frames(data), taxonomy=())


def test_the_results_table_gives_lme4s_numbers_on_a_live_studys_reads(published_live):
    data, results = published_live
    expected = json.loads((REFERENCE / "published.json").read_text())["fits"]

    table = results.tables["task1_mixed_model"]

    rows = {(r["level"], r["group"]): r for r in table.to_dict(orient="records")}
    for (level, group), fit in [(("overall", "all"), expected["overall"])] + [
        (("variation", name.split(":", 1)[1]), value)
        for name, value in expected.items()
        if name.startswith("variation:")
    ]:
        row = rows[(level, group)]
        assert [row["estimate"], row["se"]] == pytest.approx([fit["beta"][1], fit["se"][1]], abs=TOLERANCE)
        satterthwaite = fit["satterthwaite"]
        assert row["df"] == pytest.approx(satterthwaite["df"], rel=TOLERANCE)
        assert [row["ci_low"], row["ci_high"]] == pytest.approx(satterthwaite["ci"], abs=TOLERANCE)
        assert row["p_value"] == pytest.approx(satterthwaite["p"], abs=TOLERANCE)
        assert row["var_reader"] == pytest.approx(fit["variances"]["reader"], abs=TOLERANCE)
        assert row["var_exam"] == pytest.approx(fit["variances"]["exam"], abs=TOLERANCE)
        assert row["var_residual"] == pytest.approx(fit["variances"]["residual"], abs=TOLERANCE)
    overall = rows[("overall", "all")]
    assert overall["var_reader_variation"] == pytest.approx(
        expected["overall"]["variances"]["reader:variation"], abs=TOLERANCE
    )
    assert (overall["n_reads"], overall["n_readers"], overall["n_exams"]) == (480, 13, data["exam"].nunique())


def test_the_realistic_table_gives_glmers_odds_ratios_on_a_live_studys_reads(published_live):
    _, results = published_live
    expected = json.loads((REFERENCE / "published.json").read_text())["logistic"]

    table = results.tables["task1_realistic_mixed_model"]

    rows = {(r["level"], r["group"]): r for r in table.to_dict(orient="records")}
    shown = 0
    for name, fit in expected.items():
        if name == "overall_without_interaction":
            continue
        row = rows[("overall", "all")] if name == "overall" else rows[("variation", name.split(":", 1)[1])]
        if max(fit["variances"].values()) > 100:
            assert row["odds_ratio"] is None and row["var_exam"] is None
            assert row["note"].startswith("a random-effect variance reaches 100 on the logit scale")
            continue
        shown += 1
        assert row["log_odds_ratio"] == pytest.approx(fit["beta"][1], rel=1e-5, abs=1e-5)
        assert row["odds_ratio"] == pytest.approx(np.exp(fit["beta"][1]), rel=1e-5)
        assert row["se"] == pytest.approx(fit["se"][1], rel=1e-4)
        assert row["p_value"] == pytest.approx(fit["p"], rel=1e-3, abs=1e-6)
        assert row["var_exam"] == pytest.approx(fit["variances"]["exam"], rel=1e-4, abs=1e-5)
    assert shown >= 10


def test_degrees_of_freedom_that_cannot_be_computed_leave_no_interval_and_say_why(monkeypatch):
    from analysis import mixed

    monkeypatch.setattr(mixed, "_satterthwaite", lambda *args: np.array([np.inf, np.nan]))
    data = pd.read_csv(REFERENCE / "small.csv", dtype={"reader": str, "exam": str, "variation": str})

    table = analyze(_live_frames(data), taxonomy=()).tables["task1_mixed_model"]

    overall = table[table["level"] == "overall"].iloc[0]
    assert overall["estimate"] is not None
    assert overall["df"] is None and overall["ci_low"] is None and overall["p_value"] is None
    assert overall["note"].startswith("Satterthwaite's degrees of freedom not computable")


def test_a_group_too_large_for_a_laplace_fit_says_so(monkeypatch):
    from analysis import results

    monkeypatch.setattr(results, "MAX_LOGISTIC_READS", 50)
    data = pd.read_csv(REFERENCE / "small.csv", dtype={"reader": str, "exam": str, "variation": str})

    table = analyze(_live_frames(data), taxonomy=()).tables["task1_realistic_mixed_model"]

    overall = table[table["level"] == "overall"].iloc[0]
    assert overall["odds_ratio"] is None
    assert overall["note"].startswith(f"not fitted: {len(data)} reads, more than the 50")
    assert table[table["level"] == "variation"]["log_odds_ratio"].notna().all()


def test_from_a_release_the_table_says_the_reader_component_cannot_be_estimated_and_why():
    data = pd.read_csv(REFERENCE / "small.csv", dtype={"reader": str, "exam": str, "variation": str})
    frames = dataclasses.replace(_live_frames(data), reads=None)

    results = analyze(frames)

    for name, value in (("task1_mixed_model", "estimate"), ("task1_realistic_mixed_model", "odds_ratio")):
        table = results.tables[name]
        assert len(table) == 1 and table.iloc[0][value] is None
        assert table.iloc[0]["note"].startswith("not computable from a release: annotator identities are removed")


def test_fits_left_to_run_beside_other_work_fill_the_same_tables_and_document(published_live):
    data, _ = published_live
    frames = _live_frames(data[data["variation"].isin(sorted(data["variation"].unique())[:2])])
    whole = analyze(frames, taxonomy=())

    deferred = analyze(frames, taxonomy=(), defer_fits=True)

    assert deferred.fits is not None
    assert len(deferred.fits.jobs) == 2 * 3  # both models: overall and the 2 variations (no taxonomy: no dimension)
    assert deferred.tables["task1_mixed_model"].empty and deferred.document["tables"]["task1_mixed_model"] == []
    assert with_fits(deferred, [lambda: "a figure"]) == ["a figure"]
    assert deferred.fits is None
    assert list(deferred.tables) == list(whole.tables)  # the tables' order kept
    for name in ("task1_mixed_model", "task1_realistic_mixed_model"):
        pd.testing.assert_frame_equal(deferred.tables[name], whole.tables[name])
    assert deferred.document == whole.document
    assert with_fits(deferred, []) == []  # nothing left to run


@pytest.mark.parametrize("lower", [True, False])
def test_the_fits_cholesky_is_scipys_bit_for_bit(lower):
    from scipy import linalg

    rng = np.random.default_rng(11)
    keep = np.tril if lower else np.triu
    for n in (1, 2, 5, 17, 40):
        a = rng.normal(size=(n, n))
        # Symmetric positive definite in the triangle that is read; noise in the other, which is not.
        matrix = keep(a @ a.T + n * np.eye(n)) + (np.triu if lower else np.tril)(
            rng.normal(size=(n, n)), 1 if lower else -1
        )
        for b in (rng.normal(size=n), rng.normal(size=(n, 3))):
            factor = mixed._cholesky(matrix, lower=lower)
            theirs = linalg.cho_factor(matrix, lower=lower)[0]
            assert np.array_equal(keep(factor.T), keep(theirs))
            assert np.array_equal(np.diag(factor), np.diag(theirs))
            assert np.array_equal(mixed._cho_solve(factor, b, lower=lower), linalg.cho_solve((theirs, lower), b))
    with pytest.raises(np.linalg.LinAlgError):
        mixed._cholesky(-np.eye(3), lower=lower)
    with pytest.raises(ValueError, match="infs or NaNs"):
        mixed._cholesky(np.full((2, 2), np.nan), lower=lower)
    with pytest.raises(ValueError, match="infs or NaNs"):
        mixed._cho_solve(np.eye(2), np.array([1.0, np.inf]), lower=lower)


@pytest.mark.parametrize("fit", ["overall", "variation:v01"])
def test_numbering_the_levels_in_the_order_of_their_names_gives_the_same_fits_to_the_bit(fit):
    # The results number each term's levels once (results._model_reads, pandas' factorize with sort),
    # and the models then number integers instead of strings: the same levels in the same order.
    data = pd.read_csv(REFERENCE / "small.csv", dtype={"reader": str, "exam": str, "variation": str})
    data, X, terms = _design(data, fit)
    numbered = {name: pd.factorize(values, sort=True)[0] for name, values in terms.items()}
    y, names = data["score"].to_numpy(), ["(Intercept)", "alternative"]

    by_name, by_number = fit_lmm(y, X, names, terms), fit_lmm(y, X, names, numbered)
    assert by_number.beta.tobytes() == by_name.beta.tobytes()
    assert by_number.se.tobytes() == by_name.se.tobytes() and by_number.df.tobytes() == by_name.df.tobytes()
    assert by_number.variances == by_name.variances and by_number.reml_deviance == by_name.reml_deviance
    realistic = (data["score"] == 0).astype(int).to_numpy()
    by_name, by_number = fit_glmm(realistic, X, names, terms), fit_glmm(realistic, X, names, numbered)
    assert by_number.beta.tobytes() == by_name.beta.tobytes() and by_number.se.tobytes() == by_name.se.tobytes()
    assert by_number.deviance == by_name.deviance
