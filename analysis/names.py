"""What the Results pages name without computing anything: the results' tables and figures and their
titles, the metrics' directions and the versions that stamp computed results.

A web request imports this, never the modules that compute (pandas, scipy, statsmodels,
matplotlib and the metric packages load on first use, in the worker or a command:
tests/config/test_startup.py). The computing modules take their names from here. Like them, it
knows nothing of Django (the metric workers import it in processes without Django).
"""

import re

# The results document's format (results.json, the API).
SCHEMA = "readingroom-results/1"

TABLE_TITLES = {
    "task1_ratings": "Task 1, realism: consensus ratings",
    "task1_realistic": "Task 1, realism: proportion rated Realistic (Wilson 95% CI)",
    "task1_degradation": "Task 1, realism: alternative minus original consensus score, per pair",
    "task1_realistic_difference": "Task 1, realism: alternative minus original in the share rated Realistic, paired",
    "task1_mixed_model": "Task 1, realism: alternative minus original per read, readers and exams as random effects",
    "task1_realistic_mixed_model": (
        "Task 1, realism: odds of a read being Realistic, alternative against original, readers and exams as "
        "random effects"
    ),
    "task2_ratings": "Task 2, equivalence: consensus ratings",
    "task2_proportions": "Task 2, equivalence: no Major Discrepancy, and Equivalent (Wilson 95% CI)",
    "task2_order": "Task 2, equivalence: rated Equivalent by which report was shown as Report A",
    "agreement": "Agreement",
    "disagreement": "Disagreement structure: how each consensus was reached",
    "adjudication": "Adjudicated examples: the adjudicator's rating and its distance from the three reads",
    "judge_confusion": "Automated judges: consensus rating x judge rating",
    "judge_agreement": "Automated judges: exact agreement with the consensus and quadratic-weighted kappa",
    "judge_vs_readers": "Automated judges: agreement with a single radiologist vs between two radiologists",
}

JUDGE_FIGURES = ("judges_confusion", "judges_vs_readers")
JUDGE_TITLES = {
    "judges_confusion": "Automated judges: judge rating against the consensus",
    "judges_vs_readers": "Automated judges: agreement with a single radiologist vs between two radiologists",
}
FIGURE_FORMATS = ("svg", "png", "pdf")  # each figure is saved in every one (analysis.figure_layout.draw)
FIGURES = ("task1_ratings", "task2_ratings", "task1_forest", "task1_realistic_forest", "agreement")
# Each figure's one-sentence caption, written beside it (the page, results.md): the figure itself
# carries no title, as a journal sets its own.
CAPTIONS = {
    "task1_ratings": (
        "Share of each consensus rating per variation, grouped by the taxonomy's dimensions: the original report "
        "and its rewrite were rated one at a time, blinded to which was which (n: examples with a consensus)."
    ),
    "task2_ratings": (
        "Share of each consensus rating of clinical equivalence per variation, grouped by the taxonomy's "
        "dimensions (n: pairs with a consensus)."
    ),
    "task1_forest": (
        "Mean difference in consensus score (0 Realistic, 1 Minor Issues, 2 Major Issues), rewrite minus "
        "original, with the exact 95% interval of the sign-flip test over exams; right of 0 the rewrite was "
        "rated less realistic, and p-values are Holm-adjusted across variations."
    ),
    "task1_realistic_forest": (
        "Difference in the share rated Realistic, rewrite minus original, with 95% intervals (Newcombe's "
        "method 10 per variation, the exact sign-flip test over exams overall); left of 0 the rewrite was "
        "rated Realistic less often, and where a non-inferiority margin is set a rewrite is non-inferior when "
        "its interval lies right of it."
    ),
    "agreement": (
        "Agreement between radiologists per variation, one measure per panel, with 95% intervals (none below "
        "10 examples); an interval past the axis ends in an arrow with its value."
    ),
    "judges_confusion": "Each automated judge's rating against the radiologists' consensus, counts of examples.",
    "judges_vs_readers": (
        "Share of agreeing pairs of ratings, a judge against a single radiologist and one radiologist against "
        "another, with 95% bootstrap intervals."
    ),
}
TITLES = {
    "task1_ratings": "Task 1, realism: consensus ratings per variation",
    "task2_ratings": "Task 2, equivalence: consensus ratings per variation",
    "task1_forest": "Task 1, realism: alternative minus original, per variation",
    "task1_realistic_forest": "Task 1, realism: difference in the share rated Realistic, per variation",
    "agreement": "Agreement per variation",
    **JUDGE_TITLES,
}

# How the tables' rows are grouped: `level` says which of these a row's `group` is.
LEVELS = {"overall": "Overall", "dataset": "Dataset", "dimension": "Dimension", "variation": "Variation"}
OTHER_DIMENSION = "Other"


def variation_labels(document: dict) -> dict[str, dict]:
    """The results' variations by key: {"label", "dimension"} from the taxonomy (results.json's `variations`)."""
    return {entry["key"]: entry for entry in document.get("variations", ())}


def group_label(level: str, group: str, variations: dict[str, dict]) -> str:
    """What a table row's group is called in a page, a figure or a text: a variation by its taxonomy
    label ("Negation: implicit"), the overall row as "All"; a dataset and a dimension by their names.
    Keys stay in the CSV files, where they join."""
    if level == "overall":
        return "All"
    if level == "variation":
        return variations.get(group, {}).get("label") or group
    return group or OTHER_DIMENSION


# Metric sensitivity: which text is the reference.
FORWARD, REVERSE, IMPORTED = "forward", "reverse", "imported"
DIRECTIONS = {
    FORWARD: "original as reference, alternative as candidate",
    REVERSE: "alternative as reference, original as candidate",
    IMPORTED: "as computed by the user and imported",
}
# The built-in metrics (analysis.metrics) and their score columns: an imported metric takes none of their names.
BUILTIN_METRICS = ("bleu2", "rougeL", "chrf")
BUILTIN_COLUMNS = ("bleu2", "bleu2_reverse", "rougeL", "chrf", "chrf_reverse")
# Bump when a metric's definition changes: cached scores of another version are not reused.
METRICS_ALGORITHM_VERSION = 1


def metric_caption(entry: dict) -> str:
    """A metric sensitivity figure's one-sentence caption (entry: its metric's title and perfect score)."""
    perfect = "" if entry.get("perfect") is None else f"; the dashed line is a perfect score ({entry['perfect']:g})"
    return (
        f"{entry['title']} of each Task 2 pair, clinically equivalent (Equivalent or Minor Discrepancy) against "
        f"Major Discrepancy, per variation: box and whiskers (quartiles, 1.5 IQR) with the pairs as points{perfect}."
    )


def figure_name(metric: str, direction: str) -> str:
    """A metric sensitivity figure's name."""
    return f"metric_{metric}_reverse" if direction == REVERSE else f"metric_{metric}"


def valid_metric_name(name: str) -> bool:
    """An imported metric's name: letters, digits, '_', '-', '.', at most 64, not a built-in's."""
    return bool(re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9_.\-]{0,63}", name)) and name not in {
        *BUILTIN_METRICS,
        *BUILTIN_COLUMNS,
    }


def metrics_version() -> str:
    """Names the metrics' definitions: the algorithm and the reference packages' versions."""
    from importlib.metadata import version  # here: start-up does not read the installed packages

    packages = ",".join(f"{name}={version(name)}" for name in ("nltk", "rouge-score", "sacrebleu"))
    return f"{METRICS_ALGORITHM_VERSION};{packages}"
