"""Write a study's results to a folder: tables as CSV, figures, results.md and results.json.

The same folder is what `manage.py analyze_release` writes and what the Results page's download
zips. An undefined number is an empty CSV field, null in JSON and "n/a" in results.md, with the
reason in the row's note.
"""

import json
from pathlib import Path

import pandas as pd

from analysis.figures import figure_names, render_figures
from analysis.names import TABLE_TITLES, TITLES
from analysis.results import Results


def write_results(results: Results, outdir: str | Path) -> Path:
    """Write tables/<name>.csv, figures/<name>.svg|png, results.md and results.json into outdir."""
    outdir = Path(outdir)
    (outdir / "tables").mkdir(parents=True, exist_ok=True)
    for name, table in results.tables.items():
        table.to_csv(outdir / "tables" / f"{name}.csv", index=False, na_rep="", lineterminator="\n")
    render_figures(results, outdir / "figures")
    (outdir / "results.json").write_text(
        json.dumps(results.document, indent=2, ensure_ascii=False, allow_nan=False) + "\n", encoding="utf-8"
    )
    (outdir / "results.md").write_text(markdown(results), encoding="utf-8")
    return outdir


def markdown(results: Results) -> str:
    document = results.document
    filters = document["filters"]
    lines = [
        "# Study results",
        "",
        f"Source: {document['source']}. Dataset: {filters['dataset'] or 'all'}. Task: {filters['task'] or 'both'}. "
        f"Bootstrap seed: {document['seed']}.",
        "",
    ]
    for task, counts in document["counts"].items():
        described = ", ".join(f"{value} {key}" for key, value in counts.items())
        lines.append(f"- {'Task 1 (realism)' if task == 'task1' else 'Task 2 (equivalence)'}: {described}.")
    lines += ["", "## Methods", ""]
    lines += [f"- **{name}**: {text}" for name, text in document["methods"].items()]
    lines += ["", "## Figures", ""]
    for name in figure_names(results):
        lines += [f"![{TITLES[name]}](figures/{name}.png)", ""]
    for name, table in results.tables.items():
        lines += [f"## {TABLE_TITLES.get(name, name)}", "", f"`tables/{name}.csv`", "", *_table(table), ""]
    return "\n".join(lines)


def _table(table: pd.DataFrame) -> list[str]:
    if table.empty:
        return ["(no rows)"]
    header = "| " + " | ".join(table.columns) + " |"
    rule = "|" + "|".join("---" for _ in table.columns) + "|"
    rows = ["| " + " | ".join(_cell(value) for value in row) + " |" for row in table.itertuples(index=False)]
    return [header, rule, *rows]


def _cell(value) -> str:
    if value is None:
        return "n/a"
    if isinstance(value, float):
        return f"{value:.4g}"
    return str(value).replace("|", "\\|").replace("\n", " ")
