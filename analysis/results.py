"""A study's results from `ReleaseFrames`: realism (Task 1), equivalence (Task 2) and agreement.

`analyze(frames)` is the one code path behind the Results page, the API, the download and
`manage.py analyze_release`: it returns tidy tables (one DataFrame per table, one row per group)
and `document`, the same numbers as a JSON-able dict (the API's body and results.json).

Only examples with a consensus count (a release built with unfinished examples carries them with
an empty consensus rating; they are left out). Both tasks use one ordinal scale: 0 = Realistic /
Equivalent, 1 = Minor, 2 = Major. Groups: `overall`, each `dataset`, each `variation` (across
datasets); table rows carry `level` and `group`.

A number the data do not define is empty (None) with the reason in the row's `note`, never NaN.
"""

from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from analysis import stats
from analysis.frames import ReleaseFrames
from analysis.judges import METHODS as JUDGE_METHODS
from analysis.judges import JudgeInputError, judge_tables
from analysis.names import SCHEMA

TASK1_LABELS = ("Realistic", "Minor Issues", "Major Issues")
TASK2_LABELS = ("Equivalent", "Minor Discrepancy", "Major Discrepancy")
LABELS = {"task1": TASK1_LABELS, "task2": TASK2_LABELS}
TASK_ALIASES = {"task1": "task1", "realism": "task1", "task2": "task2", "equivalence": "task2"}
REPORT_TYPES = ("original", "alternative")
TASK1_KEY = ["dataset", "study_id", "reref_variation", "report_type"]
TASK2_KEY = ["dataset", "study_id", "reref_variation"]
KEYS = {"task1": TASK1_KEY, "task2": TASK2_KEY}
ADJUDICATED_AS = ("rated_realistic_or_equivalent", "rated_minor", "rated_major")
THIRD_READ_NOTE = (
    "Over all reads of the release: a third read exists only where the first two disagreed, so this alpha "
    "is not the agreement of two independent reads."
)

METHODS = {
    "scale": "0 = Realistic / Equivalent, 1 = Minor, 2 = Major, for the consensus rating of each example.",
    "proportions": "Wilson score 95% interval (statsmodels proportion_confint, method='wilson').",
    "degradation": (
        "Per pair, alternative minus original consensus score. "
        f"{stats.WILCOXON_METHOD} (scipy.stats.wilcoxon, zero_method='pratt', method='asymptotic'); "
        "p-values Holm-adjusted across variations (statsmodels multipletests); mean difference with a "
        f"percentile bootstrap 95% interval over pairs ({stats.BOOTSTRAP_RESAMPLES} resamples, seeded)."
    ),
    "agreement_initial_reads": (
        "Live study only: the two initial reads of each example (slots 1 and 2). Percent agreement with a "
        "Wilson interval; Fleiss' kappa, Gwet's AC1 and AC2 (ordinal weights) with Gwet's variance and a "
        "t interval (as irrCAC); Krippendorff's alpha (krippendorff package) with Gwet's variance."
    ),
    "agreement_release": (
        "From the release files: the share of examples with exactly two annotations is the share whose two "
        "initial reads agreed (Wilson interval); Krippendorff's alpha over all reads. " + THIRD_READ_NOTE
    ),
    "disagreement": (
        "label_source: unanimous (two reads agreed), majority (a third read settled it), adjudicated. "
        "For adjudicated examples, the mean absolute distance on the 0-2 scale between the adjudicator's "
        "rating and each of the three reads."
    ),
}


class AnalysisInputError(ValueError):
    """The frames hold a value the analysis cannot read; the message names the table, column and value."""


@dataclass
class Results:
    document: dict
    tables: dict[str, pd.DataFrame] = field(default_factory=dict)


def analyze(
    frames: ReleaseFrames,
    *,
    seed: int = 0,
    dataset: str | None = None,
    task: str | None = None,
    progress: Callable[[int, int], None] | None = None,
) -> Results:
    """Every table and the JSON document for these frames, optionally for one dataset and/or one task.

    `progress(done, total)`, if given, is called as the steps finish (for a worker's progress bar).
    """
    if task is not None and task not in TASK_ALIASES:
        raise AnalysisInputError(f"task: unknown task {task!r}; use task1 (realism) or task2 (equivalence).")
    tasks = [TASK_ALIASES[task]] if task else ["task1", "task2"]
    datasets = sorted(_datasets(frames))
    frames = _only_dataset(frames, dataset) if dataset else frames
    steps = 2 * len(tasks)

    def advance(done: int) -> None:
        if progress is not None:
            progress(done, steps)

    live = frames.reads is not None
    tables: dict[str, pd.DataFrame] = {}
    counts: dict[str, dict] = {}
    agreement: list[pd.DataFrame] = []
    disagreement: list[pd.DataFrame] = []
    adjudication: list[pd.DataFrame] = []

    if "task1" in tasks:
        consensus = _scored(frames.task1_consensus, "task1", "task1_consensus.csv")
        full = _scored(frames.task1_full, "task1", "task1_full.csv")
        full = _with_consensus(full, consensus, TASK1_KEY)
        pairs = _pairs(consensus)
        tables["task1_ratings"] = _rating_counts(consensus, "task1", by_report_type=True)
        tables["task1_realistic"] = _task1_realistic(consensus)
        tables["task1_degradation"] = _degradation(pairs, seed)
        counts["task1"] = {"examples": len(consensus), "pairs": len(pairs), "annotations": len(full)}
        advance(1)
    if "task2" in tasks:
        consensus2 = _scored(frames.task2_consensus, "task2", "task2_consensus.csv")
        full2 = _scored(frames.task2_full, "task2", "task2_full.csv")
        full2 = _with_consensus(full2, consensus2, TASK2_KEY)
        tables["task2_ratings"] = _rating_counts(consensus2, "task2", by_report_type=False)
        tables["task2_proportions"] = _task2_proportions(consensus2)
        counts["task2"] = {"examples": len(consensus2), "annotations": len(full2)}
        advance(len(tasks))

    for done, name in enumerate(tasks, start=len(tasks) + 1):
        consensus_t, full_t = (consensus, full) if name == "task1" else (consensus2, full2)
        if live:
            reads = _initial_reads(frames.reads, name, consensus_t)
            agreement.append(_initial_read_agreement(reads, name))
        agreement.append(_release_agreement(consensus_t, full_t, name))
        disagreement.append(_disagreement(consensus_t, name))
        adjudication.append(_adjudication(consensus_t, full_t, name))
        advance(done)
    tables["agreement"] = pd.concat(agreement, ignore_index=True)
    tables["disagreement"] = pd.concat(disagreement, ignore_index=True)
    tables["adjudication"] = pd.concat(adjudication, ignore_index=True)
    methods = METHODS
    if frames.task1_judges is not None or frames.task2_judges is not None:
        tables |= _judges(frames, tasks, seed)
        methods = METHODS | JUDGE_METHODS

    tables = {name: _clean(table) for name, table in tables.items()}
    document = {
        "schema": SCHEMA,
        "source": "live" if live else "release",
        "filters": {"dataset": dataset, "task": tasks[0] if task else None},
        "scale": {name: list(LABELS[name]) for name in tasks},
        "datasets": datasets,
        "counts": counts,
        "methods": methods,
        "seed": seed,
        "tables": {name: _records(table) for name, table in tables.items()},
    }
    return Results(document=document, tables=tables)


# Input --------------------------------------------------------------------------------------------


def _only_dataset(frames: ReleaseFrames, dataset: str) -> ReleaseFrames:
    def keep(frame: pd.DataFrame | None) -> pd.DataFrame | None:
        return None if frame is None else frame[frame["dataset"] == dataset]

    return ReleaseFrames(
        task1_full=keep(frames.task1_full),
        task1_disagreed=keep(frames.task1_disagreed),
        task1_consensus=keep(frames.task1_consensus),
        task2_full=keep(frames.task2_full),
        task2_disagreed=keep(frames.task2_disagreed),
        task2_consensus=keep(frames.task2_consensus),
        reads=keep(frames.reads),
        task1_judges=keep(frames.task1_judges),
        task2_judges=keep(frames.task2_judges),
    )


def _judges(frames: ReleaseFrames, tasks: list[str], seed: int) -> dict[str, pd.DataFrame]:
    """The automated judges' tables (analysis.judges), for the tasks analysed that have a judges table."""
    from_frames = {"task1": frames.task1_judges, "task2": frames.task2_judges}
    judges = {task: from_frames[task] for task in tasks if from_frames[task] is not None}
    consensus = {task: getattr(frames, f"{task}_consensus") for task in judges}
    full = {task: getattr(frames, f"{task}_full") for task in judges}
    try:
        return judge_tables(judges, consensus, full, seed=seed)
    except JudgeInputError as error:
        raise AnalysisInputError(str(error)) from None


def _datasets(frames: ReleaseFrames) -> set[str]:
    return set(frames.task1_consensus["dataset"]) | set(frames.task2_consensus["dataset"])


def _scores(ratings: pd.Series, task: str, where: str) -> np.ndarray:
    labels = LABELS[task]
    codes = pd.Index(labels).get_indexer(ratings)
    if (codes < 0).any():
        bad = ratings[codes < 0].iloc[0]
        raise AnalysisInputError(f"{where}: rating {bad!r} is not a {task} label; expected one of {', '.join(labels)}.")
    return codes.astype(np.int8)


def _scored(frame: pd.DataFrame, task: str, where: str) -> pd.DataFrame:
    """Rows with a rating (unfinished examples carry an empty one), with its 0-2 score."""
    rated = frame[frame["rating"] != ""]
    return rated.assign(score=_scores(rated["rating"], task, where))


def _with_consensus(full: pd.DataFrame, consensus: pd.DataFrame, key: list[str]) -> pd.DataFrame:
    """The annotations of examples that have a consensus (`consensus` holds only rated rows)."""
    return full.loc[_in(full, key, consensus)]


def _unit_ids(frames: list[pd.DataFrame], key: list[str]) -> list[np.ndarray]:
    """One integer per row for its example, consistent across the frames (mixed-radix key codes)."""
    ids = np.zeros(sum(len(frame) for frame in frames), dtype=np.int64)
    for column in key:
        codes, uniques = pd.factorize(pd.concat([frame[column] for frame in frames], ignore_index=True))
        ids = ids * max(len(uniques), 1) + codes
    return np.split(ids, np.cumsum([len(frame) for frame in frames])[:-1])


def _in(frame: pd.DataFrame, key: list[str], within: pd.DataFrame) -> np.ndarray:
    """For each row of frame, whether its example is among `within`'s."""
    ids, within_ids = _unit_ids([frame, within], key)
    return np.isin(ids, within_ids)


def _groups(frame: pd.DataFrame) -> Iterator[tuple[str, str, pd.DataFrame]]:
    yield "overall", "all", frame
    for level, column in (("dataset", "dataset"), ("variation", "reref_variation")):
        for group, part in frame.groupby(column, sort=True):
            yield level, str(group), part


# Task 1 -------------------------------------------------------------------------------------------


def _rating_counts(consensus: pd.DataFrame, task: str, *, by_report_type: bool) -> pd.DataFrame:
    rows = []
    for level, group, part in _groups(consensus):
        for report_type in REPORT_TYPES if by_report_type else (None,):
            subset = part if report_type is None else part[part["report_type"] == report_type]
            counts = np.bincount(subset["score"], minlength=3)
            total = int(counts.sum())
            for score, label in enumerate(LABELS[task]):
                row = {"level": level, "group": group}
                if report_type is not None:
                    row["report_type"] = report_type
                row |= {
                    "rating": label,
                    "score": score,
                    "n": int(counts[score]),
                    "total": total,
                    "percent": 100 * counts[score] / total if total else None,
                    "note": "" if total else "no examples",
                }
                rows.append(row)
    columns = ["level", "group", *(["report_type"] if by_report_type else []), "rating", "score", "n", "total"]
    return pd.DataFrame(rows, columns=[*columns, "percent", "note"])


def _proportion_row(row: dict, successes: int, n: int) -> dict:
    estimate = stats.wilson(successes, n)
    return row | {"k": successes, "n": n, **_estimate_columns(estimate, "proportion")}


def _estimate_columns(result: stats.Result, value_name: str = "value") -> dict:
    if isinstance(result, stats.NotComputable):
        return {value_name: None, "ci_low": None, "ci_high": None, "note": result.reason}
    return {value_name: result.value, "ci_low": result.low, "ci_high": result.high, "note": ""}


def _task1_realistic(consensus: pd.DataFrame) -> pd.DataFrame:
    rows = []
    for level, group, part in _groups(consensus):
        for report_type in REPORT_TYPES:
            subset = part[part["report_type"] == report_type]
            realistic = int((subset["score"] == 0).sum())
            rows.append(
                _proportion_row({"level": level, "group": group, "report_type": report_type}, realistic, len(subset))
            )
    columns = ["level", "group", "report_type", "k", "n", "proportion", "ci_low", "ci_high", "note"]
    return pd.DataFrame(rows, columns=columns)


def _pairs(consensus: pd.DataFrame) -> pd.DataFrame:
    """One row per pair whose two reports both have a consensus: difference = alternative - original."""
    key = ["dataset", "study_id", "reref_variation"]
    original = consensus.loc[consensus["report_type"] == "original", [*key, "score"]]
    alternative = consensus.loc[consensus["report_type"] == "alternative", [*key, "score"]]
    pairs = original.merge(alternative, on=key, suffixes=("_original", "_alternative"))
    return pairs.assign(difference=pairs["score_alternative"].astype(int) - pairs["score_original"].astype(int))


def _degradation(pairs: pd.DataFrame, seed: int) -> pd.DataFrame:
    rows = []
    for level, group, part in _groups(pairs):
        differences = part["difference"].to_numpy()
        mean = stats.bootstrap_mean(differences, seed=seed)
        test = stats.signed_rank(differences)
        notes = []
        row = {"level": level, "group": group, "n_pairs": len(part)}
        if isinstance(mean, stats.NotComputable):
            row |= {
                "mean_difference": float(differences.mean()) if len(part) else None,
                "ci_low": None,
                "ci_high": None,
            }
            notes.append(f"interval: {mean.reason}")
        else:
            row |= {"mean_difference": mean.value, "ci_low": mean.low, "ci_high": mean.high}
        row["worse"] = int((differences > 0).sum())
        row["better"] = int((differences < 0).sum())
        row["same"] = int((differences == 0).sum())
        if isinstance(test, stats.NotComputable):
            row |= {"statistic": None, "p_value": None}
            notes.append(f"test: {test.reason}")
        else:
            row |= {"statistic": test.statistic, "p_value": test.p_value}
        row["p_holm"] = None
        row["note"] = "; ".join(notes)
        rows.append(row)
    columns = [
        "level", "group", "n_pairs", "worse", "same", "better", "mean_difference", "ci_low", "ci_high",
        "statistic", "p_value", "p_holm", "note",
    ]  # fmt: skip
    table = pd.DataFrame(rows, columns=columns)
    tested = table.index[(table["level"] == "variation") & table["p_value"].notna()]
    if len(tested):
        table["p_holm"] = table["p_holm"].astype(object)
        table.loc[tested, "p_holm"] = stats.holm(table.loc[tested, "p_value"].astype(float).tolist())
    return table


# Task 2 -------------------------------------------------------------------------------------------


def _task2_proportions(consensus: pd.DataFrame) -> pd.DataFrame:
    rows = []
    for level, group, part in _groups(consensus):
        n = len(part)
        no_major = int((part["score"] < 2).sum())
        equivalent = int((part["score"] == 0).sum())
        rows.append(_proportion_row({"level": level, "group": group, "measure": "no_major_discrepancy"}, no_major, n))
        rows.append(_proportion_row({"level": level, "group": group, "measure": "equivalent"}, equivalent, n))
    columns = ["level", "group", "measure", "k", "n", "proportion", "ci_low", "ci_high", "note"]
    return pd.DataFrame(rows, columns=columns)


# Agreement ----------------------------------------------------------------------------------------


def _count_matrix(frame: pd.DataFrame, key: list[str]) -> tuple[np.ndarray, np.ndarray]:
    """Units x 3 matrix of read counts per score, and each unit's variation."""
    if frame.empty:
        return np.zeros((0, 3)), np.array([], dtype=object)
    units, _ = pd.factorize(_unit_ids([frame], key)[0])
    matrix = np.zeros((units.max() + 1, 3))
    np.add.at(matrix, (units, frame["score"].to_numpy().astype(int)), 1)
    _, first = np.unique(units, return_index=True)
    return matrix, frame["reref_variation"].to_numpy()[first]


def _agreement_rows(task: str, source: str, measures: dict, key: list[str], frame: pd.DataFrame, note: str = ""):
    matrix, variations = _count_matrix(frame, key)
    groups = [("overall", "all", np.ones(len(matrix), dtype=bool))]
    groups += [("variation", str(v), variations == v) for v in sorted(set(variations))]
    rows = []
    for level, group, mask in groups:
        part = matrix[mask]
        for measure, function in measures.items():
            result = function(part)
            columns = _estimate_columns(result)
            if note and not columns["note"]:
                columns["note"] = note
            rows.append(
                {"task": task, "source": source, "level": level, "group": group, "measure": measure}
                | {"n_examples": len(part)}
                | columns
            )
    return rows


AGREEMENT_COLUMNS = ["task", "source", "level", "group", "measure", "n_examples", "value", "ci_low", "ci_high", "note"]


def _initial_reads(reads: pd.DataFrame, task: str, consensus: pd.DataFrame) -> pd.DataFrame:
    initial = reads[(reads["task"] == task) & reads["slot"].isin(["1", "2"])]
    key = KEYS[task]
    initial = _scored(initial, task, "reads")
    return initial.loc[_in(initial, key, consensus)]


def _initial_read_agreement(reads: pd.DataFrame, task: str) -> pd.DataFrame:
    ordinal = stats.ordinal_weights(3)
    measures = {
        "percent_agreement": stats.percent_agreement,
        "fleiss_kappa": stats.fleiss_kappa,
        "krippendorff_alpha_nominal": lambda m: stats.krippendorff_alpha(m, "nominal"),
        "krippendorff_alpha_ordinal": lambda m: stats.krippendorff_alpha(m, "ordinal"),
        "gwet_ac1": stats.gwet_ac,
        "gwet_ac2_ordinal": lambda m: stats.gwet_ac(m, ordinal),
    }
    rows = _agreement_rows(task, "initial_reads", measures, KEYS[task], reads)
    return pd.DataFrame(rows, columns=AGREEMENT_COLUMNS)


def _release_agreement(consensus: pd.DataFrame, full: pd.DataFrame, task: str) -> pd.DataFrame:
    rows = []
    for level, group, part in [("overall", "all", consensus)] + [
        ("variation", str(v), p) for v, p in consensus.groupby("reref_variation", sort=True)
    ]:
        two = int((part["n_annotations"] == "2").sum())
        rows.append(
            {"task": task, "source": "release", "level": level, "group": group, "measure": "two_reads_agreed"}
            | {"n_examples": len(part)}
            | _estimate_columns(stats.wilson(two, len(part)))
        )
    measures = {
        "krippendorff_alpha_nominal_all_reads": lambda m: stats.krippendorff_alpha(m, "nominal"),
        "krippendorff_alpha_ordinal_all_reads": lambda m: stats.krippendorff_alpha(m, "ordinal"),
    }
    rows += _agreement_rows(task, "release", measures, KEYS[task], full, note=THIRD_READ_NOTE)
    table = pd.DataFrame(rows, columns=AGREEMENT_COLUMNS)
    later = (table["level"] != "overall").astype(int)
    return table.assign(_later=later).sort_values(["_later", "group"], kind="stable").drop(columns="_later")


def _disagreement(consensus: pd.DataFrame, task: str) -> pd.DataFrame:
    rows = []
    for level, group, part in _groups(consensus):
        n = len(part)
        sources = part["label_source"].value_counts()
        row = {"task": task, "level": level, "group": group, "n_examples": n}
        for source, name in (
            ("unanimous", "two_reads_agreed"),
            ("majority", "third_read_settled"),
            ("adjudicated", "adjudicated"),
        ):
            count = int(sources.get(source, 0))
            row[name] = count
            row[f"{name}_percent"] = 100 * count / n if n else None
        row["note"] = "" if n else "no examples"
        rows.append(row)
    return pd.DataFrame(rows)


def _adjudication(consensus: pd.DataFrame, full: pd.DataFrame, task: str) -> pd.DataFrame:
    key = KEYS[task]
    adjudicated = consensus.loc[consensus["label_source"] == "adjudicated", [*key, "score"]]
    reads = full[[*key, "score"]].merge(adjudicated, on=key, suffixes=("", "_adjudicated"))
    reads = reads.assign(distance=(reads["score"].astype(int) - reads["score_adjudicated"].astype(int)).abs())
    per_example = reads.groupby(key, sort=True).agg(
        mean_distance=("distance", "mean"), closest=("distance", "min"), reads=("distance", "size")
    )
    per_example = per_example.reset_index().merge(adjudicated, on=key)
    rows = []
    for level, group, part in _groups(per_example):
        n = len(part)
        row = {"task": task, "level": level, "group": group, "n_adjudicated": n}
        counts = np.bincount(part["score"].astype(int), minlength=3)
        for score in range(3):
            row[ADJUDICATED_AS[score]] = int(counts[score])
        row["mean_distance_to_reads"] = float(part["mean_distance"].mean()) if n else None
        row["matched_a_read"] = int((part["closest"] == 0).sum())
        row["note"] = "" if n else "no adjudicated examples"
        rows.append(row)
    return pd.DataFrame(rows)


# Output -------------------------------------------------------------------------------------------


def _clean(table: pd.DataFrame) -> pd.DataFrame:
    """No NaN anywhere: an undefined number is None (an empty CSV field, null in JSON)."""
    table = table.reset_index(drop=True)
    return table.astype(object).where(table.notna(), None)


def _records(table: pd.DataFrame) -> list[dict]:
    return [{k: _plain(v) for k, v in row.items()} for row in table.to_dict(orient="records")]


def _plain(value):
    if isinstance(value, np.integer):
        return int(value)
    if isinstance(value, np.floating):
        return float(value)
    return value
