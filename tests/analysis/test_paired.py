"""analysis.paired against its references: scipy's permutation_test and binomtest, statsmodels'
McNemar, and Newcombe's (1998) own worked values."""

import numpy as np
import pytest
from scipy import stats as scipy_stats
from statsmodels.stats.contingency_tables import mcnemar

from analysis import paired
from analysis.paired import PairedTable, SignFlip
from analysis.stats import Estimate, NotComputable

TOLERANCE = 1e-9


def _scipy_p(differences, clusters, theta=0.0):
    """scipy's exact sign-flip p of the exams' sums of (d - theta): every arrangement listed."""
    _, cluster = np.unique(clusters, return_inverse=True)
    shifted = np.bincount(cluster, weights=np.asarray(differences, dtype=float) - theta)
    return scipy_stats.permutation_test(
        (shifted,), lambda x, axis: np.sum(x, axis=axis), permutation_type="samples", n_resamples=np.inf
    ).pvalue


def _random_study(rng, pairs, exams):
    differences = rng.choice([-2, -1, 0, 1, 2], size=pairs, p=[0.1, 0.2, 0.3, 0.3, 0.1])
    clusters = np.concatenate([np.arange(exams), rng.integers(0, exams, size=pairs - exams)])
    return differences, rng.permutation(clusters)


@pytest.mark.parametrize("seed", range(12))
def test_the_p_value_equals_scipys_enumeration_of_every_arrangement_of_the_exams(seed):
    rng = np.random.default_rng(seed)
    exams = int(rng.integers(2, 15))
    differences, clusters = _random_study(rng, exams + int(rng.integers(0, 6)), exams)
    test = SignFlip(differences, clusters)

    for theta in (0.0, 0.5, float(rng.uniform(-2, 2))):
        assert test.p_value(theta) == pytest.approx(_scipy_p(differences, clusters, theta), abs=TOLERANCE)


def test_beyond_what_can_be_listed_the_p_value_is_still_exact():
    # 150 exams of +1 or -1: the sign-flip sum is 2 * Binomial(150, 1/2) - 150, so p is the
    # binomial test's (scipy), which no listing of 2^150 arrangements could give.
    rng = np.random.default_rng(4)
    differences = rng.choice([-1, 1], size=150, p=[0.4, 0.6])
    expected = scipy_stats.binomtest(int((differences > 0).sum()), 150).pvalue

    assert SignFlip(differences).p_value() == pytest.approx(expected, abs=TOLERANCE)


def test_an_exams_pairs_are_flipped_together():
    differences = np.array([1, 1, 1, 1, 1, 1, 1, -1])
    one_exam_each = SignFlip(differences).p_value()
    # The seven +1s from two exams: only 2^3 arrangements, so p cannot fall below 2/8.
    two_exams = SignFlip(differences, [0, 0, 0, 0, 1, 1, 1, 2]).p_value()

    assert one_exam_each == pytest.approx(_scipy_p(differences, np.arange(8)), abs=TOLERANCE)
    assert two_exams == pytest.approx(_scipy_p(differences, [0, 0, 0, 0, 1, 1, 1, 2]), abs=TOLERANCE)
    assert two_exams >= 0.25 > one_exam_each


@pytest.mark.parametrize("seed", range(40))
def test_the_interval_is_the_set_of_shifts_the_test_does_not_reject(seed):
    rng = np.random.default_rng(100 + seed)
    exams = int(rng.integers(6, 13))
    differences, clusters = _random_study(rng, exams + int(rng.integers(0, 4)), exams)
    test = SignFlip(differences, clusters)

    interval = test.interval()

    assert isinstance(interval, Estimate)
    assert (interval.low <= 0 <= interval.high) == (test.p_value(0.0) > 0.05)
    step = 1e-6
    for inside in (interval.low + step, interval.high - step):
        if interval.high - interval.low > 2 * step:
            assert _scipy_p(differences, clusters, inside) > 0.05
    for outside in (interval.low - step, interval.high + step):
        assert _scipy_p(differences, clusters, outside) <= 0.05


def test_an_interval_that_only_the_observed_difference_survives_has_zero_width():
    interval = SignFlip(np.ones(7)).interval()

    assert (interval.value, interval.low, interval.high) == (1.0, 1.0, 1.0)


def test_below_six_exams_no_difference_can_be_excluded_and_the_interval_says_so():
    five = SignFlip([2, 2, 2, 2, 2, 2], [0, 1, 2, 3, 4, 4]).interval()
    six = SignFlip([2, 2, 2, 2, 2, 2]).interval()

    assert isinstance(five, NotComputable)
    assert "too few exams for a useful interval (n = 5)" in five.reason
    assert isinstance(six, Estimate)
    assert paired.exams_too_few(5) and not paired.exams_too_few(6)
    assert paired.exams_too_few(8, alpha=0.05 / 11) and not paired.exams_too_few(9, alpha=0.05 / 11)


def test_the_adjusted_interval_is_wider_and_is_the_test_at_the_adjusted_level():
    differences = np.array([1, 1, 2, 0, 1, 1, 1, 0, 1, 2, 1, -1])
    test = SignFlip(differences)
    plain, adjusted = test.interval(0.95), test.interval(1 - 0.05 / 4)

    assert adjusted.low < plain.low and adjusted.high > plain.high
    assert _scipy_p(differences, np.arange(12), adjusted.low - 1e-6) <= 0.05 / 4
    assert _scipy_p(differences, np.arange(12), adjusted.low + 1e-6) > 0.05 / 4


def test_the_test_says_why_it_cannot_be_run():
    assert "1 pair: the test needs at least 2" in SignFlip([1]).test().reason
    assert "every exam's differences sum to 0" in SignFlip([1, -1, 0], [0, 0, 1]).test().reason
    with pytest.raises(ValueError, match="integer differences"):
        SignFlip([0.5, 1])


# Newcombe (1998), Table III: cells (e, f, g, h) = both, first only, second only, neither, n = the
# sum, and the printed 95% limits of method 10 (four decimals).
NEWCOMBE_TABLE_III = [
    ((36, 12, 2, 0), (0.0569, 0.3404)),
    ((20, 12, 2, 16), (0.0562, 0.3292)),
    ((18, 12, 2, 18), (0.0562, 0.3290)),
    ((36, 14, 0, 0), (0.1528, 0.4167)),
    ((35, 14, 0, 1), (0.1461, 0.4175)),
    ((18, 14, 0, 18), (0.1441, 0.3963)),
    ((2, 97, 1, 0), (0.8721, 0.9854)),
    ((0, 29, 1, 0), (0.6666, 0.9882)),
    ((2, 98, 0, 0), (0.9178, 0.9945)),
    ((1, 98, 0, 1), (0.9171, 0.9916)),
    ((0, 30, 0, 0), (0.8395, 1.0)),
    ((54, 0, 0, 0), (-0.0664, 0.0664)),
    ((53, 0, 0, 1), (-0.0729, 0.0729)),
    ((30, 0, 0, 24), (-0.0358, 0.0358)),
    ((29, 0, 0, 25), (-0.0354, 0.0354)),
    ((28, 0, 0, 26), (-0.0352, 0.0352)),
    ((27, 0, 0, 27), (-0.0351, 0.0351)),
]


@pytest.mark.parametrize(("cells", "limits"), NEWCOMBE_TABLE_III)
def test_the_paired_difference_interval_is_newcombes_method_10_as_printed(cells, limits):
    result = paired.newcombe_paired(PairedTable(*cells))

    _, f, g, _ = cells
    assert result.value == pytest.approx((f - g) / sum(cells), abs=TOLERANCE)
    assert (result.low, result.high) == pytest.approx(limits, abs=5e-5)  # half a unit in the fourth decimal


def test_without_the_continuity_corrected_phi_newcombes_table_is_not_reproduced():
    # Method 8 (phi uncorrected) prints (0.0618, 0.3242) for (20, 12, 2, 16): the rows differ, so
    # the check above can tell the two methods apart.
    result = paired.newcombe_paired(PairedTable(20, 12, 2, 16))
    assert abs(result.low - 0.0618) > 5e-4


@pytest.mark.parametrize("cells", [(20, 12, 2, 16), (3, 0, 4, 3), (5, 1, 1, 5), (0, 9, 2, 1)])
def test_the_exact_mcnemar_test_is_statsmodels_and_the_binomial_test_on_discordant_pairs(cells):
    both, first, second, neither = cells
    p = paired.mcnemar_exact(PairedTable(*cells))

    assert p == pytest.approx(mcnemar([[both, first], [second, neither]], exact=True).pvalue, abs=TOLERANCE)
    assert p == pytest.approx(min(1.0, scipy_stats.binomtest(first, first + second).pvalue), abs=TOLERANCE)


def test_without_discordant_pairs_mcnemar_says_why():
    assert "no discordant pairs" in paired.mcnemar_exact(PairedTable(4, 0, 0, 2)).reason


# Beyond the exact budget: the normal approximation ---------------------------------------------


def _approximated(differences, clusters=None) -> SignFlip:
    test = SignFlip(differences, clusters)
    test.exact = False
    return test


def test_a_large_study_is_tested_by_the_normal_approximation_and_says_so():
    rng = np.random.default_rng(7)
    differences, clusters = _random_study(rng, 3000, 2500)

    test = SignFlip(differences, clusters)

    assert not test.exact
    assert test.method == "sign-flip over 2500 exams, normal approximation (exact mean and variance)"
    assert SignFlip(differences[:100], clusters[:100]).method.startswith("exact sign-flip over")


@pytest.mark.parametrize("seed", range(6))
def test_the_normal_approximation_is_close_to_the_exact_distribution_where_both_run(seed):
    rng = np.random.default_rng(seed)
    differences, clusters = _random_study(rng, 200, 160)
    exact = SignFlip(differences, clusters)
    assert exact.exact

    approximated = _approximated(differences, clusters)

    assert approximated.p_value() == pytest.approx(exact.p_value(), abs=0.005)
    exact_interval, approximate_interval = exact.interval(), approximated.interval()
    assert approximate_interval.low == pytest.approx(exact_interval.low, abs=0.01)
    assert approximate_interval.high == pytest.approx(exact_interval.high, abs=0.01)


@pytest.mark.parametrize("seed", range(6))
def test_the_normal_interval_is_the_set_of_shifts_its_test_does_not_reject(seed):
    rng = np.random.default_rng(seed)
    differences, clusters = _random_study(rng, 400, 300)
    test = _approximated(differences, clusters)

    interval = test.interval()

    assert test.p_value(interval.low) == pytest.approx(0.05, abs=TOLERANCE)
    assert test.p_value(interval.high) == pytest.approx(0.05, abs=TOLERANCE)
    assert interval.low < test.mean < interval.high
    assert (interval.low < 0 < interval.high) == (test.p_value(0.0) > 0.05)
    sums = np.bincount(np.unique(clusters, return_inverse=True)[1], weights=differences)
    step = np.gcd.reduce(np.abs(sums[sums != 0]).astype(int))
    expected = 2 * scipy_stats.norm.sf((abs(differences.sum()) - step) / np.sqrt((sums**2).sum()))
    assert test.p_value(0.0) == pytest.approx(expected, abs=TOLERANCE)


def test_the_method_names_the_exams_it_flipped():
    assert SignFlip([1]).method == "exact sign-flip over 1 exam"
    assert SignFlip([1, -1, 2], [0, 0, 1]).method == "exact sign-flip over 2 exams"
