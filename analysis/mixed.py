"""Linear mixed models with crossed random intercepts, fitted by REML as lme4's `lmer` fits them.

The model: y = X beta + Z b + e, with b ~ N(0, sigma^2 Lambda Lambda') and e ~ N(0, sigma^2 I),
where each random term (reader, exam, reader x variation) is a random intercept per level and
Lambda is diagonal, theta_k (the term's standard deviation relative to the residual's) on the
term's levels. For a given theta the penalized least-squares problem gives beta, the conditional
modes and the profiled REML deviance in closed form (Bates, Maechler, Bolker and Walker 2015,
"Fitting linear mixed-effects models using lme4", J Stat Softw 67(1), section 3); the deviance is
then minimized over theta >= 0. Standard errors are sigma^2 (X'V^-1 X)^-1's, intervals and
p-values are Wald's (lme4's `confint(method = "Wald")`). Tests hold every number equal to R's lme4
on stored data sets (tests/analysis/reference/mixed/).

statsmodels' MixedLM fits the same model with variance components, but on crossed designs its
optimizer stops at other points (a boundary where lme4 finds both components positive, on the
published-shape data); the formulation here is small and dense (a study has some hundreds of
random-effect levels), so it is written out.
"""

from dataclasses import dataclass

import numpy as np
from scipy import linalg, optimize
from scipy import stats as scipy_stats

from analysis.stats import CONFIDENCE, NotComputable


@dataclass(frozen=True)
class MixedFit:
    names: list[str]  # the fixed effects, in X's column order
    beta: np.ndarray
    se: np.ndarray
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


class _Profile:
    """The profiled REML deviance of one model as a function of theta."""

    def __init__(self, y: np.ndarray, X: np.ndarray, terms: dict[str, np.ndarray]):
        self.y, self.X = y, X
        self.n, self.p = X.shape
        blocks, self.sizes = [], []
        for codes in terms.values():
            _, index = np.unique(codes, return_inverse=True)
            block = np.zeros((self.n, index.max() + 1))
            block[np.arange(self.n), index] = 1.0
            blocks.append(block)
            self.sizes.append(block.shape[1])
        self.Z = np.hstack(blocks)
        self.ZtZ, self.ZtX, self.Zty = self.Z.T @ self.Z, self.Z.T @ X, self.Z.T @ y
        self.XtX, self.Xty = X.T @ X, X.T @ y

    def solve(self, theta: np.ndarray):
        lam = np.repeat(theta, self.sizes)
        q = len(lam)
        A = lam[:, None] * self.ZtZ * lam[None, :] + np.eye(q)
        L = linalg.cholesky(A, lower=True)
        cu = linalg.solve_triangular(L, lam * self.Zty, lower=True)
        RZX = linalg.solve_triangular(L, lam[:, None] * self.ZtX, lower=True)
        schur = self.XtX - RZX.T @ RZX
        RX = linalg.cholesky(schur, lower=False)
        beta = linalg.cho_solve((RX, False), self.Xty - RZX.T @ cu)
        u = linalg.solve_triangular(L.T, cu - RZX @ beta, lower=False)
        residual = self.y - self.X @ beta - self.Z @ (lam * u)
        r2 = float(residual @ residual + u @ u)
        dof = self.n - self.p
        deviance = (
            2 * np.log(np.diag(L)).sum()
            + 2 * np.log(np.abs(np.diag(RX))).sum()
            + dof * (1 + np.log(2 * np.pi * r2 / dof))
        )
        return float(deviance), beta, r2 / dof, schur

    def deviance(self, theta: np.ndarray) -> float:
        return self.solve(theta)[0]


def fit_lmm(y, X: np.ndarray, names: list[str], terms: dict[str, np.ndarray]) -> MixedFit | NotComputable:
    """REML fit of y on X with a random intercept for each term's levels (see the module doc)."""
    y = np.asarray(y, dtype=float)
    X = np.asarray(X, dtype=float)
    n, p = X.shape
    if n <= p + len(terms):
        return NotComputable(f"{n} reads: too few for {p} fixed effects and {len(terms)} random terms")
    if np.linalg.matrix_rank(X) < p:
        return NotComputable("the fixed effects cannot be told apart (every read is of one kind)")
    levels = {name: len(np.unique(codes)) for name, codes in terms.items()}
    if min(levels.values()) < 2:
        single = next(name for name, count in levels.items() if count < 2)
        return NotComputable(f"one {single} only: its variance cannot be estimated")
    profile = _Profile(y, X, terms)
    best = None
    # A smooth function of a few parameters: L-BFGS-B from lme4's start (theta = 1) and from near
    # the boundary, each polished; the lower deviance wins.
    for start in (np.ones(len(terms)), np.full(len(terms), 0.1)):
        result = optimize.minimize(
            profile.deviance, start, method="L-BFGS-B", bounds=[(0, None)] * len(terms),
            options={"ftol": 1e-15, "gtol": 1e-10, "maxiter": 2000},
        )  # fmt: skip
        if best is None or result.fun < best.fun:
            best = result
    theta = best.x
    deviance, beta, sigma2, schur = profile.solve(theta)
    covariance = sigma2 * linalg.inv(schur)
    variances = {name: float(sigma2 * t**2) for name, t in zip(terms, theta, strict=True)}
    variances["residual"] = float(sigma2)
    return MixedFit(
        names=list(names),
        beta=beta,
        se=np.sqrt(np.diag(covariance)),
        variances=variances,
        levels=levels,
        reml_deviance=deviance,
        n=n,
    )
