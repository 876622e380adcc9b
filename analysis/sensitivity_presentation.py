"""The metric sensitivity document (analysis.sensitivity) laid out for the Results page: nothing is computed here."""

from analysis.names import DIRECTIONS, LEVELS, figure_name, group_label, metric_caption, variation_labels
from analysis.presentation import number

COLUMNS = [
    "Level", "Group", "Pairs", "Clinically equivalent: n, mean, median [IQR]", "Major: n, mean, median [IQR]",
    "Drop from perfect (equivalent)", "Spearman rho [95% CI]", "Note",
]  # fmt: skip


def _distribution(row: dict, kind: str) -> str:
    if not row[f"n_{kind}"]:
        return "0"
    return (
        f"{row[f'n_{kind}']}, {number(row[f'mean_{kind}'])}, {number(row[f'median_{kind}'])} "
        f"[{number(row[f'q1_{kind}'])}, {number(row[f'q3_{kind}'])}]"
    )


def _rho(row: dict) -> str:
    if row["spearman_rho"] is None:
        return "n/a"
    if row["ci_low"] is None:
        return number(row["spearman_rho"])
    return f"{number(row['spearman_rho'])} [{number(row['ci_low'])}, {number(row['ci_high'])}]"


def section(document: dict, figure_url) -> dict | None:
    """One table and one figure per metric and direction; None when the document has no metric sensitivity."""
    sensitivity = document.get("metric_sensitivity")
    if sensitivity is None:
        return None
    variations = variation_labels(document)
    metrics = []
    for entry in sensitivity["metrics"]:
        rows = [
            [
                LEVELS.get(r["level"], r["level"]),
                group_label(r["level"], r["group"], variations),
                str(r["n_pairs"]),
                _distribution(r, "equivalent"),
                _distribution(r, "major"),
                number(r["drop_from_perfect"]),
                _rho(r),
                r["note"],
            ]
            for r in sensitivity["table"]
            if r["metric"] == entry["metric"] and r["direction"] == entry["direction"]
        ]
        name = figure_name(entry["metric"], entry["direction"])
        perfect = "unknown" if entry["perfect"] is None else f"{entry['perfect']:g}"
        metrics.append(
            {
                "id": name.replace(".", "-"),
                "title": f"{entry['title']}, {DIRECTIONS[entry['direction']]}",
                "caption": f"{entry['title']} ({DIRECTIONS[entry['direction']]}; perfect score {perfect})",
                "columns": COLUMNS,
                "rows": rows,
                "figure": {
                    "title": f"{entry['title']}, {DIRECTIONS[entry['direction']]}",
                    "caption": metric_caption(entry),
                    **{fmt: figure_url(name, fmt) for fmt in ("svg", "png", "pdf")},
                },
            }
        )
    return {"methods": sensitivity["methods"], "metrics": metrics}
