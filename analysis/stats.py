"""The statistics of a study's results, as pure functions of numbers and arrays.

Nothing here knows of Django, of the release files or of the study's labels: ratings arrive as
ordinal scores (0 = Realistic / Equivalent, 1 = Minor, 2 = Major) or as a units x categories
matrix of counts (`counts[i, k]` = how many reads put unit i in category k), the form Gwet's
formulas and Krippendorff's coincidence matrices (and `krippendorff.alpha(value_counts=...)`) take.

A statistic that cannot be computed on the data it was given returns `NotComputable(reason)`,
never NaN and never an exception: a study half-way through has variations with one pair, tasks
with no examples and readers who all gave the same rating, and the results page must still show
every other number.

References:
- Wilson score interval: statsmodels `proportion_confint(method="wilson")`.
- Holm's step-down adjustment (Holm 1979), equal to statsmodels `multipletests(method="holm")`
  (tests/analysis/test_stats_reference.py), which is not called here: it runs a full garbage
  collection on every call, a fraction of a second in a worker that holds a study's data.
- Paired differences (the exact sign-flip test, Newcombe's interval, McNemar): `analysis.paired`.
- Fleiss' kappa, Gwet's AC1/AC2 and their 95% intervals: Gwet, "Handbook of Inter-Rater
  Reliability" (4th ed., 2014), as implemented in Gwet's irrCAC (variance conditional on the raters,
  t interval with n - 1 degrees of freedom, upper bound capped at 1).
- Krippendorff's alpha: Krippendorff's (2011) coincidence-matrix formula, as the `krippendorff` package
  computes it (tests hold the two equal); its interval is Gwet's (2014) variance for alpha
  with the weights of Krippendorff's metric (identity for nominal data; for ordinal data
  1 - d^2 / max d^2 with Krippendorff's rank distance d, taken from the observed marginals).
"""

import math
from dataclasses import dataclass

import numpy as np
from scipy import stats as scipy_stats
from statsmodels.stats.proportion import proportion_confint

CONFIDENCE = 0.95
BOOTSTRAP_RESAMPLES = 2000


@dataclass(frozen=True)
class NotComputable:
    """A statistic that the data do not define, and why (shown in place of the number)."""

    reason: str

    def as_dict(self) -> dict:
        return {"not_computable": self.reason}


@dataclass(frozen=True)
class Estimate:
    """A point estimate with its 95% confidence interval."""

    value: float
    low: float
    high: float

    def as_dict(self) -> dict:
        return {"value": self.value, "ci_low": self.low, "ci_high": self.high}


Result = Estimate | NotComputable


def wilson(successes: int, n: int) -> Result:
    """The proportion successes / n with its Wilson score 95% interval."""
    if n == 0:
        return NotComputable("no examples")
    low, high = proportion_confint(successes, n, alpha=1 - CONFIDENCE, method="wilson")
    return Estimate(successes / n, float(low), float(high))


def holm(p_values: list[float]) -> list[float]:
    """Holm-adjusted p-values, in the order given: the j-th smallest of m times (m - j + 1), made
    non-decreasing in that order and capped at 1."""
    if not p_values:
        return []
    p = np.asarray(p_values, dtype=float)
    order = np.argsort(p, kind="stable")
    stepped = np.maximum.accumulate(p[order] * np.arange(len(p), 0, -1))
    adjusted = np.empty_like(p)
    adjusted[order] = np.minimum(stepped, 1.0)
    return [float(value) for value in adjusted]


# Agreement ------------------------------------------------------------------------------------


def identity_weights(q: int) -> np.ndarray:
    return np.eye(q)


def ordinal_weights(q: int) -> np.ndarray:
    """Gwet's ordinal weights (irrCAC `weights="ordinal"`): 1 - C(|k-l|+1, 2) / C(q, 2)."""
    k = np.arange(q)
    span = np.abs(k[:, None] - k[None, :]) + 1
    raw = span * (span - 1) / 2
    return 1 - raw / raw.max()


def krippendorff_weights(counts: np.ndarray, level: str) -> np.ndarray:
    """1 - d^2 / max d^2 for Krippendorff's nominal or ordinal metric on these data's marginals."""
    q = counts.shape[1]
    if level == "nominal":
        return identity_weights(q)
    marginals = counts[counts.sum(axis=1) >= 2].sum(axis=0).astype(float)
    [distance] = _ordinal_distances(marginals[None])
    return 1 - distance / distance.max()


def _ordinal_distances(marginals: np.ndarray) -> np.ndarray:
    """Krippendorff's squared rank distance between every two categories, for each row of marginals
    (m x q, the pairable values per category): m x q x q."""
    q = marginals.shape[1]
    cumulative = np.concatenate([np.zeros((len(marginals), 1)), np.cumsum(marginals, axis=1)], axis=1)
    c, g = np.meshgrid(np.arange(q), np.arange(q), indexing="ij")
    low, high = np.minimum(c, g), np.maximum(c, g)
    span = cumulative[:, high + 1] - cumulative[:, low]
    return (span - (marginals[:, c] + marginals[:, g]) / 2) ** 2


def _t_interval(value: float, variance: float, n: int) -> Estimate:
    stderr = float(np.sqrt(variance)) or 1e-15
    low, high = scipy_stats.t.interval(CONFIDENCE, df=n - 1, loc=value, scale=stderr)
    return Estimate(float(value), float(low), float(min(1.0, high)))


def _prepare(counts: np.ndarray) -> tuple[np.ndarray, NotComputable | None]:
    counts = np.asarray(counts, dtype=float)
    counts = counts[counts.sum(axis=1) > 0]
    if int((counts.sum(axis=1) >= 2).sum()) < 2:
        return counts, NotComputable("fewer than 2 examples with two or more reads")
    return counts, None


def _same_rating_everywhere(counts: np.ndarray) -> bool:
    return int((counts.sum(axis=0) > 0).sum()) < 2


def percent_agreement(counts: np.ndarray) -> Result:
    """Share of units on which every read agrees, with its Wilson interval (two reads per unit)."""
    counts = np.asarray(counts, dtype=float)
    rated = counts[counts.sum(axis=1) >= 2]
    if len(rated) == 0:
        return NotComputable("no examples with two reads")
    agreeing = int((rated.max(axis=1) == rated.sum(axis=1)).sum())
    return wilson(agreeing, len(rated))


def _pairwise_agreement(counts: np.ndarray, weights: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    reads = counts.sum(axis=1)
    weighted = counts @ weights.T
    sum_q = (counts * (weighted - 1)).sum(axis=1)
    return reads, sum_q, reads >= 2


def fleiss_kappa(counts: np.ndarray, weights: np.ndarray | None = None) -> Result:
    """Fleiss' (generalized) kappa with Gwet's variance (irrCAC `CAC.fleiss`)."""
    counts, problem = _prepare(counts)
    if problem:
        return problem
    if _same_rating_everywhere(counts):
        return NotComputable("every read gave the same rating: chance agreement is 1 and kappa is undefined")
    n, q = counts.shape
    weights = identity_weights(q) if weights is None else weights
    reads, sum_q, multi = _pairwise_agreement(counts, weights)
    n2more = multi.sum()
    pa = (sum_q[multi] / (reads * (reads - 1))[multi]).sum() / n2more
    pi = (counts / reads[:, None]).sum(axis=0) / n
    pe = float((weights * np.outer(pi, pi)).sum())
    kappa = (pa - pe) / (1 - pe)
    denominator = reads * (reads - 1)
    denominator = denominator - (denominator == 0)
    kappa_i = (n / n2more) * (sum_q / denominator - pe * multi) / (1 - pe)
    pi_w = (weights @ pi + weights.T @ pi) / 2
    pe_i = (counts @ pi_w) / reads
    kappa_i_x = kappa_i - 2 * (1 - kappa) * (pe_i - pe) / (1 - pe)
    variance = ((kappa_i_x - kappa) ** 2).sum() / (n * (n - 1))
    return _t_interval(kappa, variance, n)


def gwet_ac(counts: np.ndarray, weights: np.ndarray | None = None) -> Result:
    """Gwet's AC1 (identity weights) or AC2 (other weights) with its variance (irrCAC `CAC.gwet`)."""
    counts, problem = _prepare(counts)
    if problem:
        return problem
    n, q = counts.shape
    weights = identity_weights(q) if weights is None else weights
    reads, sum_q, multi = _pairwise_agreement(counts, weights)
    n2more = multi.sum()
    pa = (sum_q[multi] / (reads * (reads - 1))[multi]).sum() / n2more
    pi = (counts / reads[:, None]).sum(axis=0) / n
    weight_sum = weights.sum()
    pe = weight_sum * (pi * (1 - pi)).sum() / (q * (q - 1))
    ac = (pa - pe) / (1 - pe)
    denominator = reads * (reads - 1)
    denominator = denominator - (denominator == 0)
    ac_i = (n / n2more) * (sum_q / denominator - pe * multi) / (1 - pe)
    pe_i = (weight_sum / (q * (q - 1))) * (counts @ (1 - pi)) / reads
    ac_i_x = ac_i - 2 * (1 - ac) * (pe_i - pe) / (1 - pe)
    variance = ((ac_i_x - ac) ** 2).sum() / (n * (n - 1))
    return _t_interval(ac, variance, n)


def krippendorff_alpha(counts: np.ndarray, level: str) -> Result:
    """Krippendorff's alpha (nominal or ordinal) with Gwet's interval. Computed from the coincidence
    matrix as one product (the `krippendorff` package builds a units x categories x categories array
    first: at 200,000 units, a tenth of a second per call); tests hold the two equal."""
    counts, problem = _prepare(counts)
    if problem:
        return problem
    counts = counts[counts.sum(axis=1) >= 2]
    if _same_rating_everywhere(counts):
        return NotComputable("every read gave the same rating: expected disagreement is 0 and alpha is undefined")
    alpha = float(_alphas(coincidences(counts)[None], level)[0])
    weights = krippendorff_weights(counts, level)
    n = len(counts)
    reads = counts.sum(axis=1)
    mean_reads = reads.mean()
    epsilon = 1 / reads.sum()
    sum_q = (counts * (counts @ weights.T - 1)).sum(axis=1)
    pa_prime = (sum_q / (mean_reads * (reads - 1))).sum() / n
    pa = (1 - epsilon) * pa_prime + epsilon
    pi = (counts / mean_reads).sum(axis=0) / n
    pe = float((weights * np.outer(pi, pi)).sum())
    alpha_prime = (pa_prime - pe) / (1 - pe)
    pa_i = sum_q / (mean_reads * (reads - 1)) - pa * (reads - mean_reads) / mean_reads
    alpha_i = (pa_i - pe) / (1 - pe)
    pi_w = (weights @ pi + weights.T @ pi) / 2
    pe_i = (counts @ pi_w) / mean_reads - pe * (reads - mean_reads) / mean_reads
    alpha_i_x = alpha_i - 2 * (1 - alpha_prime) * (pe_i - pe) / (1 - pe)
    variance = ((alpha_i_x - alpha_prime) ** 2).sum() / (n * (n - 1))
    return _t_interval(alpha, variance, n)


# Every composition is a data set of its own; beyond this many (some 445 three-way splits in one
# group, under a second) the search would cost the worker minutes and gigabytes: no range is shown.
MAX_COMPOSITIONS = 100_000


def compositions_count(k: int, parts: int) -> int:
    """How many ways k units can be spread over `parts` options (k + parts - 1 choose parts - 1)."""
    return math.comb(k + parts - 1, parts - 1)


def krippendorff_alpha_range(fixed: np.ndarray, options: np.ndarray, k: int, level: str) -> tuple[float, float] | None:
    """The least and greatest Krippendorff's alpha when each of k units may be any one of `options`.

    fixed: units x categories counts of the units that are known (two reads each or more); options:
    the count rows one undetermined unit may have (each with two reads). Every composition of the k
    units over the options is one data set; alpha is computed for all of them at once from their
    coincidence matrices (Krippendorff 2011, "Computing Krippendorff's alpha-reliability"), the
    formula the `krippendorff` package implements (tests hold the two equal). None when alpha is
    undefined for every composition.
    """
    fixed = np.asarray(fixed, dtype=float)
    options = np.asarray(options, dtype=float)
    q = fixed.shape[1] if len(fixed) else options.shape[1]

    base = coincidences(fixed) if len(fixed) else np.zeros((q, q))
    if compositions_count(k, len(options)) > MAX_COMPOSITIONS:
        raise ValueError(f"{k} units over {len(options)} options: more than {MAX_COMPOSITIONS} compositions")
    per_option = np.stack([coincidences(option[None, :]) for option in options])
    compositions = _compositions(k, len(options)).astype(float)
    alphas = _alphas(base + np.einsum("mo,ock->mck", compositions, per_option), level)
    alphas = alphas[~np.isnan(alphas)]
    if not len(alphas):
        return None
    return float(alphas.min()), float(alphas.max())


def coincidences(counts: np.ndarray) -> np.ndarray:
    """Krippendorff's coincidence matrix of units x categories counts: the sum over the units with two
    reads or more of (n n' - diag n) / (m - 1), m the unit's reads (Krippendorff 2011), as one product."""
    counts = np.asarray(counts, dtype=float)
    counts = counts[counts.sum(axis=1) >= 2]
    per_pairing = counts / (counts.sum(axis=1) - 1)[:, None]
    return per_pairing.T @ counts - np.diag(per_pairing.sum(axis=0))


def _alphas(o: np.ndarray, level: str) -> np.ndarray:
    """Krippendorff's alpha of each coincidence matrix in o (m x q x q), nominal or ordinal: the formula
    the `krippendorff` package implements (tests hold the two equal); NaN where the expected
    disagreement is 0 (alpha undefined)."""
    q = o.shape[1]
    marginals = o.sum(axis=2)
    total = marginals.sum(axis=1)
    delta = np.broadcast_to(1 - np.eye(q), o.shape) if level == "nominal" else _ordinal_distances(marginals)
    observed = (o * delta).sum(axis=(1, 2))
    expected = (marginals[:, :, None] * marginals[:, None, :] * delta).sum(axis=(1, 2)) / (total - 1)
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(expected > 0, 1 - observed / np.where(expected > 0, expected, 1), np.nan)


def _compositions(k: int, parts: int) -> np.ndarray:
    """Every way of writing k as an ordered sum of `parts` non-negative integers, one per row."""
    if parts == 1:
        return np.array([[k]])
    if parts == 3:  # the three-way splits' case, at once: (first, second) with first + second <= k
        first, second = np.triu_indices(k + 1)
        second = second - first
        return np.column_stack([first, second, k - first - second])
    blocks = []
    for first in range(k + 1):
        rest = _compositions(k - first, parts - 1)
        blocks.append(np.column_stack([np.full(len(rest), first), rest]))
    return np.vstack(blocks)
