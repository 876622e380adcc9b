"""Paired comparisons of a pair's two reports, exact at any sample size.

- `SignFlip`: the paired sign-flip (randomization) test of the mean difference, with whole
  clusters (exams) flipped together, and the confidence interval that inverts the same test.
- `newcombe_paired`: the difference of two paired proportions with Newcombe's (1998) method 10
  interval, and `mcnemar_exact`, the exact McNemar test (statsmodels).

Why the sign-flip distribution is computed rather than enumerated or sampled: a difference is an
integer (scores 0-2), so an exam's sum of differences S_c and its number of pairs m_c are
integers, and every arrangement of signs gives the pair (sum s_c S_c, sum s_c m_c) on a small
integer lattice. Convolving the exams one at a time gives the probability of every lattice point
under the null exactly (the same null distribution as listing all 2^k arrangements, which
`scipy.stats.permutation_test` does up to its n_resamples; tests hold the two equal), at a cost
that grows with the lattice, not with 2^k: the published design's 114 exams take milliseconds,
and no p-value depends on a Monte Carlo seed.

The lattice grows with the exams, and convolving it with the square of them: the exact
distribution is computed while the work stays under `EXACT_WORK` (some 300 exams, under a
second). Beyond it the sign-flip sum T(theta) = sum s_c (S_c - theta m_c), a sum of independent
symmetric terms, is taken as normal with its exact mean 0 and variance sum (S_c - theta m_c)^2,
with a continuity correction of half the lattice's step (|T| - g, g the greatest common divisor
of the exams' sums); the interval inverts that same corrected test, so the two still agree. On
random studies where both run, its p-value is within 0.0013 of the exact one at 160 exams and
0.0002 at 600 (tests hold it to 0.005 at 160); the row's method says "normal approximation".

The interval is the set of shifts theta for which the same test, applied to d - theta, does not
reject at level alpha (p > alpha): it contains 0 exactly when p(0) > alpha, so an interval never
contradicts its test. With the lattice, p(theta) is a step function whose steps lie at known
points, so the ends of the interval are found exactly (Hodges and Lehmann's inversion, as in
Ernst 2004, "Permutation methods: a basis for exact inference").

Reference: Newcombe RG (1998). Improved confidence intervals for the difference between binomial
proportions based on paired data. Statistics in Medicine 17:2635-2650 (method 10: Wilson score
limits of each margin, combined with the continuity-corrected phi; Table III gives worked values).
"""

from dataclasses import dataclass
from functools import cached_property

import numpy as np
from scipy import stats as scipy_stats
from statsmodels.stats.contingency_tables import mcnemar
from statsmodels.stats.proportion import proportion_confint

from analysis.stats import CONFIDENCE, Estimate, NotComputable, Result

ALPHA = 1 - CONFIDENCE
# Lattice cells times exams convolved: above this, the normal approximation (see the module doc).
EXACT_WORK = 1.5e8
# Differences and sums are integers; p(theta) compares sums of products with theta, so equal
# values are held equal within this (relative) tolerance, as scipy's permutation_test does.
_TIE = 1e-9
METHOD = (
    "Exact paired sign-flip test of the mean difference (complete null distribution over the 2^k sign "
    "arrangements of the k exams, each exam's pairs flipped together); interval: the shifts the same test "
    "does not reject (test inversion)"
)


def exams_too_few(k: int, alpha: float = ALPHA) -> bool:
    """Whether k exams are too few for any interval at level alpha to be bounded.

    However far a shift theta is from the data, the two arrangements with every sign alike still
    tie with the observed one, so p never falls below 2 / 2^k: with 2 / 2^k > alpha no value of
    the difference is ever rejected (k < 6 at the 5% level).
    """
    return k == 0 or 2.0 ** (1 - k) > alpha


@dataclass(frozen=True)
class SignFlipTest:
    mean: float
    p_value: float
    n_pairs: int
    n_exams: int


class SignFlip:
    """The sign-flip test of the differences (alternative minus original), clusters flipped together.

    differences: one integer per pair. clusters: one label per pair (the pair's exam); pairs
    of one exam are flipped together. Without clusters, every pair is its own.
    """

    def __init__(self, differences, clusters=None):
        differences = np.asarray(differences, dtype=float)
        if not np.array_equal(differences, np.round(differences)):
            raise ValueError("differences: the exact sign-flip distribution needs integer differences (scores).")
        self.n_pairs = len(differences)
        if clusters is None:
            clusters = np.arange(self.n_pairs)
        _, cluster = np.unique(np.asarray(clusters), return_inverse=True)
        self.sums = np.bincount(cluster, weights=differences, minlength=cluster.max(initial=-1) + 1).astype(np.int64)
        self.sizes = np.bincount(cluster, minlength=len(self.sums)).astype(np.int64)
        self.n_exams = len(self.sums)
        self.total = int(self.sums.sum())
        cells = (2 * int(np.abs(self.sums).sum()) + 1) * (2 * int(self.sizes.sum()) + 1)
        self.exact = cells * (self.n_exams + 1) <= EXACT_WORK

    @property
    def method(self) -> str:
        exams = f"{self.n_exams} exam{'' if self.n_exams == 1 else 's'}"
        if self.exact:
            return f"exact sign-flip over {exams}"
        return f"sign-flip over {exams}, normal approximation (exact mean and variance)"

    @property
    def mean(self) -> float:
        return self.total / self.n_pairs

    @cached_property
    def _lattice(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Every reachable (sum s_c S_c, sum s_c m_c) with its probability under the null."""
        reach_u, reach_v = int(np.abs(self.sums).sum()), int(self.sizes.sum())
        grid = np.zeros((2 * reach_u + 1, 2 * reach_v + 1))
        grid[reach_u, reach_v] = 1.0
        # Exams alike in (S_c, m_c) are convolved at once: j of their c signs positive moves the
        # point by (2j - c) * (S_c, m_c) with binomial probability.
        kinds, counts = np.unique(np.stack([self.sums, self.sizes], axis=1), axis=0, return_counts=True)
        for (s, m), c in zip(kinds, counts, strict=True):
            weights = scipy_stats.binom.pmf(np.arange(c + 1), c, 0.5)
            moved = np.zeros_like(grid)
            for j, weight in enumerate(weights):
                step = 2 * j - c
                moved += weight * np.roll(grid, (step * s, step * m), axis=(0, 1))
            grid = moved
        u, v = np.nonzero(grid > 0)
        return u - reach_u, v - reach_v, grid[u, v]

    def p_value(self, theta: float = 0.0) -> float:
        """Two-sided p of the test that the differences are centred on theta."""
        if not self.exact:
            shifted = self.sums - theta * self.sizes
            spread = float(np.sqrt(shifted @ shifted))
            deviation = max(0.0, abs(self.total - theta * self.n_pairs) - self._half_step)
            if spread == 0:
                return 1.0
            return float(min(1.0, 2 * scipy_stats.norm.sf(deviation / spread)))
        u, v, probability = self._lattice
        observed = abs(self.total - theta * self.n_pairs)
        arranged = np.abs(u - theta * v)
        return float(min(1.0, probability[arranged >= observed - _TIE * max(1.0, observed)].sum()))

    def test(self) -> SignFlipTest | NotComputable:
        if self.n_pairs < 2:
            return NotComputable(f"{self.n_pairs} pair{'s' if self.n_pairs != 1 else ''}: the test needs at least 2")
        if not self.sums.any():
            return NotComputable(
                f"every exam's differences sum to 0 ({self.n_pairs} pairs): no arrangement of signs differs"
            )
        return SignFlipTest(self.mean, self.p_value(0.0), self.n_pairs, self.n_exams)

    def interval(self, confidence: float = CONFIDENCE) -> Result:
        """The mean difference with the shifts this test does not reject at 1 - confidence.

        Zero width (low == high) when only the observed mean survives: every exam's pairs share
        one difference and there are enough exams to reject any other shift.
        """
        alpha = 1 - confidence
        if self.n_pairs < 2:
            return NotComputable(f"{self.n_pairs} pair{'s' if self.n_pairs != 1 else ''}: an interval needs at least 2")
        if exams_too_few(self.n_exams, alpha):
            return NotComputable(
                f"too few exams for a useful interval (n = {self.n_exams}): with fewer than "
                f"{fewest_exams(alpha)} no sign arrangement is rarer than {alpha:.3g}, so no difference "
                "can be excluded"
            )
        if not self.exact:
            return self._normal_interval(alpha)
        low, high = self._end(alpha, -1), self._end(alpha, +1)
        return Estimate(self.mean, low, high)

    @cached_property
    def _half_step(self) -> float:
        """Half the step between values of the sign-flip sum: the greatest common divisor of the exams' sums."""
        nonzero = np.abs(self.sums[self.sums != 0])
        return float(np.gcd.reduce(nonzero)) if len(nonzero) else 0.0

    def _normal_interval(self, alpha: float) -> Result:
        """The shifts the corrected normal test does not reject: below the mean, (T - g - theta n)^2 <
        z^2 sum (S_c - theta m_c)^2, above it (theta n - T - g)^2 < the same, each a quadratic in theta."""
        z2 = scipy_stats.norm.isf(alpha / 2) ** 2
        S, m, n = self.sums.astype(float), self.sizes.astype(float), self.n_pairs
        a = n**2 - z2 * (m @ m)
        ends = []
        for total, root_sign in ((self.total - self._half_step, -1), (self.total + self._half_step, +1)):
            b = -2 * (total * n - z2 * (S @ m))
            c = total**2 - z2 * (S @ S)
            discriminant = b * b - 4 * a * c
            if a <= 0 or discriminant < 0:
                return NotComputable("the normal approximation bounds no interval at this level")
            ends.append(float((-b + root_sign * np.sqrt(discriminant)) / (2 * a)))
        return Estimate(self.mean, ends[0], ends[1])

    def _end(self, alpha: float, side: int) -> float:
        """The interval's end on one side of the mean: the last step point where p is still above alpha.

        p(theta) can change only where |u - theta v| = |total - theta n| for a lattice point
        (u, v); between two such points it is constant. Walking outward, p falls (the data's
        own arrangement moves into the tail): the end is found by bisection over the points
        and the midpoints between them.
        """
        u, v, _ = self._lattice
        n, total = self.n_pairs, self.total
        with np.errstate(divide="ignore", invalid="ignore"):
            points = np.concatenate([(u - total) / (v - n), (u + total) / (v + n)])
        points = np.unique(points[np.isfinite(points)])
        points = points[(points - self.mean) * side > _TIE]
        if side < 0:
            points = points[::-1]
        if len(points) == 0:
            return self.mean
        # Candidates in walking order: the mean's own segment, then each point and the segment after it.
        after = np.append((points[:-1] + points[1:]) / 2, points[-1] + side)
        candidates = np.column_stack([points, after]).ravel()
        kept = -1  # index of the last candidate with p > alpha (-1: only the segment at the mean)
        low, high = 0, len(candidates) - 1
        if self.p_value((self.mean + points[0]) / 2) <= alpha:
            return self.mean
        while low <= high:
            middle = (low + high) // 2
            if self.p_value(candidates[middle]) > alpha:
                kept, low = middle, middle + 1
            else:
                high = middle - 1
        if kept == -1:
            return float(points[0])
        if kept % 2 == 0:  # a step point itself
            return float(candidates[kept])
        return float(points[kept // 2 + 1]) if kept // 2 + 1 < len(points) else float(side * np.inf)


def fewest_exams(alpha: float = ALPHA) -> int:
    """The fewest exams with which an interval at level alpha is bounded (6 at the 5% level)."""
    k = 1
    while exams_too_few(k, alpha):
        k += 1
    return k


# Paired proportions ------------------------------------------------------------------------------


@dataclass(frozen=True)
class PairedTable:
    """A 2x2 table of pairs: both yes, only the first yes, only the second yes, neither."""

    both: int
    first_only: int
    second_only: int
    neither: int

    @property
    def n(self) -> int:
        return self.both + self.first_only + self.second_only + self.neither


def newcombe_paired(table: PairedTable, confidence: float = CONFIDENCE) -> Result:
    """p(first) - p(second) with Newcombe's (1998) method 10 interval (see the module doc)."""
    a, b, c, d, n = table.both, table.first_only, table.second_only, table.neither, table.n
    if n == 0:
        return NotComputable("no pairs")
    p1, p2 = (a + b) / n, (a + c) / n
    l1, u1 = proportion_confint(a + b, n, alpha=1 - confidence, method="wilson")
    l2, u2 = proportion_confint(a + c, n, alpha=1 - confidence, method="wilson")
    margins = (a + b) * (c + d) * (a + c) * (b + d)
    cross = a * d - b * c
    corrected = cross - n / 2 if cross > n / 2 else (cross if cross < 0 else 0.0)
    phi = corrected / np.sqrt(margins) if margins else 0.0
    difference = p1 - p2
    low = difference - np.sqrt(max(0.0, (p1 - l1) ** 2 - 2 * phi * (p1 - l1) * (u2 - p2) + (u2 - p2) ** 2))
    high = difference + np.sqrt(max(0.0, (u1 - p1) ** 2 - 2 * phi * (u1 - p1) * (p2 - l2) + (p2 - l2) ** 2))
    return Estimate(float(difference), float(low), float(high))


def mcnemar_exact(table: PairedTable) -> float | NotComputable:
    """The exact McNemar p-value (statsmodels: a binomial test on the discordant pairs)."""
    if table.first_only + table.second_only == 0:
        return NotComputable("no discordant pairs: the test has nothing to compare")
    result = mcnemar([[table.both, table.first_only], [table.second_only, table.neither]], exact=True)
    return float(result.pvalue)
