"""Metric sensitivity on validated pairs: how much automatic metrics punish clinically equivalent rewrites.

Pure functions of DataFrames (text columns, as `analysis.frames`); nothing here knows of Django.
Two thin adapters feed them: `release_pair_texts(task2_full)` from a release folder and
`analysis.live.study_pair_texts(study)` from a study's pairs, both giving PAIR_TEXTS. Scores come as
one tidy frame, SCORES: the built-in metrics (`builtin_scores`, both directions) and imported ones
(`direction` "imported") alike, and `sensitivity(scores, task2_consensus)` makes the table:

per metric and direction, overall and per variation (and per dataset), over the pairs with a Task 2
consensus: the metric's distribution on clinically equivalent pairs (consensus Equivalent or Minor
Discrepancy) and on Major Discrepancy pairs, the drop from a perfect score on the equivalent ones
(perfect minus their mean), and Spearman's correlation between the metric and the consensus score
(0 Equivalent, 1 Minor, 2 Major) with a 95% interval. A metric that follows clinical meaning has a
negative correlation; a number the data do not define is None with the reason in `note`.
"""

from collections.abc import Iterator
from dataclasses import dataclass

import numpy as np
import pandas as pd
from scipy import stats as scipy_stats

from analysis import metrics
from analysis.metrics import MetricCache, Progress
from analysis.names import DIRECTIONS, FORWARD, REVERSE
from analysis.result_data import Sensitivity

KEY = ["dataset", "study_id", "reref_variation"]
PAIR_TEXTS = [*KEY, "original", "alternative"]
SCORES = [*KEY, "metric", "direction", "score"]
# The built-in score columns of analysis.metrics.score_pairs as (metric, direction). ROUGE-L F1 is
# symmetric: its reverse direction is the same number and is not listed twice.
BUILTIN_COLUMNS = {
    "bleu2": ("bleu2", FORWARD),
    "bleu2_reverse": ("bleu2", REVERSE),
    "rougeL": ("rougeL", FORWARD),
    "chrf": ("chrf", FORWARD),
    "chrf_reverse": ("chrf", REVERSE),
}
EQUIVALENT_LABELS = ("Equivalent", "Minor Discrepancy")
MAJOR_LABEL = "Major Discrepancy"
TASK2_SCORES = {"Equivalent": 0, "Minor Discrepancy": 1, "Major Discrepancy": 2}
CONFIDENCE = 0.95
SPEARMAN_METHOD = (
    "Spearman's rho between the metric and the Task 2 consensus score (0 Equivalent, 1 Minor, 2 Major; "
    "scipy.stats.spearmanr, average ranks for ties); 95% interval by Fisher's z with Bonett and Wright's "
    "(2000) variance (1 + rho^2 / 2) / (n - 3)."
)
METHODS = {
    "metrics": (
        "BLEU-2 as ReXrank computes it (tokens: lower case, '.' split off, split on spaces; weights 1/2, 1/2; "
        "smoothing method 1, epsilon 0.1; equal to nltk sentence_bleu), ROUGE-L F1 (rouge-score, default "
        "tokenizer, no stemming; symmetric) and chrF (sacrebleu CHRF defaults, 0-100), on the findings and "
        "impression joined by a space. Forward: the original is the reference and the alternative the "
        "candidate; reverse: the other way round. Imported metrics are used as given."
    ),
    "classes": (
        "Clinically equivalent: Task 2 consensus Equivalent or Minor Discrepancy; major: Major Discrepancy. "
        "Drop from perfect: the perfect score minus the mean over the clinically equivalent pairs."
    ),
    "spearman": SPEARMAN_METHOD,
}
COLUMNS = [
    "metric", "direction", "level", "group", "n_pairs", "perfect",
    "n_equivalent", "mean_equivalent", "median_equivalent", "q1_equivalent", "q3_equivalent",
    "n_major", "mean_major", "median_major", "q1_major", "q3_major",
    "drop_from_perfect", "spearman_rho", "ci_low", "ci_high", "note",
]  # fmt: skip


@dataclass(frozen=True)
class Correlation:
    rho: float | None
    low: float | None
    high: float | None
    note: str = ""


def spearman(values: np.ndarray, ratings: np.ndarray) -> Correlation:
    """Spearman's rho with a Fisher-z 95% interval (Bonett-Wright variance); see SPEARMAN_METHOD."""
    n = len(values)
    if n < 4:
        return Correlation(None, None, None, f"{n} pairs: a correlation and its interval need at least 4")
    if np.all(values == values[0]):
        return Correlation(None, None, None, "the metric has the same value on every pair")
    if np.all(ratings == ratings[0]):
        return Correlation(None, None, None, "every pair has the same consensus rating")
    rho = float(scipy_stats.spearmanr(values, ratings).statistic)
    if abs(rho) >= 1:
        return Correlation(rho, None, None, "a perfect rank correlation has no Fisher-z interval")
    return Correlation(rho, *fisher_interval(rho, (1 + rho**2 / 2) / (n - 3)))


def fisher_interval(rho: float, variance: float, confidence: float = CONFIDENCE) -> tuple[float, float]:
    """tanh(atanh(rho) -/+ z * sqrt(variance))."""
    z = scipy_stats.norm.ppf(0.5 + confidence / 2)
    centre, half = np.arctanh(rho), z * np.sqrt(variance)
    return float(np.tanh(centre - half)), float(np.tanh(centre + half))


# Inputs -------------------------------------------------------------------------------------------


def release_pair_texts(task2_full: pd.DataFrame) -> pd.DataFrame:
    """Each Task 2 example's two reports from task2_full.csv (report_a_type says which is A): PAIR_TEXTS."""
    if task2_full.empty:
        return pd.DataFrame(columns=PAIR_TEXTS)
    first = task2_full.drop_duplicates(KEY)
    # Object arrays, which point at the texts: a list of str would become a fixed-width array, as wide
    # as the longest report for every pair (600 MB for a 100,000-pair release).
    a, b = (
        np.array(
            [
                metrics.report_text(f, i)
                for f, i in zip(first[f"{side}_findings"], first[f"{side}_impression"], strict=True)
            ],
            dtype=object,
        )
        for side in ("report_a", "report_b")
    )
    a_is_original = (first["report_a_type"] == "original").to_numpy()
    frame = first[KEY].reset_index(drop=True)
    frame["original"] = np.where(a_is_original, a, b)
    frame["alternative"] = np.where(a_is_original, b, a)
    return frame.sort_values(KEY, kind="stable").reset_index(drop=True)


def builtin_scores(
    pairs: pd.DataFrame,
    *,
    cache: MetricCache | None = None,
    progress: Progress | None = None,
    limit: int | None = None,
) -> pd.DataFrame:
    """BLEU-2, ROUGE-L and chrF of every pair (PAIR_TEXTS), both directions, as SCORES (limit:
    metrics.score_pairs)."""
    scored = metrics.score_pairs(
        pairs["original"].tolist(), pairs["alternative"].tolist(), cache=cache, progress=progress, limit=limit
    )
    parts = []
    for column, (metric, direction) in BUILTIN_COLUMNS.items():
        part = pairs[KEY].reset_index(drop=True).assign(metric=metric, direction=direction)
        part["score"] = scored[column].to_numpy()
        parts.append(part)
    return pd.concat(parts, ignore_index=True)[SCORES] if parts else pd.DataFrame(columns=SCORES)


# The table ----------------------------------------------------------------------------------------


def _groups(frame: pd.DataFrame) -> Iterator[tuple[str, str, pd.DataFrame]]:
    yield "overall", "all", frame
    for level, column in (("dataset", "dataset"), ("variation", "reref_variation")):
        for group, part in frame.groupby(column, sort=True):
            yield level, str(group), part


def _describe(values: np.ndarray, suffix: str) -> dict:
    if len(values) == 0:
        return {f"n_{suffix}": 0, f"mean_{suffix}": None, f"median_{suffix}": None, f"q1_{suffix}": None,
                f"q3_{suffix}": None}  # fmt: skip
    q1, median, q3 = np.percentile(values, [25, 50, 75])
    return {
        f"n_{suffix}": len(values),
        f"mean_{suffix}": float(values.mean()),
        f"median_{suffix}": float(median),
        f"q1_{suffix}": float(q1),
        f"q3_{suffix}": float(q3),
    }


def with_consensus(scores: pd.DataFrame, task2_consensus: pd.DataFrame) -> pd.DataFrame:
    """The scores of pairs with a Task 2 consensus, with its label and 0-2 score."""
    consensus = task2_consensus.loc[task2_consensus["rating"] != "", [*KEY, "rating"]]
    unknown = set(consensus["rating"]) - set(TASK2_SCORES)
    if unknown:
        raise ValueError(f"task2_consensus.csv: rating {sorted(unknown)[0]!r} is not a Task 2 label.")
    merged = scores.merge(consensus, on=KEY, how="inner")
    return merged.assign(rating_score=merged["rating"].map(TASK2_SCORES).astype(int))


def sensitivity(
    scores: pd.DataFrame, task2_consensus: pd.DataFrame, *, perfect: dict[str, float] | None = None
) -> Sensitivity:
    """The sensitivity table of these scores (SCORES) over the pairs with a Task 2 consensus.

    `perfect` gives each metric's perfect score (the built-ins' are known; an imported metric's
    comes with its import, or the drop is None with the reason).
    """
    perfect = {**metrics.PERFECT, **(perfect or {})}
    rated = with_consensus(scores, task2_consensus)
    rows = []
    order = rated[["metric", "direction"]].drop_duplicates()
    order = order.assign(
        _builtin=order["metric"].map(
            lambda m: metrics.BUILTIN.index(m) if m in metrics.BUILTIN else len(metrics.BUILTIN)
        )
    ).sort_values(["_builtin", "metric", "direction"])
    # Each metric and direction's rows, in their order (split once, not compared row by row per metric).
    subsets = dict(iter(rated.groupby(["metric", "direction"], sort=False)))
    for metric, direction in zip(order["metric"], order["direction"], strict=True):
        subset = subsets[(metric, direction)]
        for level, group, part in _groups(subset):
            values = part["score"].to_numpy(dtype=float)
            ratings = part["rating_score"].to_numpy()
            equivalent = values[ratings < 2]
            major = values[ratings == 2]
            best = perfect.get(metric)
            correlation = spearman(values, ratings)
            notes = []
            if best is None:
                notes.append("drop: no perfect score was given for this imported metric")
            elif len(equivalent) == 0:
                notes.append("drop: no clinically equivalent pairs")
            if correlation.note:
                notes.append(f"correlation: {correlation.note}")
            row = {"metric": metric, "direction": direction, "level": level, "group": group, "n_pairs": len(values)}
            row |= {"perfect": best} | _describe(equivalent, "equivalent") | _describe(major, "major")
            row["drop_from_perfect"] = best - row["mean_equivalent"] if best is not None and len(equivalent) else None
            row |= {"spearman_rho": correlation.rho, "ci_low": correlation.low, "ci_high": correlation.high}
            row["note"] = "; ".join(notes)
            rows.append(row)
    table = pd.DataFrame(rows, columns=COLUMNS)
    table = table.astype(object).where(table.notna(), None)
    per_pair = rated[[*KEY, "metric", "direction", "score", "rating"]].sort_values(
        [*KEY, "metric", "direction"], kind="stable"
    )
    described = [
        {
            "metric": metric,
            "direction": direction,
            "title": metrics.TITLES.get(metric, metric),
            "perfect": perfect.get(metric),
            "pairs": len(subsets[(metric, direction)]),
        }
        for metric, direction in zip(order["metric"], order["direction"], strict=True)
    ]
    document = {
        "metrics": described,
        "directions": DIRECTIONS,
        "methods": METHODS,
        "table": [{k: _plain(v) for k, v in row.items()} for row in table.to_dict(orient="records")],
    }
    return Sensitivity(table=table.reset_index(drop=True), scores=per_pair.reset_index(drop=True), document=document)


def _plain(value):
    if isinstance(value, np.integer):
        return int(value)
    if isinstance(value, np.floating):
        return float(value)
    return value
