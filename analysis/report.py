"""Write a study's results to a folder: the summary and methods in words, figures, and every table.

The same folder is what `manage.py analyze_release` writes and what the Results page's download
zips:
- summary.md: the study's answers, a paragraph per question, with numbers and intervals;
- methods.md: each method with its references and the versions of the packages that computed it;
- results.md: the summary, each figure with its title and caption, and the list of tables;
- figures/<name>.svg|png|pdf;
- tables/<name>.csv: tidy, one row per group and number, with the keys to join on; an undefined
  number is an empty field, with the reason in the row's note;
- tables/<name>.md and .tex (booktabs): the tables as the Results page shows them, with labels;
- results.json: every number (null where undefined).
"""

import json
import re
from functools import partial
from pathlib import Path

import pandas as pd

from analysis import figure_jobs, presentation, sensitivity_presentation, writeup
from analysis.figure_jobs import figure_names, render_figures, render_many
from analysis.judge_presentation import judges_section
from analysis.names import CAPTIONS, FIGURES, JUDGE_FIGURES, TITLES, variation_labels
from analysis.result_data import Results, Sensitivity
from analysis.results import with_fits
from analysis.sensitivity_report import write_sensitivity


def write_analysis(
    results: Results, outdir: str | Path, sensitivity: Sensitivity | None = None, *, scores_written: bool = False
) -> Path:
    """The whole results folder: write_results, and the metric sensitivity's scores (unless written
    already, sensitivity_report.write_scores) and figures when there is one (attached to the results
    before, sensitivity_report.attach). Every figure of both is
    drawn first, all together, so that the processes that draw them share the work evenly; the mixed
    models' fits, if analyze left them to run (defer_fits), are run beside them."""
    variations = variation_labels(results.document)
    # The longest first (four panels), so that no process is left drawing it alone at the end.
    names = sorted(figure_names(results), key=lambda name: name != "agreement")
    jobs = figure_jobs.jobs(results, names)
    if sensitivity is not None:
        metric_figures = list(figure_jobs.sensitivity_figure_names(sensitivity))
        jobs |= figure_jobs.sensitivity_jobs(sensitivity, metric_figures, variations)
    render_many(jobs, run=partial(with_fits, results))  # kept by figure_cache, where the writers find them
    write_results(results, outdir)
    if sensitivity is not None:
        write_sensitivity(sensitivity, outdir, variations, scores_written=scores_written)
    return Path(outdir)


def write_results(results: Results, outdir: str | Path) -> Path:
    """Write summary.md, methods.md, results.md, results.json, tables/ and figures/ into outdir."""
    with_fits(results, [])  # fits analyze left to run (none if write_analysis ran them)
    outdir = Path(outdir)
    (outdir / "tables").mkdir(parents=True, exist_ok=True)
    for name, table in results.tables.items():
        table.to_csv(outdir / "tables" / f"{name}.csv", index=False, na_rep="", lineterminator="\n")
    shown = presented_tables(results.document)
    for table in shown:
        (outdir / "tables" / f"{table['name']}.md").write_text(markdown_table(table), encoding="utf-8")
        (outdir / "tables" / f"{table['name']}.tex").write_text(latex_table(table), encoding="utf-8")
    render_figures(results, outdir / "figures")
    (outdir / "results.json").write_text(
        json.dumps(results.document, indent=2, ensure_ascii=False, allow_nan=False) + "\n", encoding="utf-8"
    )
    (outdir / "summary.md").write_text(writeup.summary_markdown(results.document), encoding="utf-8")
    (outdir / "methods.md").write_text(writeup.methods(results.document), encoding="utf-8")
    (outdir / "results.md").write_text(markdown(results, shown), encoding="utf-8")
    return outdir


def presented_tables(document: dict) -> list[dict]:
    """Every table as the Results page shows it (caption, columns, rows of text, name)."""
    figures = {name: {} for name in FIGURES + JUDGE_FIGURES}
    tables = [table for section in presentation.sections(document, figures) for table in section["tables"]]
    judges = judges_section(document, figures)
    if judges:
        tables += judges["tables"]
    metrics = sensitivity_presentation.section(document, lambda name, fmt: "")
    if metrics:
        tables += [
            {"name": metric["id"], "caption": metric["caption"], "columns": metric["columns"], "rows": metric["rows"]}
            for metric in metrics["metrics"]
        ]
    return tables


def markdown(results: Results, shown: list[dict]) -> str:
    document = results.document
    lines = ["# Study results", "", writeup._scope(document), "", "Methods and references: `methods.md`.", ""]
    for heading, paragraph in writeup.summary(document):
        lines += [f"## {heading}", "", paragraph, ""]
    lines += ["## Figures", ""]
    for name in figure_names(results):
        lines += [f"![{TITLES[name]}](figures/{name}.png)", "", f"*{TITLES[name]}.* {CAPTIONS[name]}", ""]
        lines += [f"Files: `figures/{name}.png` (300 dpi), `.svg`, `.pdf`.", ""]
    lines += ["## Tables", ""]
    lines += [f"- {table['caption']}: `tables/{table['name']}.md`, `tables/{table['name']}.tex`" for table in shown]
    lines += ["", "Tidy tables with the keys to join on, one row per group and number: `tables/*.csv`.", ""]
    return "\n".join(lines)


def markdown_table(table: dict) -> str:
    """A presented table as Markdown: its caption, then a pipe table."""
    header = "| " + " | ".join(_cell(column) for column in table["columns"]) + " |"
    rule = "|" + "|".join("---" for _ in table["columns"]) + "|"
    rows = ["| " + " | ".join(_cell(cell) for cell in row) + " |" for row in table["rows"]]
    return "\n".join([f"**{table['caption']}**", "", header, rule, *(rows or ["| (no rows) |"])]) + "\n"


def latex_table(table: dict) -> str:
    """A presented table as LaTeX: a booktabs tabular with its caption, text escaped, as pandas'
    to_latex(index=False, escape=True) writes it (tests/analysis/test_latex_tables.py holds the two
    equal), written here: to_latex renders through pandas' Styler and jinja2, which was three quarters
    of the time spent writing the demo's results folder (0.15 s of 0.2 s of CPU). A table whose cells
    are not all text (the presented tables' are) is still written by to_latex."""
    columns, rows = table["columns"], table["rows"]
    # to_latex escapes the cells and the header, not the caption.
    caption = "".join(LATEX_SPECIAL.get(character, character) for character in table["caption"])
    if not all(isinstance(cell, str) for cell in [*columns, *(cell for row in rows for cell in row)]):
        frame = pd.DataFrame(rows, columns=columns)
        return frame.to_latex(index=False, escape=True, caption=caption, label=f"tab:{table['name']}", position="htbp")
    lines = [
        r"\begin{table}[htbp]",
        *([rf"\caption{{{caption}}}"] if caption else []),
        rf"\label{{tab:{table['name']}}}",
        rf"\begin{{tabular}}{{{'l' * len(columns)}}}",
        r"\toprule",
        " & ".join(map(_latex_text, columns)) + r" \\",
        r"\midrule",
        *(" & ".join(map(_latex_text, row)) + r" \\" for row in rows),
        r"\bottomrule",
        r"\end{tabular}",
        r"\end{table}",
    ]
    return "\n".join(lines) + "\n"


def _latex_text(text: str) -> str:
    """Text escaped for LaTeX as pandas' to_latex(escape=True) escapes a cell: its replacements, in one
    pass (a backslash, tilde or circumflex followed by a space gets \\space, as the space would
    otherwise be swallowed)."""
    return _LATEX_ESCAPED.sub(lambda found: _LATEX_ESCAPES[found.group(0)], text)


_LATEX_ESCAPES = {
    "\\": "\\textbackslash ", "~": "\\textasciitilde ", "^": "\\textasciicircum ",
    **{f"{character} ": f"{escape}\\space " for character, escape in (
        ("\\", "\\textbackslash "), ("~", "\\textasciitilde "), ("^", "\\textasciicircum "),
    )},
    **{character: f"\\{character}" for character in "&%$#_{}"},
}  # fmt: skip
_LATEX_ESCAPED = re.compile(r"[\\~^] ?|[&%$#_{}]")


LATEX_SPECIAL = {
    "\\": r"\textbackslash{}", "&": r"\&", "%": r"\%", "$": r"\$", "#": r"\#", "_": r"\_", "{": r"\{",
    "}": r"\}", "~": r"\textasciitilde{}", "^": r"\textasciicircum{}",
}  # fmt: skip


def _cell(value) -> str:
    return str(value).replace("|", "\\|").replace("\n", " ")
