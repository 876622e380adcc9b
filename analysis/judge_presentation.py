"""The Results page's "Automated judges" section: the judge tables of results.json, as rows of text."""

from analysis.names import JUDGE_FIGURES, LEVELS, group_label, variation_labels
from analysis.presentation import TASK_NAMES, number


def _share(value) -> str:
    return "n/a" if value is None else f"{100 * value:.1f}%"


def _interval(row: dict, value: str, low: str, high: str) -> str:
    if row.get(value) is None:
        return "n/a"
    if row.get(low) is None:
        return _share(row[value])
    return f"{_share(row[value])} [{_share(row[low])}, {_share(row[high])}]"


def judges_section(document: dict, figures: dict) -> dict | None:
    """The section (id, title, figures, tables) when the results hold judge tables, else None."""
    tables = document["tables"]
    if "judge_agreement" not in tables:
        return None
    variations = variation_labels(document)
    agreement = [
        [
            f"judge {row['judge']}",
            TASK_NAMES[row["task"]],
            f"{LEVELS.get(row['level'], row['level'])}: {group_label(row['level'], row['group'], variations)}",
            str(row["n_examples"]),
            _interval(row, "exact_agreement", "ci_low", "ci_high"),
            number(row["weighted_kappa"]),
            row["note"] or "",
        ]
        for row in tables["judge_agreement"]
    ]
    versus = [
        [
            f"judge {row['judge']}",
            TASK_NAMES[row["task"]],
            str(row["n_examples"]),
            _interval(row, "judge_reader", "judge_reader_ci_low", "judge_reader_ci_high"),
            _interval(row, "reader_reader", "reader_reader_ci_low", "reader_reader_ci_high"),
            _interval(row, "difference", "difference_ci_low", "difference_ci_high"),
            row["note"] or "",
        ]
        for row in tables["judge_vs_readers"]
    ]
    confusion: dict[tuple, dict] = {}
    for row in tables["judge_confusion"]:
        if row["level"] != "overall":
            continue
        entry = confusion.setdefault((row["judge"], row["task"], row["consensus"]), {})
        entry[row["judge_rating"]] = str(row["n"])
    confusion_rows = [
        [f"judge {judge}", TASK_NAMES[task], consensus, *cells.values()]
        for (judge, task, consensus), cells in confusion.items()
    ]
    return {
        "id": "judges",
        "title": "Automated judges",
        "figures": [figures[name] for name in JUDGE_FIGURES if name in figures],
        "tables": [
            {
                "name": "judge-agreement",
                "caption": "Agreement with the consensus: exact (Wilson 95% CI) and quadratic-weighted Cohen's kappa",
                "columns": ["Judge", "Task", "Group", "Examples", "Exact agreement", "Weighted kappa", "Note"],
                "rows": agreement,
            },
            {
                "name": "judge-vs-readers",
                "caption": "Is the judge as good as a reader? Agreement with a single radiologist vs between two "
                "radiologists, on the examples the judge rated (bootstrap 95% CIs)",
                "columns": [
                    "Judge",
                    "Task",
                    "Examples",
                    "Judge vs a radiologist",
                    "Radiologist vs radiologist",
                    "Difference",
                    "Note",
                ],
                "rows": versus,
            },
            {
                "name": "judge-confusion",
                "caption": "Confusion matrices (all variations): consensus rating by row, the judge's by column",
                "columns": [
                    "Judge",
                    "Task",
                    "Consensus",
                    "Judge: Realistic / Equivalent",
                    "Judge: Minor",
                    "Judge: Major",
                ],
                "rows": confusion_rows,
            },
        ],
    }
