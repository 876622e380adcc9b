"""Every statistic against its reference implementation, to 1e-9.

krippendorff, statsmodels and scipy are installed with our pins and are called here directly.
Gwet's irrCAC 0.4.4 is not installable with our pins (it requires pandas<3 and scipy==1.12.0):
its values are in reference/irrcac.json, computed by reference/make_irrcac_reference.py in an
environment of its own, and the test below also checks the worked example printed in irrCAC's
documentation (5 decimals, so to 5e-6).
"""

import json
import math
from pathlib import Path
from unittest import mock

import krippendorff
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import stats as scipy_stats
from statsmodels.stats.inter_rater import fleiss_kappa as statsmodels_fleiss_kappa
from statsmodels.stats.multitest import multipletests

from analysis import stats
from tests.hypothesis_profiles import examples

TOLERANCE = 1e-9
IRRCAC = json.loads((Path(__file__).parent / "reference" / "irrcac.json").read_text())


def _counts(case: dict) -> np.ndarray:
    categories = case["categories"]
    return np.array([[sum(1 for v in row if v == c) for c in categories] for row in case["ratings"]], dtype=float)


def _ours(counts: np.ndarray) -> dict[str, stats.Result]:
    q = counts.shape[1]
    return {
        "fleiss_kappa": stats.fleiss_kappa(counts),
        "gwet_ac1": stats.gwet_ac(counts),
        "gwet_ac2_ordinal": stats.gwet_ac(counts, stats.ordinal_weights(q)),
        "krippendorff_alpha_nominal": stats.krippendorff_alpha(counts, "nominal"),
        "krippendorff_alpha_ordinal": stats.krippendorff_alpha(counts, "ordinal"),
    }


@pytest.mark.parametrize("name", sorted(IRRCAC))
def test_agreement_coefficients_and_intervals_equal_irrcac(name):
    case = IRRCAC[name]
    for measure, result in _ours(_counts(case)).items():
        expected = case["values"][measure]
        assert [result.value, result.low, result.high] == pytest.approx(expected, abs=TOLERANCE), measure


def test_the_worked_example_in_irrcacs_documentation():
    # irrCAC's raw.py docstring, data raw_4raters: AC1 0.77544 (0.46081, 1), Fleiss 0.76117 (0.42438, 1).
    ours = _ours(_counts(IRRCAC["raw_4raters"]))
    assert [ours["gwet_ac1"].value, ours["gwet_ac1"].low, ours["gwet_ac1"].high] == pytest.approx(
        [0.77544, 0.46081, 1], abs=5e-6
    )
    assert [ours["fleiss_kappa"].value, ours["fleiss_kappa"].low, ours["fleiss_kappa"].high] == pytest.approx(
        [0.76117, 0.42438, 1], abs=5e-6
    )
    # Krippendorff's own worked example (the same 4 coders and 12 units): nominal 0.743, ordinal 0.815.
    assert round(ours["krippendorff_alpha_nominal"].value, 3) == 0.743
    assert round(ours["krippendorff_alpha_ordinal"].value, 3) == 0.815


@pytest.mark.parametrize("name", sorted(IRRCAC))
@pytest.mark.parametrize("level", ["nominal", "ordinal"])
def test_krippendorffs_alpha_equals_the_krippendorff_package_on_raw_ratings(name, level):
    case = IRRCAC[name]
    reliability = np.array([[np.nan if v is None else v for v in row] for row in case["ratings"]]).T
    expected = krippendorff.alpha(
        reliability_data=reliability, level_of_measurement=level, value_domain=case["categories"]
    )
    assert stats.krippendorff_alpha(_counts(case), level).value == pytest.approx(expected, abs=TOLERANCE)


@settings(max_examples=examples(200))
@given(
    st.lists(st.lists(st.integers(0, 3), min_size=3, max_size=3), min_size=2, max_size=60),
    st.sampled_from(["nominal", "ordinal"]),
)
def test_krippendorffs_alpha_equals_the_krippendorff_package_on_any_counts(rows, level):
    # Units of 0 to 9 reads over three categories: those with fewer than two reads pair with nothing.
    counts = np.array(rows, dtype=float)
    pairable = counts[counts.sum(axis=1) >= 2]
    if len(pairable) < 2 or (pairable.sum(axis=0) > 0).sum() < 2:
        return  # undefined (no unit pairs, or one category everywhere): the tests above say why
    ours = stats.krippendorff_alpha(counts, level)
    assert ours.value == pytest.approx(
        krippendorff.alpha(value_counts=counts, level_of_measurement=level), abs=TOLERANCE
    )


@pytest.mark.parametrize("name", ["two_readers_60", "skewed_80"])
def test_fleiss_kappa_equals_statsmodels_on_complete_data(name):
    counts = _counts(IRRCAC[name])
    assert stats.fleiss_kappa(counts).value == pytest.approx(statsmodels_fleiss_kappa(counts), abs=TOLERANCE)


def test_percent_agreement_is_the_share_of_agreeing_examples_with_a_wilson_interval():
    counts = _counts(IRRCAC["two_readers_60"])
    agreeing = int((counts.max(axis=1) == 2).sum())
    result = stats.percent_agreement(counts)
    assert result.value == agreeing / 60
    assert (result.low, result.high) == pytest.approx(_wilson(agreeing, 60), abs=TOLERANCE)


def _wilson(k: int, n: int) -> tuple[float, float]:
    # Wilson (1927), written out.
    z = scipy_stats.norm.ppf(0.975)
    p = k / n
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z / (1 + z * z / n) * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n))
    return centre - half, centre + half


@pytest.mark.parametrize(("k", "n"), [(0, 10), (3, 10), (147, 240), (10, 10), (1, 1)])
def test_wilson_interval_equals_the_closed_form(k, n):
    result = stats.wilson(k, n)
    assert result.value == k / n
    assert (result.low, result.high) == pytest.approx(_wilson(k, n), abs=TOLERANCE)


def test_holm_equals_statsmodels():
    p_values = [0.01, 0.04, 0.03, 0.2, 0.005]
    assert stats.holm(p_values) == pytest.approx(list(multipletests(p_values, method="holm")[1]), abs=TOLERANCE)


@settings(max_examples=examples(200))
@given(
    st.lists(
        st.one_of(st.floats(0, 1), st.sampled_from([0.0, 0.01, 0.05, 0.5, 1.0])),  # ties, 0 and 1
        min_size=1,
        max_size=40,
    )
)
def test_holm_equals_statsmodels_on_any_p_values(p_values):
    with mock.patch("gc.collect", return_value=0):  # the reference's own garbage collection: its cost only
        expected = list(multipletests(p_values, method="holm")[1])
    assert stats.holm(p_values) == pytest.approx(expected, abs=TOLERANCE)
