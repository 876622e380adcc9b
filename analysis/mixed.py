"""Linear mixed models with crossed random intercepts, fitted by REML as lme4's `lmer` fits them.

The model: y = X beta + Z b + e, with b ~ N(0, sigma^2 Lambda Lambda') and e ~ N(0, sigma^2 I),
where each random term (reader, exam, reader x variation) is a random intercept per level and
Lambda is diagonal, theta_k (the term's standard deviation relative to the residual's) on the
term's levels. For a given theta the penalized least-squares problem gives beta, the conditional
modes and the profiled REML deviance in closed form (Bates, Maechler, Bolker and Walker 2015,
"Fitting linear mixed-effects models using lme4", J Stat Softw 67(1), section 3); the deviance is
then minimized over theta >= 0. Standard errors are sigma^2 (X'V^-1 X)^-1's.

Inference on a fixed effect uses a t distribution with Satterthwaite's degrees of freedom, as
R's lmerTest computes them (Kuznetsova, Brockhoff and Christensen 2017, J Stat Softw 82(13)):
the covariance of the variance parameters (theta, sigma) is twice the inverse Hessian of the
REML deviance, the gradient of the estimate's variance is taken numerically, both with numDeriv's
Richardson extrapolation (the steps and the extrapolation are numDeriv's defaults, so the two
agree to rounding). With a few exams a normal (Wald) reference would be too narrow: the t
interval widens as the data that estimate the variances shrink. Tests hold every number equal to
lme4 and lmerTest on stored data sets (tests/analysis/reference/mixed/).

The term with the most levels (the exams) has a diagonal block in Z'Z, so the system is solved
by eliminating it first: only the other terms (readers, reader x variation: some hundreds of
levels) form a dense block, and an evaluation of the deviance does not grow with the reads. statsmodels' MixedLM
fits the same model with variance components, but on crossed designs its optimizer stops at
other points (a boundary where lme4 finds both components positive, on the published-shape data).
"""

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
from scipy import linalg, optimize, sparse
from scipy import special as scipy_special
from scipy import stats as scipy_stats

from analysis.stats import CONFIDENCE, NotComputable


@dataclass(frozen=True)
class MixedFit:
    names: list[str]  # the fixed effects, in X's column order
    beta: np.ndarray
    se: np.ndarray
    df: np.ndarray  # Satterthwaite's degrees of freedom of each fixed effect
    variances: dict[str, float]  # each random term's variance, then "residual"
    levels: dict[str, int]  # each random term's number of levels
    reml_deviance: float
    n: int

    def wald(self, name: str, confidence: float = CONFIDENCE) -> tuple[float, float, float, float, float]:
        """estimate, standard error, interval and two-sided p of one fixed effect (normal reference)."""
        index = self.names.index(name)
        estimate, se = float(self.beta[index]), float(self.se[index])
        z = scipy_stats.norm.ppf(1 - (1 - confidence) / 2)
        p = float(2 * scipy_stats.norm.sf(abs(estimate) / se)) if se > 0 else float("nan")
        return estimate, se, estimate - z * se, estimate + z * se, p

    def t_test(self, name: str, confidence: float = CONFIDENCE) -> tuple[float, float, float, float, float, float]:
        """estimate, standard error, Satterthwaite df, interval and two-sided p (lmerTest's contest1D)."""
        index = self.names.index(name)
        estimate, se, df = float(self.beta[index]), float(self.se[index]), float(self.df[index])
        quantile = scipy_stats.t.ppf(1 - (1 - confidence) / 2, df)
        p = float(2 * scipy_stats.t.sf(abs(estimate) / se, df)) if se > 0 else float("nan")
        return estimate, se, df, estimate - quantile * se, estimate + quantile * se, p


def _indicator(codes: np.ndarray, rows: int) -> sparse.csr_matrix:
    return sparse.csr_matrix((np.ones(rows), (np.arange(rows), codes)), shape=(rows, codes.max() + 1))


@dataclass
class _State:
    """The penalized least-squares solution at one theta."""

    deviance: float  # profiled REML deviance
    log_det_a: float  # log det(Lambda' Z'Z Lambda + I), lme4's ldL2
    log_det_rx: float  # log det(R_X' R_X), lme4's ldRX2
    r2: float  # penalized residual sum of squares
    beta: np.ndarray
    schur: np.ndarray  # R_X' R_X = X'V^-1 X sigma^2


# LAPACK's Cholesky factorisation and solve (potrf, potrs) called as scipy.linalg's cho_factor, cholesky
# and cho_solve call them on a C-ordered matrix (on its transpose, Fortran-ordered, which is the same
# memory): the same bits, without the checks, batching and conversions around the call, which took eight
# times as long as the call itself on the small systems a fit factorises some thousands of times. The
# factor is kept as LAPACK returns it, the transpose of scipy's; its diagonal is scipy's.
_POTRF, _POTRS = linalg.lapack.get_lapack_funcs(("potrf", "potrs"), (np.zeros((1, 1)),))


def _cholesky(a: np.ndarray, *, lower: bool) -> np.ndarray:
    """The Cholesky factor of a's lower (or upper) triangle, as scipy.linalg.cho_factor(a, lower=lower)
    and cholesky(a, lower=lower) compute it, transposed: the same bits in that triangle and on the
    diagonal (the other triangle is left as it was, and no solve reads it). Raises what scipy raises:
    ValueError for a value that is not finite, LinAlgError where a is not positive definite."""
    a = np.ascontiguousarray(a, dtype=float)
    if not np.isfinite(a).all():
        raise ValueError("array must not contain infs or NaNs")
    factor, info = _POTRF(a.T, lower=0 if lower else 1, clean=0)
    if info > 0:
        raise np.linalg.LinAlgError(f"{info}-th leading minor of the array is not positive definite")
    if info < 0:
        raise ValueError(f"illegal value in {-info}-th argument of internal potrf")
    return factor


def _cho_solve(factor: np.ndarray, b: np.ndarray, *, lower: bool) -> np.ndarray:
    """scipy.linalg.cho_solve((factor', lower), b) for a factor from _cholesky(a, lower=lower)."""
    if not np.isfinite(b).all():
        raise ValueError("array must not contain infs or NaNs")
    x, info = _POTRS(factor, b, lower=0 if lower else 1)
    if info:
        raise ValueError(f"illegal value in {-info}-th argument of internal potrs")
    return x


class _Profile:
    """The REML deviance of one model as a function of theta (and of sigma, for lmerTest's Hessian).

    With W = [y X] and A = Lambda' Z'Z Lambda + I, everything the deviance needs is log det A and
    Q = W'Z Lambda A^-1 Lambda Z'W. Eliminating the largest term (block 1, diagonal: d = theta_1^2
    n_j + 1 for a level with n_j reads) leaves S, the Schur complement on the other terms, and
    Q = theta_1^2 sum_j w_j w_j' / d_j + c' S^-1 c; the sums over block 1's levels depend on theta
    only through d_j, so they are gathered once per distinct n_j and an evaluation costs nothing
    in the number of reads.
    """

    def __init__(self, y: np.ndarray, X: np.ndarray, terms: dict[str, np.ndarray]):
        self.n, self.p = X.shape
        codes = [np.unique(values, return_inverse=True)[1].ravel() for values in terms.values()]
        sizes = [int(c.max()) + 1 for c in codes]
        self.big = int(np.argmax(sizes))
        self.rest = [k for k in range(len(codes)) if k != self.big]
        self.sizes2 = [sizes[k] for k in self.rest]
        W = np.column_stack([y, X])
        self.WtW = W.T @ W
        Z1 = _indicator(codes[self.big], self.n)
        Z2 = sparse.hstack([_indicator(codes[k], self.n) for k in self.rest], format="csr") if self.rest else None
        Z2 = Z2 if Z2 is not None else sparse.csr_matrix((self.n, 0))
        self.Z2tZ2 = (Z2.T @ Z2).toarray()
        self.Z2tW = Z2.T @ W
        Z1tZ2 = (Z1.T @ Z2).tocsr()
        Z1tW = Z1.T @ W
        count = np.bincount(codes[self.big], minlength=sizes[self.big])
        # Per distinct number of reads of a block-1 level: how many levels, and their sums.
        self.classes = []
        for value in np.unique(count):
            rows = np.flatnonzero(count == value)
            M, R = Z1tZ2[rows], Z1tW[rows]
            self.classes.append(
                (float(value), len(rows), (M.T @ M).toarray(), np.asarray(M.T @ R), R.T @ R)
            )  # fmt: skip

    def solve(self, theta: np.ndarray) -> _State:
        t1 = float(theta[self.big]) ** 2
        lam2 = np.repeat(theta[self.rest], self.sizes2) if self.rest else np.zeros(0)
        q2 = len(lam2)
        log_det_a = 0.0
        G = np.zeros((q2, q2))
        H = np.zeros((q2, self.p + 1))
        Q = np.zeros((self.p + 1, self.p + 1))
        for count, levels, MtM, MtR, RtR in self.classes:
            f = 1.0 / (t1 * count + 1.0)
            log_det_a -= levels * np.log(f)
            G += f * MtM
            H += f * MtR
            Q += f * RtR
        Q *= t1
        if q2:
            S = lam2[:, None] * (self.Z2tZ2 - t1 * G) * lam2[None, :] + np.eye(q2)
            factor = _cholesky(S, lower=True)
            log_det_a += 2 * float(np.log(np.diag(factor)).sum())
            c = lam2[:, None] * (self.Z2tW - t1 * H)
            Q += c.T @ _cho_solve(factor, c, lower=True)
        schur = self.WtW[1:, 1:] - Q[1:, 1:]
        rhs = self.WtW[1:, 0] - Q[1:, 0]
        rx = _cholesky(schur, lower=False)
        beta = _cho_solve(rx, rhs, lower=False)
        r2 = float(self.WtW[0, 0] - Q[0, 0] - beta @ rhs)
        log_det_rx = 2 * float(np.log(np.abs(np.diag(rx))).sum())
        dof = self.n - self.p
        deviance = log_det_a + log_det_rx + dof * (1 + np.log(2 * np.pi * r2 / dof))
        return _State(float(deviance), log_det_a, log_det_rx, r2, beta, schur)

    def deviance(self, theta: np.ndarray) -> float:
        return self.solve(theta).deviance

    def deviance_at(self, varpar: np.ndarray) -> float:
        """The REML deviance at (theta, sigma), sigma not profiled out (lmerTest's devfun_vp)."""
        state = self.solve(varpar[:-1])
        sigma2 = varpar[-1] ** 2
        return state.log_det_a + state.log_det_rx + state.r2 / sigma2 + (self.n - self.p) * np.log(2 * np.pi * sigma2)

    def covariance_at(self, varpar: np.ndarray) -> np.ndarray:
        """sigma^2 (R_X' R_X)^-1 at (theta, sigma), flattened (lmerTest's get_covbeta)."""
        return (varpar[-1] ** 2 * linalg.inv(self.solve(varpar[:-1]).schur)).ravel()


# The largest theta (a random term's standard deviation over the residual's) the optimizer may try.
# On a deviance that flattens as a term's variance grows, L-BFGS-B's quasi-Newton step can run to
# theta of 1e7 and beyond, where X'V^-1 X is the small difference of two large matrices and loses
# its positive definiteness to rounding (a reader's or an exam's indicators sum to the intercept).
# lme4's fits on the stored references end below 10; a fit that reaches the bound says so.
THETA_MAX = 1e3


# numDeriv's defaults for Richardson extrapolation: relative step d, absolute step eps where the
# argument is below zero_tol, r successive halvings.
_ZERO_TOL = np.sqrt(np.finfo(float).eps / 7e-7)


def _steps(x: np.ndarray, d: float, eps: float = 1e-4) -> np.ndarray:
    return np.abs(d * x) + eps * (np.abs(x) < _ZERO_TOL)


def _richardson(approximations: list, r: int = 4) -> np.ndarray:
    a = [np.asarray(value, dtype=float) for value in approximations]
    for m in range(1, r):
        a = [(a[k + 1] * 4**m - a[k]) / (4**m - 1) for k in range(r - m)]
    return a[0]


def hessian(func: Callable[[np.ndarray], float], x: np.ndarray, d: float = 0.1, r: int = 4) -> np.ndarray:
    """numDeriv::hessian (method "Richardson", its genD)."""
    n = len(x)
    f0 = func(x)
    h0 = _steps(x, d)
    diagonal = np.zeros(n)
    H = np.zeros((n, n))
    for i in range(n):
        h, second = h0.copy(), []
        unit = np.eye(n)[i]
        for _ in range(r):
            f1, f2 = func(x + unit * h), func(x - unit * h)
            second.append((f1 - 2 * f0 + f2) / h[i] ** 2)
            h = h / 2
        diagonal[i] = H[i, i] = _richardson(second, r)
    for i in range(n):
        for j in range(i):
            h, mixed = h0.copy(), []
            step = np.eye(n)[i] + np.eye(n)[j]
            for _ in range(r):
                f1, f2 = func(x + step * h), func(x - step * h)
                mixed.append((f1 - 2 * f0 + f2 - diagonal[i] * h[i] ** 2 - diagonal[j] * h[j] ** 2) / (2 * h[i] * h[j]))
                h = h / 2
            H[i, j] = H[j, i] = _richardson(mixed, r)
    return H


def jacobian(func: Callable[[np.ndarray], np.ndarray], x: np.ndarray, d: float = 1e-4, r: int = 4) -> np.ndarray:
    """numDeriv::jacobian (method "Richardson"): one column per argument."""
    n = len(x)
    h = _steps(x, d)
    columns = []
    for i in range(n):
        unit, step, approximations = np.eye(n)[i], h[i], []
        for _ in range(r):
            approximations.append((func(x + unit * step) - func(x - unit * step)) / (2 * step))
            step = step / 2
        columns.append(_richardson(approximations, r))
    return np.column_stack(columns)


def _satterthwaite(profile: _Profile, varpar: np.ndarray, covariance: np.ndarray) -> np.ndarray:
    """Each fixed effect's Satterthwaite degrees of freedom, as lmerTest's contest1D computes them."""
    H = hessian(profile.deviance_at, varpar)
    values, vectors = np.linalg.eigh(H)
    positive = values > 1e-8
    vcov_varpar = 2 * (vectors[:, positive] / values[positive]) @ vectors[:, positive].T
    J = jacobian(profile.covariance_at, varpar)
    p = covariance.shape[0]
    df = np.empty(p)
    for k in range(p):
        gradient = J[k * p + k, :]  # d var(beta_k) / d varpar
        df[k] = 2 * covariance[k, k] ** 2 / float(gradient @ vcov_varpar @ gradient)
    return df


def _unfittable(X: np.ndarray, levels: dict[str, int]) -> NotComputable | None:
    """Why no mixed model of these reads can be fitted, or None."""
    n, p = X.shape
    if n <= p + len(levels):
        return NotComputable(f"{n} reads: too few for {p} fixed effects and {len(levels)} random terms")
    if np.linalg.matrix_rank(X) < p:
        return NotComputable("the fixed effects cannot be told apart (every read is of one kind)")
    if min(levels.values()) < 2:
        single = next(name for name, count in levels.items() if count < 2)
        return NotComputable(f"one {single} only: its variance cannot be estimated")
    return None


def fit_lmm(y, X: np.ndarray, names: list[str], terms: dict[str, np.ndarray]) -> MixedFit | NotComputable:
    """REML fit of y on X with a random intercept for each term's levels (see the module doc)."""
    y = np.asarray(y, dtype=float)
    X = np.asarray(X, dtype=float)
    n, p = X.shape
    levels = {name: len(np.unique(codes)) for name, codes in terms.items()}
    if (why := _unfittable(X, levels)) is not None:
        return why
    profile = _Profile(y, X, terms)
    best = None
    # A smooth function of a few parameters: L-BFGS-B from lme4's start (theta = 1) and from near
    # the boundary, each polished; the lower deviance wins.
    for start in (np.ones(len(terms)), np.full(len(terms), 0.1)):
        try:
            result = optimize.minimize(
                profile.deviance, start, method="L-BFGS-B", bounds=[(0, THETA_MAX)] * len(terms),
                options={"ftol": 1e-15, "gtol": 1e-10, "maxiter": 2000},
            )  # fmt: skip
        except np.linalg.LinAlgError:
            continue  # X'V^-1 X lost to rounding on this start's path; the other start decides
        if best is None or result.fun < best.fun:
            best = result
    if best is None:
        return NotComputable("the fit failed: X'V^-1 X could not be factorised on either start")
    theta = best.x
    if theta.max() >= THETA_MAX:
        return NotComputable(
            "a random term's variance runs to over a million times the residual's (the reads within its levels "
            "agree exactly): the residual variance cannot be estimated"
        )
    state = profile.solve(theta)
    sigma2 = state.r2 / (n - p)
    covariance = sigma2 * linalg.inv(state.schur)
    variances = {name: float(sigma2 * t**2) for name, t in zip(terms, theta, strict=True)}
    variances["residual"] = float(sigma2)
    varpar = np.append(theta, np.sqrt(sigma2))
    return MixedFit(
        names=list(names),
        beta=state.beta,
        se=np.sqrt(np.diag(covariance)),
        df=_satterthwaite(profile, varpar, covariance),
        variances=variances,
        levels=levels,
        reml_deviance=state.deviance,
        n=n,
    )


# Logistic mixed model ----------------------------------------------------------------------------


@dataclass(frozen=True)
class LogisticFit:
    names: list[str]
    beta: np.ndarray
    se: np.ndarray  # from the Hessian of the Laplace deviance over (theta, beta), glmer's default
    variances: dict[str, float]  # each random term's variance on the logit scale
    deviance: float  # -2 log-likelihood, Laplace's approximation
    n: int

    def wald(self, name: str, confidence: float = CONFIDENCE) -> tuple[float, float, float, float, float]:
        """estimate (log odds ratio), standard error, Wald interval and two-sided p (glmer's z test)."""
        index = self.names.index(name)
        estimate, se = float(self.beta[index]), float(self.se[index])
        z = scipy_stats.norm.ppf(1 - (1 - confidence) / 2)
        p = float(2 * scipy_stats.norm.sf(abs(estimate) / se)) if se > 0 else float("nan")
        return estimate, se, estimate - z * se, estimate + z * se, p


# A logistic model's system is solved as one dense matrix up to this many cells of reads x levels^2
# (a variation's reads: beyond that, by blocks costs less), and by blocks through the pairs of
# nonzeros that share a row of Z1'WZ2 while there are at most this many (a sparse product past that).
DENSE_MODEL_CELLS = 100_000
BLOCK_PAIRS = 20_000_000


class _Laplace:
    """Laplace's approximation to a logistic model's deviance at (theta, beta), as glmer computes it:
    the conditional modes u by penalized iteratively reweighted least squares, then
    sum of deviance residuals + |u|^2 + log det(Lambda' Z' W Z Lambda + I) at the modes."""

    def __init__(self, y: np.ndarray, X: np.ndarray, terms: dict[str, np.ndarray]):
        self.y, self.X = y, X
        self.n, self.p = X.shape
        codes = [np.unique(values, return_inverse=True)[1].ravel() for values in terms.values()]
        self.sizes = [int(c.max()) + 1 for c in codes]
        self.big = int(np.argmax(self.sizes))
        self.rest = [k for k in range(len(codes)) if k != self.big]
        self.codes1 = codes[self.big]
        q1 = self.sizes[self.big]
        # Z2 (the other terms' indicators side by side) as each read's column in each of those terms:
        # Z2 v is a gather and Z2' r a bincount, without a sparse matrix's bookkeeping on every call
        # (which was nine tenths of a fit's time on the published shape).
        offsets = np.cumsum([0] + [self.sizes[k] for k in self.rest])
        self.q2 = int(offsets[-1])
        self.columns2 = np.column_stack(
            [codes[k] + offsets[i] for i, k in enumerate(self.rest)] or [np.zeros((self.n, 0), int)]
        )
        self.terms2 = len(self.rest)
        self.u = (np.zeros(q1), np.zeros(self.q2))  # warm start
        # Small models (a variation's reads) are solved densely: blocks would cost more.
        q = q1 + self.q2
        dense = self.n * q * q <= DENSE_MODEL_CELLS
        self.dense = np.hstack([np.eye(q1)[self.codes1], np.eye(self.q2)[self.columns2].sum(axis=1)]) if dense else None
        # Otherwise by blocks (see _system): Z2'WZ2 is summed by one bincount over these cells.
        self.cells22 = (self.columns2[:, :, None] * self.q2 + self.columns2[:, None, :]).ravel()
        # Z1'WZ2's nonzeros (a block-1 level, a column of Z2: row-major), and each read-term's among them.
        nonzeros, self.entry12 = np.unique(self.codes1[:, None] * self.q2 + self.columns2, return_inverse=True)
        self.entry12 = self.entry12.ravel()
        self.rows12, self.cols12 = nonzeros // self.q2, nonzeros % self.q2
        # Every ordered pair of nonzeros in one row (B'D^-1 B sums over them), while there are few enough.
        per_row = np.bincount(self.rows12, minlength=q1)[self.rows12]  # the row's count, for each nonzero
        self.pairs = int(per_row.sum()) <= BLOCK_PAIRS
        if self.pairs:
            self.left = np.repeat(np.arange(len(nonzeros)), per_row)
            first = np.searchsorted(self.rows12, self.rows12)  # the row's first nonzero, for each nonzero
            within = np.arange(len(self.left)) - np.repeat(np.cumsum(per_row) - per_row, per_row)
            self.right = np.repeat(first, per_row) + within
            self.cells_pairs = self.cols12[self.left] * self.q2 + self.cols12[self.right]
        else:
            self.Z1 = _indicator(self.codes1, self.n)
            rows = np.arange(0, self.n * self.terms2 + 1, self.terms2)
            self.Z2 = sparse.csr_matrix(
                (np.ones(self.columns2.size), self.columns2.ravel(), rows), shape=(self.n, self.q2)
            )

    def _z2(self, v: np.ndarray) -> np.ndarray:
        """Z2 v."""
        return v[self.columns2].sum(axis=1)

    def _z2t(self, r: np.ndarray) -> np.ndarray:
        """Z2' r."""
        return np.bincount(self.columns2.ravel(), weights=np.repeat(r, self.terms2), minlength=self.q2)

    def _lambdas(self, theta: np.ndarray) -> tuple[float, np.ndarray]:
        lam2 = np.repeat(theta[self.rest], [self.sizes[k] for k in self.rest]) if self.rest else np.zeros(0)
        return float(theta[self.big]), lam2

    def _system(self, lam1: float, lam2: np.ndarray, w: np.ndarray):
        """A = Lambda' Z' W Z Lambda + I by blocks: a solver and log det A."""
        if self.dense is not None:
            lam = np.concatenate([np.full(self.sizes[self.big], lam1), lam2])
            ZL = self.dense * lam[None, :]
            factor = _cholesky((ZL.T * w) @ ZL + np.eye(len(lam)), lower=True)
            q1 = self.sizes[self.big]

            def solve_dense(b1: np.ndarray, b2: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
                x = _cho_solve(factor, np.concatenate([b1, b2]), lower=True)
                return x[:q1], x[q1:]

            return solve_dense, 2 * float(np.log(np.diag(factor)).sum())
        q1, q2 = self.sizes[self.big], self.q2
        d = lam1**2 * np.bincount(self.codes1, weights=w, minlength=q1) + 1.0
        if not q2:
            return (lambda b1, b2: (b1 / d, b2)), float(np.log(d).sum())
        z2wz2 = np.bincount(self.cells22, weights=np.repeat(w, self.terms2**2), minlength=q2 * q2).reshape(q2, q2)
        S = lam2[:, None] * z2wz2 * lam2[None, :] + np.eye(q2)
        if self.pairs:
            # B = lam1 Z1'WZ2 Lambda2 by its nonzeros; B'D^-1 B, B't and Bx as sums over them.
            b = lam1 * lam2[self.cols12] * np.bincount(self.entry12, weights=np.repeat(w, self.terms2))
            weights = b[self.left] * b[self.right] / d[self.rows12[self.left]]
            S -= np.bincount(self.cells_pairs, weights=weights, minlength=q2 * q2).reshape(q2, q2)

            def bt(t: np.ndarray) -> np.ndarray:
                return np.bincount(self.cols12, weights=b * t[self.rows12], minlength=q2)

            def bx(x: np.ndarray) -> np.ndarray:
                return np.bincount(self.rows12, weights=b * x[self.cols12], minlength=q1)
        else:
            B = (self.Z1.T @ (sparse.diags(w) @ self.Z2)).tocsr() @ sparse.diags(lam2) * lam1
            S -= (B.T @ sparse.diags(1.0 / d) @ B).toarray()
            bt, bx = B.T.__matmul__, B.__matmul__
        factor = _cholesky(S, lower=True)

        def solve(b1: np.ndarray, b2: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
            t = b1 / d
            x2 = _cho_solve(factor, b2 - bt(t), lower=True)
            return t - bx(x2) / d, x2

        return solve, float(np.log(d).sum()) + 2 * float(np.log(np.diag(factor)).sum())

    def _eta(self, offset, lam1, lam2, u1, u2):
        return offset + lam1 * u1[self.codes1] + self._z2(lam2 * u2)

    def _penalized(self, eta, u1, u2) -> float:
        # Bernoulli deviance residuals, stably: 2 log(1 + e^-eta) for y = 1, 2 log(1 + e^eta) for y = 0.
        residual = 2 * np.logaddexp(0.0, np.where(self.y == 1, -eta, eta)).sum()
        return float(residual + u1 @ u1 + u2 @ u2)

    def deviance(self, par: np.ndarray) -> float:
        theta, beta = np.abs(par[: len(self.sizes)]), par[len(self.sizes) :]
        lam1, lam2 = self._lambdas(theta)
        offset = self.X @ beta
        u1, u2 = self.u
        eta = self._eta(offset, lam1, lam2, u1, u2)
        current = self._penalized(eta, u1, u2)
        for _ in range(200):
            mu = scipy_special.expit(eta)
            w = mu * (1 - mu)
            solve, _ = self._system(lam1, lam2, w)
            r = self.y - mu
            step1, step2 = solve(lam1 * np.bincount(self.codes1, weights=r, minlength=len(u1)) - u1,
                                 lam2 * self._z2t(r) - u2)  # fmt: skip
            fraction = 1.0
            while True:
                n1, n2 = u1 + fraction * step1, u2 + fraction * step2
                eta_new = self._eta(offset, lam1, lam2, n1, n2)
                trial = self._penalized(eta_new, n1, n2)
                if trial <= current + 1e-12 * abs(current) or fraction < 1e-10:
                    break
                fraction /= 2
            converged = current - trial <= 1e-14 * abs(current)
            u1, u2, eta, current = n1, n2, eta_new, trial
            if converged:
                break
        mu = scipy_special.expit(eta)
        _, log_det = self._system(lam1, lam2, mu * (1 - mu))
        self.u = (u1, u2)
        return current + log_det


def _deriv12_hessian(func: Callable[[np.ndarray], float], x: np.ndarray, delta: float = 1e-4) -> np.ndarray:
    """lme4's deriv12 as glmer calls it at its optimum: central differences of step delta (the
    deviance is even in each theta, so a step below 0 is well defined)."""
    n = len(x)
    fx = func(x)
    H = np.empty((n, n))

    def at(*changes: tuple[int, float]) -> float:
        point = x.copy()
        for index, step in changes:
            point[index] += step
        return func(point)

    for j in range(n):
        H[j, j] = (at((j, delta)) - 2 * fx + at((j, -delta))) / delta**2
        for i in range(j):
            H[i, j] = H[j, i] = (
                at((i, delta), (j, delta)) - at((i, delta), (j, -delta))
                - at((i, -delta), (j, delta)) + at((i, -delta), (j, -delta))
            ) / (4 * delta**2)  # fmt: skip
    return H


def fit_glmm(
    y, X: np.ndarray, names: list[str], terms: dict[str, np.ndarray], *, max_variance: float | None = None
) -> LogisticFit | NotComputable:
    """Laplace fit of a logistic model of y (0/1) on X with a random intercept per term's levels.

    With max_variance, each random intercept's variance is searched up to it, and a fit that ends there
    says why it is not computable: near-complete separation, where the likelihood keeps falling, ever
    more slowly, as a variance grows without bound. Searched without a bound, such a fit crept along the
    flat likelihood for thousands of evaluations (three quarters of the demo's logistic fits' time) to
    stop at an arbitrary point."""
    y = np.asarray(y, dtype=float)
    X = np.asarray(X, dtype=float)
    n, p = X.shape
    levels = {name: len(np.unique(codes)) for name, codes in terms.items()}
    if (why := _unfittable(X, levels)) is not None:
        return why
    for column in range(p):
        for value in np.unique(X[:, column]):
            cell = y[X[:, column] == value]
            if len(np.unique(X[:, column])) > 1 and len(np.unique(cell)) < 2:
                return NotComputable(
                    "every read of one kind has the same outcome (complete separation): the log odds ratio is infinite"
                )
    laplace = _Laplace(y, X, terms)
    k = len(terms)
    start_beta = _logistic_start(y, X)
    top = None if max_variance is None else float(np.sqrt(max_variance))
    best = None
    # The search stops when an iteration lowers the deviance by less than 1e-12 of it: its gradient is
    # taken by differences, good to about 1e-8, and a stricter stop (1e-15) took a third more
    # evaluations for nothing: on the stored data the fits' largest distance from glmer's, as a share of
    # the tests' tolerance, was 0.528 with it and is 0.531 without.
    for start_theta in (np.ones(k), np.full(k, 0.1)):
        laplace.u = (np.zeros(laplace.sizes[laplace.big]), np.zeros(laplace.q2))
        result = optimize.minimize(
            laplace.deviance, np.concatenate([start_theta, start_beta]), method="L-BFGS-B",
            bounds=[(0, top)] * k + [(None, None)] * p, options={"ftol": 1e-12, "gtol": 1e-9, "maxiter": 5000},
        )  # fmt: skip
        if best is None or result.fun < best.fun:
            best = result
    par = best.x
    if top is not None and np.any(par[:k] >= top * (1 - 1e-9)):
        return NotComputable(
            f"a random-effect variance reaches {max_variance:g} on the logit scale, where the search stops "
            "(near-complete separation: the likelihood is flat, so the estimate and its interval are not determined)"
        )
    deviance = laplace.deviance(par)
    H = _deriv12_hessian(laplace.deviance, par)
    try:
        covariance = 2 * np.linalg.inv(H)[k:, k:]
    except np.linalg.LinAlgError:
        return NotComputable("the Hessian of the Laplace deviance is singular: no standard errors")
    if not np.all(np.isfinite(covariance)) or np.any(np.diag(covariance) <= 0):
        return NotComputable("the Hessian of the Laplace deviance is not positive definite: no standard errors")
    theta = par[:k]
    return LogisticFit(
        names=list(names),
        beta=par[k:],
        se=np.sqrt(np.diag(covariance)),
        variances={name: float(t**2) for name, t in zip(terms, theta, strict=True)},
        deviance=deviance,
        n=n,
    )


def _logistic_start(y: np.ndarray, X: np.ndarray) -> np.ndarray:
    """The fixed effects of the ordinary logistic regression (Newton), the start glmer takes too."""
    beta = np.zeros(X.shape[1])
    for _ in range(100):
        mu = scipy_special.expit(X @ beta)
        step = np.linalg.solve(X.T @ (X * (mu * (1 - mu))[:, None]), X.T @ (y - mu))
        beta += step
        if np.abs(step).max() < 1e-12:
            break
    return beta
