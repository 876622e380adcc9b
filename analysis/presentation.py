"""The results document (analysis.results) laid out for the Results page: sections of readable tables.

Nothing is computed here: every number is the document's, only formatted (an estimate with its
95% interval in one cell, a count with its percentage, "n/a" with the reason where a number is
not defined). The downloadable CSVs keep the tidy tables as they are.
"""

from analysis.names import LEVELS, TABLE_TITLES, group_label, variation_labels

MEASURES = {
    "two_reads_agreed": "First two reads agreed (share with two annotations)",
    "krippendorff_alpha_nominal_first_two_reads": "Krippendorff's alpha, nominal, first two reads",
    "krippendorff_alpha_ordinal_first_two_reads": "Krippendorff's alpha, ordinal, first two reads",
    "krippendorff_alpha_nominal_all_reads": "Krippendorff's alpha, nominal, all reads (biased by design)",
    "krippendorff_alpha_ordinal_all_reads": "Krippendorff's alpha, ordinal, all reads (biased by design)",
    "percent_agreement": "Percent agreement",
    "fleiss_kappa": "Fleiss' kappa",
    "krippendorff_alpha_nominal": "Krippendorff's alpha, nominal",
    "krippendorff_alpha_ordinal": "Krippendorff's alpha, ordinal",
    "gwet_ac1": "Gwet's AC1",
    "gwet_ac2_ordinal": "Gwet's AC2, ordinal weights",
    "no_major_discrepancy": "No Major Discrepancy",
    "equivalent": "Equivalent",
}
SOURCES = {"initial_reads": "Two initial reads", "release": "Release files"}
TASK_NAMES = {"task1": "Task 1", "task2": "Task 2"}
DEGRADATION_COLUMNS = [
    "Level", "Group", "Pairs (exams)", "Worse", "Same", "Better", "Mean difference [95% CI]",
    "[Bonferroni-adjusted CI]", "p", "p (Holm)", "Method", "Note",
]  # fmt: skip
REALISTIC_DIFFERENCE_COLUMNS = [
    "Level", "Group", "Pairs (exams)", "Both Realistic", "Original only", "Alternative only", "Neither",
    "Difference [95% CI]", "[Bonferroni-adjusted CI]", "p", "p (Holm)", "Method", "Non-inferiority", "Note",
]  # fmt: skip
MIXED_COLUMNS = [
    "Level", "Group", "Reads (readers, exams)", "Difference [95% CI]", "SE", "df", "p", "Reader variance",
    "Exam variance", "Reader x variation variance", "Residual variance", "Method", "Note",
]  # fmt: skip
LOGISTIC_COLUMNS = [
    "Level", "Group", "Reads (readers, exams)", "Odds ratio [95% CI]", "Log odds ratio (SE)", "p",
    "Reader variance", "Exam variance", "Reader x variation variance", "Method", "Note",
]  # fmt: skip
ORDER_COLUMNS = [
    "Level", "Group", "Reads", "Report A original: Equivalent", "Report A alternative: Equivalent", "Difference",
    "p (Fisher's exact)", "Note",
]  # fmt: skip
DISAGREEMENT_COLUMNS = [
    "Task", "Level", "Group", "Examples", "Two reads agreed", "A third read settled it", "Adjudicated", "Note",
]  # fmt: skip
ADJUDICATION_COLUMNS = [
    "Task", "Level", "Group", "Adjudicated", "Rated Realistic / Equivalent", "Rated Minor", "Rated Major",
    "Mean distance to the three reads (0-2 scale)", "Matched one of the reads", "Note",
]  # fmt: skip


def number(value, digits: int = 3) -> str:
    return "n/a" if value is None else f"{value:.{digits}f}"


def duration(seconds: float) -> str:
    """A reading time in the unit that shows the differences: tenths of a second below a minute
    ("0.4 s", "37.2 s"), minutes and seconds above ("2 min 05 s")."""
    if seconds < 59.95:
        return f"{seconds:.1f} s"
    minutes, rest = divmod(round(seconds), 60)
    return f"{minutes} min {rest:02d} s"


def p_value(value) -> str:
    if value is None:
        return "n/a"
    return "< 0.001" if value < 0.001 else f"{value:.3f}"


def estimate(row: dict, value: str = "value") -> str:
    """The value with its interval; "no interval" where the row gives none, "zero width" where it has none."""
    if row.get(value) is None:
        return "n/a"
    if row.get("ci_low") is None:
        return f"{row[value]:.3f} (no interval)"
    if row["ci_low"] == row["ci_high"]:
        return f"{row[value]:.3f} [{row['ci_low']:.3f}, {row['ci_high']:.3f}] (zero width)"
    return f"{row[value]:.3f} [{number(row['ci_low'])}, {number(row['ci_high'])}]"


def adjusted(row: dict) -> str:
    if row["level"] != "variation":
        return ""
    if row.get("ci_adjusted_low") is None:
        return "n/a"
    return f"[{row['ci_adjusted_low']:.3f}, {row['ci_adjusted_high']:.3f}] ({100 * row['adjusted_confidence']:.2f}%)"


def agreement_value(row: dict) -> str:
    """An agreement estimate, or the range the release leaves open (three-way splits)."""
    if row.get("value") is None and row.get("range_low") is not None:
        return f"{row['range_low']:.3f} to {row['range_high']:.3f} (range)"
    return estimate(row)


def pairs(row: dict) -> str:
    return f"{row['n_pairs']} ({row['n_exams']})"


def _group(row: dict, variations: dict[str, dict]) -> list[str]:
    return [LEVELS.get(row["level"], row["level"]), group_label(row["level"], row["group"], variations)]


def _table(caption: str, columns: list[str], rows: list[list[str]], *, name: str = "") -> dict:
    return {"caption": caption, "columns": columns, "rows": rows, "name": name}


def _ratings(rows: list[dict], labels: list[str], name: str, variations: dict, *, by_report_type: bool) -> dict:
    """The tidy counts (one row per rating) pivoted: one row per group, a column per rating."""
    pivot: dict[tuple, dict] = {}
    for row in rows:
        key = (row["level"], row["group"], row.get("report_type", ""))
        entry = pivot.setdefault(key, {"row": row, "cells": {}})
        percent = "" if row["percent"] is None else f" ({row['percent']:.1f}%)"
        entry["cells"][row["rating"]] = f"{row['n']}{percent}"
    columns = ["Level", "Group", *(["Report"] if by_report_type else []), *labels, "Examples"]
    body = []
    for (_, _, report_type), entry in pivot.items():
        cells = _group(entry["row"], variations) + ([report_type] if by_report_type else [])
        body.append([*cells, *(entry["cells"].get(label, "0") for label in labels), str(entry["row"]["total"])])
    return _table(TABLE_TITLES[name], columns, body, name=name)


def _task1(document: dict, figures: dict) -> dict:
    tables = document["tables"]
    variations = variation_labels(document)
    labels = document["scale"]["task1"]
    realistic = [
        [*_group(r, variations), r["report_type"], f"{r['k']} / {r['n']}", estimate(r, "proportion"), r["note"]]
        for r in tables["task1_realistic"]
    ]
    degradation = [
        [
            *_group(r, variations),
            pairs(r),
            str(r["worse"]),
            str(r["same"]),
            str(r["better"]),
            estimate(r, "mean_difference"),
            adjusted(r),
            p_value(r["p_value"]),
            p_value(r["p_holm"]) if r["level"] == "variation" else "",
            r["method"],
            r["note"],
        ]
        for r in tables["task1_degradation"]
    ]
    difference = [
        [
            *_group(r, variations),
            pairs(r),
            str(r["both_realistic"]),
            str(r["original_only"]),
            str(r["alternative_only"]),
            str(r["neither"]),
            estimate(r, "difference"),
            adjusted(r),
            p_value(r["p_value"]),
            p_value(r["p_holm"]) if r["level"] == "variation" else "",
            r["method"],
            r["verdict"] or "no margin set",
            r["note"],
        ]
        for r in tables["task1_realistic_difference"]
    ]
    mixed_model = [
        [
            *_group(r, variations),
            "" if r["n_reads"] is None else f"{r['n_reads']} ({r['n_readers']}, {r['n_exams']})",
            estimate(r, "estimate"),
            number(r["se"]),
            number(r["df"], 1),
            p_value(r["p_value"]),
            *(number(r[name], 4) for name in ("var_reader", "var_exam", "var_reader_variation", "var_residual")),
            r["method"] or "",
            r["note"],
        ]
        for r in tables["task1_mixed_model"]
    ]
    logistic = [
        [
            *_group(r, variations),
            "" if r["n_reads"] is None else f"{r['n_reads']} ({r['n_readers']}, {r['n_exams']})",
            "n/a" if r["odds_ratio"] is None else (
                f"{r['odds_ratio']:.3f} (no interval)" if r["odds_ratio_low"] is None
                else f"{r['odds_ratio']:.3f} [{r['odds_ratio_low']:.3f}, {r['odds_ratio_high']:.3f}]"
            ),
            "n/a" if r["log_odds_ratio"] is None else f"{r['log_odds_ratio']:.3f} ({r['se']:.3f})",
            p_value(r["p_value"]),
            *(number(r[name], 4) for name in ("var_reader", "var_exam", "var_reader_variation")),
            r["method"] or "",
            r["note"],
        ]
        for r in tables["task1_realistic_mixed_model"]
    ]  # fmt: skip
    return {
        "id": "task1",
        "title": "Task 1: realism",
        "figures": [figures["task1_ratings"], figures["task1_forest"], figures["task1_realistic_forest"]],
        "tables": [
            _ratings(tables["task1_ratings"], labels, "task1_ratings", variations, by_report_type=True),
            _table(
                TABLE_TITLES["task1_realistic"],
                ["Level", "Group", "Report", "Realistic", "Proportion [95% CI]", "Note"],
                realistic,
                name="task1_realistic",
            ),
            _table(
                TABLE_TITLES["task1_degradation"]
                + " (worse: the alternative's rating is further from Realistic; exact sign-flip test over exams)",
                DEGRADATION_COLUMNS,
                degradation,
                name="task1_degradation",
            ),
            _table(
                TABLE_TITLES["task1_realistic_difference"] + _margin(document, "task1_realistic"),
                REALISTIC_DIFFERENCE_COLUMNS,
                difference,
                name="task1_realistic_difference",
            ),
            _table(TABLE_TITLES["task1_mixed_model"], MIXED_COLUMNS, mixed_model, name="task1_mixed_model"),
            _table(
                TABLE_TITLES["task1_realistic_mixed_model"],
                LOGISTIC_COLUMNS,
                logistic,
                name="task1_realistic_mixed_model",
            ),
        ],
    }


def _task2(document: dict, figures: dict) -> dict:
    tables = document["tables"]
    variations = variation_labels(document)
    proportions = [
        [
            *_group(r, variations),
            MEASURES[r["measure"]],
            f"{r['k']} / {r['n']}",
            estimate(r, "proportion"),
            r["verdict"] or ("no margin set" if r["measure"] == "no_major_discrepancy" else ""),
            r["note"],
        ]
        for r in tables["task2_proportions"]
    ]
    order = [
        [
            *_group(r, variations),
            str(r["reads"]),
            f"{r['a_original_equivalent']} / {r['a_original']}",
            f"{r['a_alternative_equivalent']} / {r['a_alternative']}",
            number(r["difference"]),
            p_value(r["p_value"]),
            r["note"],
        ]
        for r in tables["task2_order"]
    ]
    return {
        "id": "task2",
        "title": "Task 2: clinical equivalence",
        "figures": [figures["task2_ratings"]],
        "tables": [
            _ratings(
                tables["task2_ratings"], document["scale"]["task2"], "task2_ratings", variations, by_report_type=False
            ),
            _table(
                TABLE_TITLES["task2_proportions"] + _margin(document, "task2_major"),
                ["Level", "Group", "Measure", "Examples", "Proportion [95% CI]", "Equivalence", "Note"],
                proportions,
                name="task2_proportions",
            ),
            _table(TABLE_TITLES["task2_order"], ORDER_COLUMNS, order, name="task2_order"),
        ],
    }


def _agreement(document: dict, figures: dict) -> dict:
    tables = document["tables"]
    variations = variation_labels(document)
    agreement = [
        [
            TASK_NAMES[r["task"]],
            SOURCES.get(r["source"], r["source"]),
            *_group(r, variations),
            MEASURES.get(r["measure"], r["measure"]),
            str(r["n_examples"]),
            agreement_value(r),
            r["note"],
        ]
        for r in tables["agreement"]
    ]
    disagreement = [
        [
            TASK_NAMES[r["task"]],
            *_group(r, variations),
            str(r["n_examples"]),
            *(
                f"{r[name]} ({number(r[f'{name}_percent'], 1)}%)" if r[f"{name}_percent"] is not None else str(r[name])
                for name in ("two_reads_agreed", "third_read_settled", "adjudicated")
            ),
            r["note"],
        ]
        for r in tables["disagreement"]
    ]
    adjudication = [
        [
            TASK_NAMES[r["task"]],
            *_group(r, variations),
            str(r["n_adjudicated"]),
            str(r["rated_realistic_or_equivalent"]),
            str(r["rated_minor"]),
            str(r["rated_major"]),
            number(r["mean_distance_to_reads"], 2),
            str(r["matched_a_read"]),
            r["note"],
        ]
        for r in tables["adjudication"]
    ]
    return {
        "id": "agreement",
        "title": "Agreement and disagreement",
        "figures": [figures["agreement"]],
        "tables": [
            _table(
                TABLE_TITLES["agreement"] + " (95% CI)",
                ["Task", "Reads", "Level", "Group", "Measure", "Examples", "Value [95% CI]", "Note"],
                agreement,
                name="agreement",
            ),
            _table(
                TABLE_TITLES["disagreement"],
                DISAGREEMENT_COLUMNS,
                disagreement,
                name="disagreement",
            ),
            _table(
                TABLE_TITLES["adjudication"],
                ADJUDICATION_COLUMNS,
                adjudication,
                name="adjudication",
            ),
        ],
    }


def _margin(document: dict, name: str) -> str:
    margin = document.get("margins", {}).get(name)
    if margin is None:
        return " (no margin set)"
    if name == "task1_realistic":
        return f" (non-inferiority margin: {100 * margin:g} percentage points)"
    return f" (equivalence margin: at most {100 * margin:g}% of pairs with a Major Discrepancy)"


def sections(document: dict, figures: dict) -> list[dict]:
    """The page's sections, in order: Task 1, Task 2 (those in the document), then agreement."""
    out = []
    if "task1" in document["counts"]:
        out.append(_task1(document, figures))
    if "task2" in document["counts"]:
        out.append(_task2(document, figures))
    out.append(_agreement(document, figures))
    return out
