"""Automated judges against the radiologists, from `ReleaseFrames` with judges tables.

Pure functions of DataFrames (no Django), on the same ordinal scale as the study's results
(0 = Realistic / Equivalent, 1 = Minor, 2 = Major), for the examples with a consensus. The judges
tables have the columns of the release's `judges/task1_judges.csv` and `judges/task2_judges.csv`
(`judge_index` names a judge; no account). Per judge and task, overall and per variation:

- `judge_confusion`: consensus rating x judge rating counts.
- `judge_agreement`: exact agreement with the consensus (Wilson 95% CI) and quadratic-weighted
  Cohen's kappa (the reference is statsmodels' `cohens_kappa(..., wt="quadratic")`).
- `judge_vs_readers`: how often the judge agrees with a single radiologist (every judge-read pair
  of the examples it rated) next to how often two radiologists agree with each other (every
  read-read pair of the same examples), and the difference, each with a seeded percentile
  bootstrap 95% CI over examples. A difference near 0 or above: the judge is "as good as a reader".
"""

import numpy as np
import pandas as pd

from analysis import stats
from exports import columns

# As in analysis.results (which calls this module, so cannot be imported from here).
LABELS = {
    "task1": ("Realistic", "Minor Issues", "Major Issues"),
    "task2": ("Equivalent", "Minor Discrepancy", "Major Discrepancy"),
}
KEYS = {
    "task1": ["dataset", "study_id", "reref_variation", "report_type"],
    "task2": ["dataset", "study_id", "reref_variation"],
}


class JudgeInputError(ValueError):
    """A judges table holds a value the analysis cannot read; the message names the file and value."""


JUDGE_COLUMNS = {"task1": list(columns.TASK1_JUDGES), "task2": list(columns.TASK2_JUDGES)}
JUDGE_FILES = {f"judges/{task}_judges.csv": columns for task, columns in JUDGE_COLUMNS.items()}
SCALE = (0, 1, 2)
METHODS = {
    "judges": (
        "Automated judges (programs reading through the reader API, never part of the consensus), per judge and "
        "task, for the examples with a consensus: confusion matrix against the consensus; exact agreement with a "
        "Wilson interval; quadratic-weighted Cohen's kappa (weights (i - j)^2 / 4; statsmodels cohens_kappa "
        "wt='quadratic' is the reference). Judge vs single radiologist: share of agreeing (judge, read) pairs over "
        "the examples the judge rated, next to the share of agreeing (read, read) pairs of the same examples, and "
        f"their difference, with percentile bootstrap 95% intervals over examples ({stats.BOOTSTRAP_RESAMPLES} "
        "resamples, seeded). Third reads follow a disagreement, in both shares alike."
    ),
}
CONFUSION_COLUMNS = ["task", "judge", "level", "group", "consensus", "judge_rating", "n"]
AGREEMENT_COLUMNS = [
    "task", "judge", "level", "group", "n_examples", "exact_agreement", "ci_low", "ci_high", "weighted_kappa", "note",
]  # fmt: skip
VERSUS_COLUMNS = [
    "task", "judge", "n_examples", "judge_reader_pairs", "judge_reader", "judge_reader_ci_low", "judge_reader_ci_high",
    "reader_reader_pairs", "reader_reader", "reader_reader_ci_low", "reader_reader_ci_high",
    "difference", "difference_ci_low", "difference_ci_high", "note",
]  # fmt: skip


def quadratic_weighted_kappa(confusion: np.ndarray) -> float | stats.NotComputable:
    """Cohen's kappa with quadratic disagreement weights from a k x k table of counts (either orientation)."""
    confusion = np.asarray(confusion, dtype=float)
    n = confusion.sum()
    if n == 0:
        return stats.NotComputable("no examples")
    k = confusion.shape[0]
    i, j = np.indices((k, k))
    weights = (i - j) ** 2 / (k - 1) ** 2
    expected = np.outer(confusion.sum(axis=1), confusion.sum(axis=0)) / n
    chance = float((weights * expected).sum())
    if chance == 0:
        return stats.NotComputable(
            "the judge and the consensus each used a single rating, the same: chance agreement is 1"
        )
    return 1 - float((weights * confusion).sum()) / chance


def confusion_matrix(consensus: np.ndarray, judge: np.ndarray) -> np.ndarray:
    """3 x 3 counts: rows the consensus score, columns the judge's."""
    table = np.zeros((3, 3), dtype=int)
    np.add.at(table, (np.asarray(consensus, dtype=int), np.asarray(judge, dtype=int)), 1)
    return table


def _scores(ratings: pd.Series, task: str, where: str) -> np.ndarray:
    codes = {label: score for score, label in enumerate(LABELS[task])}
    unknown = sorted(set(ratings) - set(codes))
    if unknown:
        raise JudgeInputError(f"{where}: rating {unknown[0]!r} is not one of {', '.join(LABELS[task])}.")
    return ratings.map(codes).to_numpy(dtype=int)


def judge_tables(
    judges: dict[str, pd.DataFrame], consensus: dict[str, pd.DataFrame], full: dict[str, pd.DataFrame], *, seed: int
) -> dict[str, pd.DataFrame]:
    """The three judge tables for the tasks given (task -> its judges, consensus and full frames)."""
    confusion_rows, agreement_rows, versus_rows = [], [], []
    for task, frame in judges.items():
        key = KEYS[task]
        decided = consensus[task][consensus[task]["rating"] != ""]
        rated = frame[frame["rating"] != ""]
        merged = rated.merge(decided[[*key, "rating"]], on=key, how="inner", suffixes=("", "_consensus"))
        merged = merged.assign(
            judge_score=_scores(merged["rating"], task, f"{task}_judges.csv"),
            consensus_score=_scores(merged["rating_consensus"], task, f"{task}_consensus.csv"),
        )
        reads = full[task][[*key, "rating"]].merge(decided[key], on=key, how="inner")
        reads = reads.assign(score=_scores(reads["rating"], task, f"{task}_full.csv"))
        for judge in sorted(merged["judge_index"].unique(), key=int):
            mine = merged[merged["judge_index"] == judge]
            groups = [("overall", "all", mine)] + [
                ("variation", variation, part) for variation, part in sorted(mine.groupby("reref_variation"))
            ]
            for level, group, part in groups:
                table = confusion_matrix(part["consensus_score"], part["judge_score"])
                for c in SCALE:
                    for g in SCALE:
                        confusion_rows.append(
                            [task, judge, level, group, LABELS[task][c], LABELS[task][g], int(table[c, g])]
                        )
                agreement_rows.append(_agreement_row(task, judge, level, group, table))
            versus_rows.append(_versus_row(task, judge, mine, reads, key, seed))
    return {
        "judge_confusion": pd.DataFrame(confusion_rows, columns=CONFUSION_COLUMNS),
        "judge_agreement": pd.DataFrame(agreement_rows, columns=AGREEMENT_COLUMNS),
        "judge_vs_readers": pd.DataFrame(versus_rows, columns=VERSUS_COLUMNS),
    }


def _agreement_row(task: str, judge: str, level: str, group: str, table: np.ndarray) -> list:
    n = int(table.sum())
    exact = stats.wilson(int(np.trace(table)), n)
    kappa = quadratic_weighted_kappa(table)
    notes = [r.reason for r in (exact, kappa) if isinstance(r, stats.NotComputable)]
    values = [exact.value, exact.low, exact.high] if isinstance(exact, stats.Estimate) else [None, None, None]
    return [task, judge, level, group, n, *values, None if isinstance(kappa, stats.NotComputable) else kappa,
            "; ".join(notes)]  # fmt: skip


def _versus_row(task: str, judge: str, mine: pd.DataFrame, reads: pd.DataFrame, key: list[str], seed: int) -> list:
    """Judge-vs-read and read-vs-read agreement over the examples the judge rated, with bootstrap CIs."""
    joined = reads[[*key, "score"]].merge(mine[[*key, "judge_score"]], on=key, how="inner")
    joined["agree"] = joined["score"] == joined["judge_score"]
    by_example = joined.groupby(key, sort=True)
    per_example = pd.DataFrame({"judge_agree": by_example["agree"].sum(), "n_reads": by_example.size()})
    # Two reads agree when they share a category: sum over categories of c * (c - 1) / 2.
    per_category = joined.groupby([*key, "score"], sort=True).size()
    agreeing = (per_category * (per_category - 1) // 2).groupby(level=list(range(len(key)))).sum()
    per_example["read_agree"] = agreeing.reindex(per_example.index).to_numpy()
    per_example["read_pairs"] = per_example["n_reads"] * (per_example["n_reads"] - 1) // 2
    units = per_example[["judge_agree", "n_reads", "read_agree", "read_pairs"]].to_numpy(dtype=int)
    n = len(units)
    row: list = [task, judge, n, int(units[:, 1].sum()) if n else 0]
    if n == 0:
        return row + [None] * 3 + [0] + [None] * 6 + ["the judge rated no example with a consensus"]
    estimates = _bootstrap_shares(units, seed)
    row += [*estimates["judge_reader"], int(units[:, 3].sum()), *estimates["reader_reader"], *estimates["difference"]]
    note = "" if n >= 2 else "1 example: an interval needs at least 2"
    return [*row, note]


def _bootstrap_shares(units: np.ndarray, seed: int) -> dict[str, list]:
    """Pooled shares over examples, each unit (judge agreements, judge pairs, read agreements, read pairs),
    with percentile bootstrap intervals over examples. The units take few distinct values: a resample
    draws how many of each (one multinomial draw), the same distribution as resampling indices."""
    distinct, inverse = np.unique(units, axis=0, return_inverse=True)
    weights = np.bincount(inverse.ravel(), minlength=len(distinct))
    n = len(units)

    def shares(totals: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        with np.errstate(invalid="ignore", divide="ignore"):
            judge = totals[..., 0] / totals[..., 1]
            readers = totals[..., 2] / totals[..., 3]
        return judge, readers

    judge, readers = shares(units.sum(axis=0).astype(float))
    result = {"judge_reader": [float(judge)], "reader_reader": [float(readers)], "difference": [float(judge - readers)]}
    if n < 2:
        for values in result.values():
            values += [None, None]
        return result
    draws = np.random.default_rng(seed).multinomial(n, weights / n, size=stats.BOOTSTRAP_RESAMPLES)
    sampled_judge, sampled_readers = shares((draws @ distinct).astype(float))
    tail = 100 * (1 - stats.CONFIDENCE) / 2
    for name, sampled in (
        ("judge_reader", sampled_judge),
        ("reader_reader", sampled_readers),
        ("difference", sampled_judge - sampled_readers),
    ):
        low, high = np.nanpercentile(sampled, [tail, 100 - tail])
        result[name] += [float(low), float(high)]
    return result
