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

from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from functools import partial

import numpy as np
import pandas as pd
from scipy import stats as scipy_stats

from analysis import mixed, paired, parallel, stats
from analysis.frames import ReleaseFrames
from analysis.judges import METHODS as JUDGE_METHODS
from analysis.judges import JudgeInputError, judge_tables
from analysis.names import SCHEMA
from analysis.result_data import LABELS, Fits, Results
from annotation.taxonomy import DEFAULT_TAXONOMY

TASK_ALIASES = {"task1": "task1", "realism": "task1", "task2": "task2", "equivalence": "task2"}
REPORT_TYPES = ("original", "alternative")
TASK1_KEY = ["dataset", "study_id", "reref_variation", "report_type"]
TASK2_KEY = ["dataset", "study_id", "reref_variation"]
KEYS = {"task1": TASK1_KEY, "task2": TASK2_KEY}
ADJUDICATED_AS = ("rated_realistic_or_equivalent", "rated_minor", "rated_major")
THIRD_READ_NOTE = (
    "Biased by design: over all reads of the release, and a third read exists only where the first two "
    "disagreed, so disagreement is over-represented; the rows of the first two reads are the unbiased measure."
)
# Below these many units an interval says too little to be shown (the point estimate stays): an
# exact paired test cannot reach 5% with fewer than 6 exams (2 / 2^5 > 0.05), and an agreement
# coefficient's variance rests on its units (the published design has 10 per variation).
MIN_EXAMS = paired.fewest_exams()
MIN_AGREEMENT_EXAMPLES = 10
# A random intercept's variance that reaches this on the logit scale (an SD of 10: odds multiplied by
# e^10 between two readers) means the likelihood is flat towards separation: the search stops there
# and the estimates are not shown.
MAX_LOGIT_VARIANCE = 100.0
# Laplace fits take seconds per few thousand reads (bench/mixed.py --logistic); larger groups are not fitted.
MAX_LOGISTIC_READS = 20_000

METHODS = {
    "scale": "0 = Realistic / Equivalent, 1 = Minor, 2 = Major, for the consensus rating of each example.",
    "proportions": "Wilson score 95% interval (statsmodels proportion_confint, method='wilson').",
    "degradation": (
        "Per pair, alternative minus original consensus score; its mean over the pairs. "
        f"{paired.METHOD}. One exam can be in several pairs: an exam's pairs are flipped together, so the "
        "overall, dataset and dimension rows treat exams, not pairs, as the independent units. p-values are "
        "Holm-adjusted across variations (statsmodels multipletests); beside them, each variation's interval "
        "at the Bonferroni level 1 - 0.05/m (m variations tested), which excludes 0 only where the Bonferroni "
        "p-value is below 0.05. An interval is exact, so it can have zero width (every pair shares one "
        f"difference); with fewer than {MIN_EXAMS} exams no interval is bounded and none is shown."
    ),
    "realistic_difference": (
        "Per pair, whether each report's consensus is Realistic; the difference alternative minus original "
        "in the share Realistic. Per variation (one pair per exam): Newcombe's (1998) method 10 interval and "
        "the exact McNemar test (statsmodels mcnemar, exact=True), Holm-adjusted across variations. Overall, "
        "per dataset and per dimension, where an exam can be in several pairs: the exact sign-flip test and "
        f"interval over exams as above. Fewer than {MIN_EXAMS} exams: no interval. With a non-inferiority "
        "margin M, a row is non-inferior when its interval's lower end is above -M, inferior when its upper "
        "end is below -M, otherwise not shown."
    ),
    "mixed_model": (
        "Live study only: the individual initial reads (the first two of each report; a third read depends on "
        "the first two disagreeing) in a linear mixed model of the 0-2 score with a fixed effect for the "
        "alternative and crossed random intercepts for reader and exam (overall and per dimension also reader "
        "x variation, where a reader read several variations), fitted by REML as lme4's lmer fits it "
        "(analysis.mixed), with a t interval and p-value on Satterthwaite's degrees of freedom as lmerTest computes "
        "them (equal to lme4 and lmerTest to 1e-6 on stored data), so that few exams widen the interval. The estimate "
        "is the difference in a single read's mean score, with readers and exams as sources of variance. "
        "A release has no reader identities by design, so from a release only the exam-clustered tests above "
        f"apply. Fewer than {MIN_EXAMS} exams: estimate only."
    ),
    "realistic_mixed_model": (
        "Live study only, the same initial reads: whether each read is Realistic in a logistic mixed model with "
        "a fixed effect for the alternative and the same crossed random intercepts, fitted by Laplace's "
        "approximation as lme4's glmer fits it by default (analysis.mixed; equal to glmer on stored data, "
        "estimates to 1e-5, standard errors from the same finite-difference Hessian to 1e-4); the odds ratio "
        "(alternative against original) with a Wald 95% interval and p-value. Each random-effect variance is "
        f"searched up to {MAX_LOGIT_VARIANCE:.0f} on the logit scale; a fit that reaches it (near-complete separation) "
        "is not shown. Fewer than "
        f"{MIN_EXAMS} exams: estimate only."
    ),
    "equivalence_margin": (
        "With an equivalence margin M for Task 2 (the largest share of pairs with a Major Discrepancy the "
        "study accepts), a group is equivalent when the Wilson interval of the share with no Major "
        "Discrepancy lies above 1 - M, otherwise not shown."
    ),
    "order": (
        "Task 2 reads by which report was shown as Report A (drawn at random for each read): the share rated "
        "Equivalent with Report A the original against with Report A the alternative, Fisher's exact test "
        "(scipy.stats.fisher_exact, two-sided)."
    ),
    "agreement_initial_reads": (
        "Live study only: the two initial reads of each example (slots 1 and 2). Percent agreement with a "
        "Wilson interval; Fleiss' kappa, Gwet's AC1 and AC2 (ordinal weights) with Gwet's variance and a "
        "t interval (as irrCAC); Krippendorff's alpha (the coincidence-matrix formula, equal to the krippendorff "
        "package's) with Gwet's variance. "
        f"With fewer than {MIN_AGREEMENT_EXAMPLES} examples the value is shown without an interval."
    ),
    "agreement_release": (
        "From the release files, the first two reads of each example: an example with two annotations has "
        "only those; with three and a majority, the first two were the two that differ (a third read is "
        "asked only after a disagreement); with a three-way split, which two came first is not in the "
        "release, so alpha is given as its range over every way of choosing them. The share with two "
        "annotations is the share whose first two reads agreed (Wilson interval). "
        "Krippendorff's alpha over all reads is kept for comparison: " + THIRD_READ_NOTE
    ),
    "dimensions": (
        "Variations are grouped by the taxonomy's dimension (Organization, Completeness, Granularity, "
        "Language): the study's own taxonomy for a live study, the MIMIC-CXR-Ext-ReRef taxonomy for a release."
    ),
    "disagreement": (
        "label_source: unanimous (two reads agreed), majority (a third read settled it), adjudicated. "
        "For adjudicated examples, the mean absolute distance on the 0-2 scale between the adjudicator's "
        "rating and each of the three reads."
    ),
}


@dataclass(frozen=True)
class Margins:
    """A study's margins, as fractions (None: none set).

    task1_realistic: non-inferiority margin on the share rated Realistic (alternative minus original).
    task2_major: the largest share of pairs with a Major Discrepancy that still counts as equivalent.
    """

    task1_realistic: float | None = None
    task2_major: float | None = None


class AnalysisInputError(ValueError):
    """The frames hold a value the analysis cannot read; the message names the table, column and value."""


def with_fits[T](results: Results, jobs: list[Callable[[], T]]) -> list[T]:
    """Run these jobs and the results' deferred fits (if any) together (analysis.parallel.run_beside):
    side by side in forked processes, the jobs first (the figures, the longest), then the fits; or,
    where processes were started early to draw, the jobs there and the fits here. The fits' tables and
    document rows are filled in. Returns the jobs' results."""
    fits = results.fits
    done, rows = parallel.run_beside(jobs, fits.jobs if fits is not None else [])
    if fits is not None:
        results.fits = None
        fits.finish(rows)
    return done


def analyze(
    frames: ReleaseFrames,
    *,
    seed: int = 0,
    dataset: str | None = None,
    task: str | None = None,
    progress: Callable[[int, int], None] | None = None,
    taxonomy: Sequence[tuple[str, str, str]] | None = None,
    margins: Margins | None = None,
    defer_fits: bool = False,
) -> Results:
    """Every table and the JSON document for these frames, optionally for one dataset and/or one task.

    `progress(done, total)`, if given, is called as the steps finish (for a worker's progress bar).
    `taxonomy` is the study's (key, label, dimension) of each variation, in its order (default:
    MIMIC-CXR-Ext-ReRef's): rows are grouped by its dimensions and ordered as it orders them, and the
    document names each variation by its label. `margins` are the study's non-inferiority and
    equivalence margins (default: none). With `defer_fits`, the mixed models' fits (most of the time a
    live study's analysis takes) are left in `Results.fits`, for `with_fits` to run beside other work
    (write_analysis: beside the figures); their tables are empty until then.
    """
    taxonomy = tuple(DEFAULT_TAXONOMY if taxonomy is None else taxonomy)
    dimensions = {key: dimension for key, _, dimension in taxonomy}
    margins = margins or Margins()
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
        consensus, full, reads = _task_frames(frames, "task1", dimensions)
        pairs = _pairs(consensus)
        tables["task1_ratings"] = _rating_counts(consensus, "task1", by_report_type=True)
        tables["task1_realistic"] = _task1_realistic(consensus)
        tables["task1_degradation"] = _degradation(pairs)
        tables["task1_realistic_difference"] = _realistic_difference(pairs, margins.task1_realistic)
        fit_jobs, fitted = _mixed_model_fits(reads)
        # Empty until the fits are run (below, or by with_fits): their place in the tables' order is kept.
        tables["task1_mixed_model"] = pd.DataFrame(columns=MIXED_COLUMNS)
        tables["task1_realistic_mixed_model"] = pd.DataFrame(columns=LOGISTIC_COLUMNS)
        counts["task1"] = {"examples": len(consensus), "pairs": len(pairs), "annotations": len(full)}
        advance(1)
    if "task2" in tasks:
        consensus2, full2, reads2 = _task_frames(frames, "task2", dimensions)
        tables["task2_ratings"] = _rating_counts(consensus2, "task2", by_report_type=False)
        tables["task2_proportions"] = _task2_proportions(consensus2, margins.task2_major)
        tables["task2_order"] = _order_effect(full2)
        counts["task2"] = {"examples": len(consensus2), "annotations": len(full2)}
        advance(len(tasks))

    for done, name in enumerate(tasks, start=len(tasks) + 1):
        consensus_t, full_t, reads_t = (consensus, full, reads) if name == "task1" else (consensus2, full2, reads2)
        if live:
            agreement.append(_initial_read_agreement(reads_t, name))
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

    variations = _variations(frames, taxonomy)
    tables = {name: _clean(in_taxonomy_order(table, variations)) for name, table in tables.items()}
    document = {
        "schema": SCHEMA,
        "source": "live" if live else "release",
        "filters": {"dataset": dataset, "task": tasks[0] if task else None},
        "scale": {name: list(LABELS[name]) for name in tasks},
        "datasets": datasets,
        "variations": variations,
        "counts": counts,
        "methods": methods,
        "seed": seed,
        "margins": {"task1_realistic": margins.task1_realistic, "task2_major": margins.task2_major},
        "tables": {name: _records(table) for name, table in tables.items()},
    }
    results = Results(document=document, tables=tables)
    if "task1" in tasks:

        def finish(rows: list[dict]) -> None:
            for name, table in zip(("task1_mixed_model", "task1_realistic_mixed_model"), fitted(rows), strict=True):
                results.tables[name] = _clean(in_taxonomy_order(table, variations))
                results.document["tables"][name] = _records(results.tables[name])

        results.fits = Fits(jobs=fit_jobs, finish=finish)
        if not defer_fits:
            with_fits(results, [])
    return results


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


def _variations(frames: ReleaseFrames, taxonomy: tuple[tuple[str, str, str], ...]) -> list[dict]:
    """The variations of these frames, in the taxonomy's order, each with its label and dimension; a
    variation the taxonomy does not name comes after them, under its key, in no dimension."""
    present = {*frames.task1_consensus["reref_variation"].unique(), *frames.task2_consensus["reref_variation"].unique()}
    known = [
        {"key": key, "label": label, "dimension": dimension} for key, label, dimension in taxonomy if key in present
    ]
    named = {key for key, _, _ in taxonomy}
    unknown = [{"key": key, "label": key, "dimension": ""} for key in sorted(present - named)]
    return known + unknown


LEVEL_ORDER = ("overall", "dataset", "dimension", "variation")


def in_taxonomy_order(table: pd.DataFrame, variations: list[dict]) -> pd.DataFrame:
    """A table's rows in one order everywhere: within what comes before `level` (task, judge, ...), in
    the order it first appears, overall, the datasets, the dimensions and the variations, these two in
    the taxonomy's order (what is not in the taxonomy last, by key); ties keep their order."""
    if table.empty or not {"level", "group"} <= set(table.columns):
        return table
    leading = list(table.columns[: table.columns.get_loc("level")])
    dimensions = list(dict.fromkeys(entry["dimension"] for entry in variations if entry["dimension"]))
    variation_rank = {entry["key"]: rank for rank, entry in enumerate(variations)}
    dimension_rank = {dimension: rank for rank, dimension in enumerate(dimensions)}
    level = table["level"].map({name: rank for rank, name in enumerate(LEVEL_ORDER)}).fillna(len(LEVEL_ORDER))
    group = np.select(
        [table["level"] == "dimension", table["level"] == "variation"],
        [
            table["group"].map(dimension_rank).fillna(len(dimension_rank)).to_numpy(),
            table["group"].map(variation_rank).fillna(len(variation_rank)).to_numpy(),
        ],
        0,
    )
    keys = [group, level.to_numpy(), *(pd.factorize(table[column])[0] for column in reversed(leading))]
    return table.iloc[np.lexsort(keys)]


def _datasets(frames: ReleaseFrames) -> set[str]:
    return {*frames.task1_consensus["dataset"].unique(), *frames.task2_consensus["dataset"].unique()}


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


def _task_frames(
    frames: ReleaseFrames, task: str, dimensions: dict[str, str]
) -> tuple[pd.DataFrame, pd.DataFrame, pd.DataFrame | None]:
    """A task's rated consensus rows, the annotations of those examples and (live) their initial reads,
    scored, with their taxonomy dimension and a `unit` column: one integer per example, the same in
    the three frames."""
    consensus = _scored(getattr(frames, f"{task}_consensus"), task, f"{task}_consensus.csv")
    full = _scored(getattr(frames, f"{task}_full"), task, f"{task}_full.csv")
    parts = [consensus, full]
    if frames.reads is not None:
        reads = frames.reads
        parts.append(_scored(reads[(reads["task"] == task) & reads["slot"].isin(["1", "2"])], task, "reads"))
    units = _unit_ids(parts, KEYS[task])
    parts = [part.assign(unit=ids) for part, ids in zip(parts, units, strict=True)]
    # Only the examples with a consensus (consensus holds only rated rows).
    parts[1:] = [part.loc[np.isin(part["unit"].to_numpy(), units[0])] for part in parts[1:]]
    consensus, full, *reads = (_dimensioned(part, dimensions) for part in parts)
    return consensus, full, reads[0] if reads else None


def _unit_ids(frames: list[pd.DataFrame], key: list[str]) -> list[np.ndarray]:
    """One integer per row for its example, consistent across the frames (mixed-radix key codes)."""
    ids = np.zeros(sum(len(frame) for frame in frames), dtype=np.int64)
    for column in key:
        codes, uniques = pd.factorize(pd.concat([frame[column] for frame in frames], ignore_index=True))
        ids = ids * max(len(uniques), 1) + codes
    return np.split(ids, np.cumsum([len(frame) for frame in frames])[:-1])


def _dimensioned(frame: pd.DataFrame, dimensions: dict[str, str]) -> pd.DataFrame:
    """The frame with each row's taxonomy dimension ("" for a variation the taxonomy does not name)."""
    return frame.assign(dimension=frame["reref_variation"].map(dimensions).astype(str).fillna(""))


def _groups(frame: pd.DataFrame) -> Iterator[tuple[str, str, pd.DataFrame]]:
    """overall, then each dataset, each taxonomy dimension and each variation."""
    yield "overall", "all", frame
    for level, column in (("dataset", "dataset"), ("dimension", "dimension"), ("variation", "reref_variation")):
        for group, part in frame.groupby(column, sort=True):
            if group != "":
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
    """One row per pair whose two reports both have a consensus: difference = alternative - original.

    `exam` names the pair's exam (dataset and study id): the unit the tests treat as independent.
    """
    key = ["dataset", "study_id", "reref_variation"]
    original = consensus.loc[consensus["report_type"] == "original", [*key, "dimension", "score"]]
    alternative = consensus.loc[consensus["report_type"] == "alternative", [*key, "score"]]
    pairs = original.merge(alternative, on=key, suffixes=("_original", "_alternative"))
    return pairs.assign(
        difference=pairs["score_alternative"].astype(int) - pairs["score_original"].astype(int),
        realistic_difference=(pairs["score_alternative"] == 0).astype(int) - (pairs["score_original"] == 0).astype(int),
        exam=pairs["dataset"] + "\x1f" + pairs["study_id"],
    )


def _interval_columns(interval: stats.Result, prefix: str = "ci") -> tuple[dict, str]:
    """The interval's two columns and a note (why it is missing, or that it has zero width)."""
    if isinstance(interval, stats.NotComputable):
        return {f"{prefix}_low": None, f"{prefix}_high": None}, interval.reason
    note = "zero-width interval: only the observed difference is not rejected" if interval.low == interval.high else ""
    return {f"{prefix}_low": interval.low, f"{prefix}_high": interval.high}, note


def _adjusted_confidence(table: pd.DataFrame) -> float:
    """Bonferroni's level for the variation rows tested: 1 - 0.05 / m."""
    tested = int(((table["level"] == "variation") & table["p_value"].notna()).sum())
    return 1 - (1 - stats.CONFIDENCE) / max(tested, 1)


def _holm_variations(table: pd.DataFrame) -> pd.DataFrame:
    table["p_holm"] = None
    tested = table.index[(table["level"] == "variation") & table["p_value"].notna()]
    if len(tested):
        table["p_holm"] = table["p_holm"].astype(object)
        table.loc[tested, "p_holm"] = stats.holm(table.loc[tested, "p_value"].astype(float).tolist())
    return table


def _sign_flip_row(level: str, group: str, part: pd.DataFrame, column: str) -> tuple[dict, paired.SignFlip]:
    """A paired row's counts, mean, exact test and interval (at 95%; the adjusted one comes later)."""
    differences = part[column].to_numpy()
    test = paired.SignFlip(differences, part["exam"].to_numpy())
    row = {"level": level, "group": group, "n_pairs": len(part), "n_exams": test.n_exams}
    row |= {
        "worse": int((differences > 0).sum()),
        "same": int((differences == 0).sum()),
        "better": int((differences < 0).sum()),
    }
    row["estimate"] = test.mean if len(part) else None
    notes = []
    interval, why = _interval_columns(test.interval() if len(part) else stats.NotComputable("no pairs"))
    row |= interval
    if why:
        notes.append(f"interval: {why}")
    result = test.test()
    if isinstance(result, stats.NotComputable):
        row["p_value"] = None
        notes.append(f"test: {result.reason}")
    else:
        row["p_value"] = result.p_value
    row["method"] = test.method if len(part) else ""
    row["note"] = "; ".join(notes)
    return row, test


def _adjust(table: pd.DataFrame, tests: list[paired.SignFlip | None]) -> pd.DataFrame:
    """Holm's p-values and Bonferroni's intervals for the variation rows (None elsewhere)."""
    table = _holm_variations(table)
    level = _adjusted_confidence(table)
    low, high = [None] * len(table), [None] * len(table)
    for index, test in enumerate(tests):
        if test is None or table.at[index, "level"] != "variation" or table.at[index, "p_value"] is None:
            continue
        interval = test.interval(level)
        if isinstance(interval, stats.Estimate):
            low[index], high[index] = interval.low, interval.high
        else:
            table.at[index, "note"] = "; ".join(
                filter(None, [table.at[index, "note"], f"adjusted interval: {interval.reason}"])
            )
    return table.assign(ci_adjusted_low=low, ci_adjusted_high=high, adjusted_confidence=level)


DEGRADATION_COLUMNS = [
    "level", "group", "n_pairs", "n_exams", "worse", "same", "better", "mean_difference", "ci_low", "ci_high",
    "ci_adjusted_low", "ci_adjusted_high", "adjusted_confidence", "p_value", "p_holm", "method", "note",
]  # fmt: skip


def _degradation(pairs: pd.DataFrame) -> pd.DataFrame:
    rows, tests = [], []
    for level, group, part in _groups(pairs):
        row, test = _sign_flip_row(level, group, part, "difference")
        row["mean_difference"] = row.pop("estimate")
        rows.append(row)
        tests.append(test)
    table = pd.DataFrame(rows, columns=[c for c in DEGRADATION_COLUMNS if "adjusted" not in c and c != "p_holm"])
    return _adjust(table, tests)[DEGRADATION_COLUMNS]


MIXED_COLUMNS = [
    "level", "group", "n_reads", "n_readers", "n_exams", "estimate", "se", "df", "ci_low", "ci_high", "p_value",
    "var_reader", "var_exam", "var_reader_variation", "var_residual", "method", "note",
]  # fmt: skip
NO_READERS_IN_A_RELEASE = (
    "not computable from a release: annotator identities are removed by design (annotation_index says nothing "
    "about who rated), so the readers' variance cannot be estimated; the exam-clustered sign-flip rows treat "
    "exams as the independent units"
)


def _mixed_model_fits(
    reads: pd.DataFrame | None,
) -> tuple[list[Callable[[], dict]], Callable[[list[dict]], tuple[pd.DataFrame, pd.DataFrame]]]:
    """The realism difference (linear) and the odds of Realistic (logistic), readers and exams as random
    effects, from a live study's initial reads: a fit per group and model (the slower logistic ones
    first), and the function that makes the two tables of their rows."""
    if reads is None:
        row = {"level": "overall", "group": "all", "note": NO_READERS_IN_A_RELEASE}
        return [], lambda rows: (
            pd.DataFrame([row], columns=MIXED_COLUMNS),
            pd.DataFrame([row], columns=LOGISTIC_COLUMNS),
        )
    reads = _model_reads(reads)
    groups = [(level, group, part) for level, group, part in _groups(reads) if level != "dataset"]
    jobs = [partial(_logistic_row, *group) for group in groups] + [partial(_mixed_row, *group) for group in groups]

    def tables(rows: list[dict]) -> tuple[pd.DataFrame, pd.DataFrame]:
        logistic, linear = rows[: len(groups)], rows[len(groups) :]
        return pd.DataFrame(linear, columns=MIXED_COLUMNS), pd.DataFrame(logistic, columns=LOGISTIC_COLUMNS)

    return jobs, tables


def _model_reads(reads: pd.DataFrame) -> pd.DataFrame:
    """The initial reads with what the mixed models take: exam, reader x variation and the outcomes' codes.
    Each random term's levels are numbered once here, in the order of their names (as the models' own
    numbering, np.unique, orders them: the same fits to the bit), so that a model numbers integers,
    not strings: at 100,000 pairs sorting the names took 5 of the 7 s the linear models took. Only the
    columns the fits and their groups read are kept: the fits hold their groups' rows until they run."""
    exam = reads["dataset"] + "\x1f" + reads["study_id"]
    reader_variation = reads["reader"] + "\x1f" + reads["reref_variation"]
    return reads[["dataset", "dimension", "reref_variation", "score"]].assign(
        alternative=(reads["report_type"] == "alternative").astype(float),
        realistic=(reads["score"] == 0).astype(float),
        **{
            f"{column}_level": pd.factorize(values, sort=True)[0]
            for column, values in (("reader", reads["reader"]), ("exam", exam), ("reader_variation", reader_variation))
        },
    )


def _model_terms(level: str, group: str, part: pd.DataFrame) -> tuple[dict, dict[str, np.ndarray], list[str]]:
    """A mixed-model row's counts, its random terms (reader x variation where estimable) and its first notes."""
    terms = {"reader": part["reader_level"].to_numpy(), "exam": part["exam_level"].to_numpy()}
    row = {"level": level, "group": group, "n_reads": len(part), "n_readers": len(np.unique(terms["reader"]))}
    row["n_exams"] = len(np.unique(terms["exam"]))
    notes = []
    if level != "variation":
        if row["n_readers"] < len(np.unique(part["reader_variation_level"].to_numpy())) < len(part):
            terms["reader x variation"] = part["reader_variation_level"].to_numpy()
        else:
            notes.append("reader x variation not estimable: no reader read two variations")
    return row, terms, notes


def _mixed_row(level: str, group: str, part: pd.DataFrame) -> dict:
    row, terms, notes = _model_terms(level, group, part)
    n_exams = row["n_exams"]
    X = np.column_stack([np.ones(len(part)), part["alternative"].to_numpy()])
    fit = mixed.fit_lmm(part["score"].to_numpy(), X, ["(Intercept)", "alternative"], terms) if len(part) else None
    if fit is None or isinstance(fit, stats.NotComputable):
        notes.insert(0, fit.reason if fit is not None else "no reads")
        return row | {"method": "", "note": "; ".join(notes)}
    estimate, se, df, low, high, p = fit.t_test("alternative")
    row |= {"estimate": estimate, "se": se, "df": df, "ci_low": low, "ci_high": high, "p_value": p}
    if not np.isfinite(df) or df <= 0:
        row |= {"df": None, "ci_low": None, "ci_high": None, "p_value": None}
        notes.insert(0, "Satterthwaite's degrees of freedom not computable (the variance parameters' Hessian is "
                        "singular at this fit): no t interval or p-value")  # fmt: skip
    elif n_exams < MIN_EXAMS:
        row |= {"ci_low": None, "ci_high": None, "p_value": None}
        notes.insert(0, f"too few exams for a useful interval (n = {n_exams}; fewer than {MIN_EXAMS})")
    row |= {
        "var_reader": fit.variances["reader"],
        "var_exam": fit.variances["exam"],
        "var_reader_variation": fit.variances.get("reader x variation"),
        "var_residual": fit.variances["residual"],
        "method": "linear mixed model, REML: score ~ alternative + (1 | reader) + (1 | exam)"
        + (" + (1 | reader:variation)" if "reader x variation" in terms else "")
        + "; t test on Satterthwaite's df",
        "note": "; ".join(notes),
    }
    return row


LOGISTIC_COLUMNS = [
    "level", "group", "n_reads", "n_readers", "n_exams", "log_odds_ratio", "se", "ci_low", "ci_high", "odds_ratio",
    "odds_ratio_low", "odds_ratio_high", "p_value", "var_reader", "var_exam", "var_reader_variation", "method", "note",
]  # fmt: skip


def _logistic_row(level: str, group: str, part: pd.DataFrame) -> dict:
    row, terms, notes = _model_terms(level, group, part)
    n_exams = row["n_exams"]
    if len(part) > MAX_LOGISTIC_READS:
        notes.insert(
            0,
            f"not fitted: {len(part)} reads, more than the {MAX_LOGISTIC_READS} a Laplace fit is run on in the "
            "worker (seconds per few thousand reads); the linear mixed model above covers this group",
        )
        return row | {"method": "", "note": "; ".join(notes)}
    X = np.column_stack([np.ones(len(part)), part["alternative"].to_numpy()])
    fit = (
        mixed.fit_glmm(
            part["realistic"].to_numpy(), X, ["(Intercept)", "alternative"], terms, max_variance=MAX_LOGIT_VARIANCE
        )
        if len(part)
        else None
    )
    if fit is None or isinstance(fit, stats.NotComputable):
        notes.insert(0, fit.reason if fit is not None else "no reads")
        return row | {"method": "", "note": "; ".join(notes)}
    row |= {
        "var_reader": fit.variances["reader"],
        "var_exam": fit.variances["exam"],
        "var_reader_variation": fit.variances.get("reader x variation"),
        "method": "logistic mixed model, Laplace: realistic ~ alternative + (1 | reader) + (1 | exam)"
        + (" + (1 | reader:variation)" if "reader x variation" in terms else "")
        + "; Wald z test",
    }
    estimate, se, low, high, p = fit.wald("alternative")
    row |= {"log_odds_ratio": estimate, "se": se, "odds_ratio": float(np.exp(estimate))}
    if n_exams < MIN_EXAMS:
        notes.insert(0, f"too few exams for a useful interval (n = {n_exams}; fewer than {MIN_EXAMS})")
    else:
        row |= {"ci_low": low, "ci_high": high, "p_value": p}
        row |= {"odds_ratio_low": float(np.exp(low)), "odds_ratio_high": float(np.exp(high))}
    row["note"] = "; ".join(notes)
    return row


REALISTIC_DIFFERENCE_COLUMNS = [
    "level", "group", "n_pairs", "n_exams", "both_realistic", "original_only", "alternative_only", "neither",
    "difference", "ci_low", "ci_high", "ci_adjusted_low", "ci_adjusted_high", "adjusted_confidence", "p_value",
    "p_holm", "method", "verdict", "note",
]  # fmt: skip


def _realistic_difference(pairs: pd.DataFrame, margin: float | None) -> pd.DataFrame:
    """Alternative minus original in the share rated Realistic, paired, with the margin's verdict."""
    rows, tests = [], []
    for level, group, part in _groups(pairs):
        original, alternative = part["score_original"] == 0, part["score_alternative"] == 0
        table = paired.PairedTable(
            both=int((original & alternative).sum()),
            first_only=int((alternative & ~original).sum()),
            second_only=int((original & ~alternative).sum()),
            neither=int((~original & ~alternative).sum()),
        )
        row = {"level": level, "group": group, "n_pairs": len(part), "n_exams": part["exam"].nunique()}
        row |= {
            "both_realistic": table.both,
            "original_only": table.second_only,
            "alternative_only": table.first_only,
            "neither": table.neither,
        }
        test = None
        if level == "variation":
            # One pair per exam: the paired 2x2 table's own methods.
            row["difference"] = (table.first_only - table.second_only) / table.n
            notes = []
            if table.n < MIN_EXAMS:
                interval = stats.NotComputable(
                    f"too few exams for a useful interval (n = {table.n}; fewer than {MIN_EXAMS})"
                )
            else:
                interval = paired.newcombe_paired(table)
            columns, why = _interval_columns(interval)
            row |= columns
            if why:
                notes.append(f"interval: {why}")
            p = paired.mcnemar_exact(table)
            if isinstance(p, stats.NotComputable):
                row["p_value"] = None
                notes.append(f"test: {p.reason}")
            else:
                row["p_value"] = p
            row["method"] = "Newcombe method 10; exact McNemar"
            row["note"] = "; ".join(notes)
        else:
            flipped, test = _sign_flip_row(level, group, part, "realistic_difference")
            row["difference"] = flipped["estimate"]
            row |= {key: flipped[key] for key in ("ci_low", "ci_high", "p_value", "method", "note")}
        rows.append(row)
        tests.append(test)
    table = pd.DataFrame(rows, columns=[c for c in REALISTIC_DIFFERENCE_COLUMNS if c not in _ADDED])
    table = _holm_variations(table)
    table["verdict"] = [
        _non_inferiority(low, high, margin) for low, high in zip(table["ci_low"], table["ci_high"], strict=True)
    ]
    # Newcombe's interval has no Bonferroni form of its own: the adjusted level is applied to it directly.
    level = _adjusted_confidence(table)
    adjusted = [
        paired.newcombe_paired(
            paired.PairedTable(r.both_realistic, r.alternative_only, r.original_only, r.neither), level
        )
        if r.level == "variation" and r.p_value is not None and r.n_pairs >= MIN_EXAMS
        else None
        for r in table.itertuples()
    ]
    table["ci_adjusted_low"] = [None if a is None else a.low for a in adjusted]
    table["ci_adjusted_high"] = [None if a is None else a.high for a in adjusted]
    table["adjusted_confidence"] = level
    return table[REALISTIC_DIFFERENCE_COLUMNS]


_ADDED = ("ci_adjusted_low", "ci_adjusted_high", "adjusted_confidence", "p_holm", "verdict")


def _non_inferiority(low, high, margin: float | None) -> str:
    if margin is None:
        return ""
    if low is None or pd.isna(low):
        return "not computable"
    if low > -margin:
        return "non-inferior"
    if high < -margin:
        return "inferior"
    return "not shown"


# Task 2 -------------------------------------------------------------------------------------------


def _task2_proportions(consensus: pd.DataFrame, margin: float | None) -> pd.DataFrame:
    rows = []
    for level, group, part in _groups(consensus):
        n = len(part)
        no_major = int((part["score"] < 2).sum())
        equivalent = int((part["score"] == 0).sum())
        measured = _proportion_row({"level": level, "group": group, "measure": "no_major_discrepancy"}, no_major, n)
        measured["verdict"] = _equivalence(measured["ci_low"], margin)
        rows.append(measured)
        rows.append(_proportion_row({"level": level, "group": group, "measure": "equivalent"}, equivalent, n))
    columns = ["level", "group", "measure", "k", "n", "proportion", "ci_low", "ci_high", "verdict", "note"]
    return pd.DataFrame(rows, columns=columns)


def _equivalence(low, margin: float | None) -> str:
    """Equivalent when the share with no Major Discrepancy is, with 95% confidence, above 1 - margin."""
    if margin is None:
        return ""
    if low is None:
        return "not computable"
    return "equivalent" if low > 1 - margin else "not shown"


ORDER_COLUMNS = [
    "level", "group", "reads", "a_original", "a_original_equivalent", "a_alternative", "a_alternative_equivalent",
    "difference", "p_value", "note",
]  # fmt: skip


def _order_effect(full: pd.DataFrame) -> pd.DataFrame:
    """Task 2 reads by which report was Report A: share Equivalent each way, Fisher's exact test."""
    rows = []
    for level, group, part in _groups(full):
        first = part["report_a_type"] == "original"
        second = part["report_a_type"] == "alternative"
        equivalent = part["score"] == 0
        a, b = int((first & equivalent).sum()), int((first & ~equivalent).sum())
        c, d = int((second & equivalent).sum()), int((second & ~equivalent).sum())
        row = {"level": level, "group": group, "reads": len(part), "a_original": a + b, "a_original_equivalent": a}
        row |= {"a_alternative": c + d, "a_alternative_equivalent": c}
        if a + b and c + d:
            row["difference"] = a / (a + b) - c / (c + d)
            row["p_value"] = float(scipy_stats.fisher_exact([[a, b], [c, d]]).pvalue)
            row["note"] = ""
        else:
            row |= {"difference": None, "p_value": None, "note": "every read showed the same report as Report A"}
        rows.append(row)
    return pd.DataFrame(rows, columns=ORDER_COLUMNS)


# Agreement ----------------------------------------------------------------------------------------


def _count_matrix(frame: pd.DataFrame) -> tuple[np.ndarray, pd.DataFrame]:
    """Units x 3 matrix of read counts per score (units in order of first row), and each unit's
    variation and dimension."""
    if frame.empty:
        return np.zeros((0, 3)), pd.DataFrame({"reref_variation": [], "dimension": []}, dtype=object)
    units, _ = pd.factorize(frame["unit"].to_numpy())
    matrix = np.zeros((units.max() + 1, 3))
    np.add.at(matrix, (units, frame["score"].to_numpy().astype(int)), 1)
    _, first = np.unique(units, return_index=True)
    return matrix, frame[["reref_variation", "dimension"]].iloc[first].reset_index(drop=True)


def _unit_groups(units: pd.DataFrame) -> list[tuple[str, str, np.ndarray]]:
    """overall, each dimension, each variation: a mask over the units."""
    groups = [("overall", "all", np.ones(len(units), dtype=bool))]
    for level, column in (("dimension", "dimension"), ("variation", "reref_variation")):
        codes, values = pd.factorize(units[column])
        order = sorted(range(len(values)), key=lambda index: values[index])
        groups += [(level, str(values[index]), codes == index) for index in order if values[index] != ""]
    return groups


def _too_few(columns: dict, n: int) -> dict:
    """Below MIN_AGREEMENT_EXAMPLES an agreement row keeps its value but shows no interval."""
    if n >= MIN_AGREEMENT_EXAMPLES or columns["value"] is None:
        return columns
    reason = f"too few examples for a useful interval (n = {n}; fewer than {MIN_AGREEMENT_EXAMPLES})"
    return columns | {"ci_low": None, "ci_high": None, "note": reason}


def _agreement_row(task: str, source: str, level: str, group: str, measure: str, n: int, columns: dict) -> dict:
    return (
        {"task": task, "source": source, "level": level, "group": group, "measure": measure, "n_examples": n}
        | {
            "range_low": None,
            "range_high": None,
        }
        | _too_few(columns, n)
    )


def _agreement_rows(task: str, source: str, measures: dict, frame: pd.DataFrame, note: str = ""):
    matrix, units = _count_matrix(frame)
    rows = []
    for level, group, mask in _unit_groups(units):
        part = matrix[mask]
        for measure, function in measures.items():
            columns = _estimate_columns(function(part))
            if note and not columns["note"]:
                columns["note"] = note
            rows.append(_agreement_row(task, source, level, group, measure, len(part), columns))
    return rows


AGREEMENT_COLUMNS = [
    "task", "source", "level", "group", "measure", "n_examples", "value", "ci_low", "ci_high", "range_low",
    "range_high", "note",
]  # fmt: skip
_LEVEL_ORDER = {"overall": 0, "dataset": 1, "dimension": 2, "variation": 3}


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
    rows = _agreement_rows(task, "initial_reads", measures, reads)
    return pd.DataFrame(rows, columns=AGREEMENT_COLUMNS)


# The ways the first two reads of a three-way split can have been (one read of each two scores).
_SPLIT_OPTIONS = np.array([[1, 1, 0], [1, 0, 1], [0, 1, 1]], dtype=float)


def _first_two_reads(matrix: np.ndarray, task: str) -> tuple[np.ndarray, np.ndarray]:
    """The release's reads reduced to the first two of each example: the known rows and which are splits.

    Two reads: both. Three with a majority: the two scores that differ (the third read was asked
    because the first two differed). Three all different: not known (a split; its row is left as is).
    """
    reads = matrix.sum(axis=1)
    if (reads > 3).any() or (reads < 2).any():
        raise AnalysisInputError(
            f"{task}_full.csv: an example has {int(reads[(reads > 3) | (reads < 2)][0])} "
            "annotations; the protocol gives every example with a consensus two or three."
        )
    three = reads == 3
    if (three & (matrix.max(axis=1) == 3)).any():
        raise AnalysisInputError(
            f"{task}_full.csv: an example has three annotations that all agree; a third read "
            "is asked only after the first two disagree."
        )
    first_two = np.where(three[:, None], (matrix > 0).astype(float), matrix)
    split = three & (matrix.max(axis=1) == 1)
    return first_two, split


def _first_two_read_rows(full: pd.DataFrame, task: str) -> list[dict]:
    matrix, units = _count_matrix(full)
    first_two, split = _first_two_reads(matrix, task)
    rows = []
    for level, group, mask in _unit_groups(units):
        known, splits = first_two[mask & ~split], int((mask & split).sum())
        for metric in ("nominal", "ordinal"):
            measure = f"krippendorff_alpha_{metric}_first_two_reads"
            n = int(mask.sum())
            if splits == 0:
                columns = _estimate_columns(stats.krippendorff_alpha(known, metric))
                row = _agreement_row(task, "release", level, group, measure, n, columns)
                if columns["value"] is not None:
                    row |= {"range_low": columns["value"], "range_high": columns["value"]}
                rows.append(row)
                continue
            if n < 2:
                columns = _estimate_columns(stats.NotComputable("fewer than 2 examples with two or more reads"))
                rows.append(_agreement_row(task, "release", level, group, measure, n, columns))
                continue
            ways = stats.compositions_count(splits, len(_SPLIT_OPTIONS))
            note = (
                f"which two of the three reads of {splits} three-way split{'s' if splits != 1 else ''} came first is "
                f"not in the release: the range of alpha over the {ways} ways they can have been"
            )
            if ways > stats.MAX_COMPOSITIONS:
                span = None
                note = (
                    f"not computable: which two of the three reads of {splits} three-way splits came first is not in "
                    f"the release, and the {ways} ways they can have been are more than the {stats.MAX_COMPOSITIONS} "
                    "searched; the share with two annotations above is exact"
                )
            else:
                span = stats.krippendorff_alpha_range(known, _SPLIT_OPTIONS, splits, metric)
            if span is None and ways <= stats.MAX_COMPOSITIONS:
                note = "every way of resolving the splits gives the same rating everywhere: alpha is undefined"
            row = _agreement_row(
                task,
                "release",
                level,
                group,
                measure,
                n,
                {"value": None, "ci_low": None, "ci_high": None, "note": note},
            )
            if span is not None:
                row |= {"range_low": span[0], "range_high": span[1]}
            rows.append(row)
    return rows


def _release_agreement(consensus: pd.DataFrame, full: pd.DataFrame, task: str) -> pd.DataFrame:
    rows = []
    for level, group, part in _groups(consensus):
        if level == "dataset":
            continue
        two = int((part["n_annotations"] == "2").sum())
        columns = _estimate_columns(stats.wilson(two, len(part)))
        rows.append(_agreement_row(task, "release", level, group, "two_reads_agreed", len(part), columns))
    rows += _first_two_read_rows(full, task)
    measures = {
        "krippendorff_alpha_nominal_all_reads": lambda m: stats.krippendorff_alpha(m, "nominal"),
        "krippendorff_alpha_ordinal_all_reads": lambda m: stats.krippendorff_alpha(m, "ordinal"),
    }
    rows += _agreement_rows(task, "release", measures, full, note=THIRD_READ_NOTE)
    table = pd.DataFrame(rows, columns=AGREEMENT_COLUMNS)
    order = table["level"].map(_LEVEL_ORDER)
    return table.assign(_order=order).sort_values(["_order", "group"], kind="stable").drop(columns="_order")


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
    adjudicated = consensus.loc[consensus["label_source"] == "adjudicated", [*key, "dimension", "score"]]
    reads = full[[*key, "score"]].merge(adjudicated.drop(columns="dimension"), on=key, suffixes=("", "_adjudicated"))
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
