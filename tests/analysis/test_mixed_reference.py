"""analysis.mixed against R's lme4 on stored data (reference/make_mixed_reference.R regenerates them)."""

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from analysis.mixed import MixedFit, fit_lmm

REFERENCE = Path(__file__).parent / "reference" / "mixed"
TOLERANCE = 1e-6  # the same estimator, each optimizer stopped at its own tolerance
FORMULAS = {
    "overall": ("reader", "exam", "reader:variation"),
    "overall_without_interaction": ("reader", "exam"),
}


def _cases():
    for name in ("small", "published"):
        reference = json.loads((REFERENCE / f"{name}.json").read_text())
        for fit in reference["fits"]:
            yield pytest.param(name, fit, id=f"{name}-{fit}")


def _fit(data: pd.DataFrame, fit: str) -> MixedFit:
    if fit.startswith("variation:"):
        data = data[data["variation"] == fit.split(":", 1)[1]]
    terms = FORMULAS.get(fit, ("reader", "exam"))
    codes = {
        "reader": data["reader"].to_numpy(),
        "exam": data["exam"].to_numpy(),
        "reader:variation": (data["reader"] + ":" + data["variation"]).to_numpy(),
    }
    X = np.column_stack([np.ones(len(data)), data["alternative"].to_numpy()])
    return fit_lmm(data["score"].to_numpy(), X, ["(Intercept)", "alternative"], {t: codes[t] for t in terms})


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


@pytest.mark.parametrize("name", ["small", "published"])
def test_the_ordinal_model_comes_to_the_same_conclusion(name):
    # clmm estimates another quantity (a log-odds ratio, not a difference in score), so only its
    # direction and its significance are compared; the README gives both numbers.
    data = pd.read_csv(REFERENCE / f"{name}.csv", dtype={"reader": str, "exam": str, "variation": str})
    clmm = json.loads((REFERENCE / f"{name}.json").read_text())["clmm"]

    estimate, _, _, _, p = _fit(data, "overall_without_interaction").wald("alternative")

    assert np.sign(estimate) == np.sign(clmm["estimate"])
    assert (p < 0.05) == (clmm["p"] < 0.05)


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
