"""Figures over the judge tables (analysis.judges): confusion matrices, and judge vs radiologists.

Drawn like analysis.figures (Agg, no pyplot state; Okabe & Ito colours), which renders them next
to the study's figures when the results have judge tables.
"""

import numpy as np
import pandas as pd
from matplotlib.figure import Figure

from analysis.names import JUDGE_TITLES

TASK_TITLES = {"task1": "Task 1, realism", "task2": "Task 2, equivalence"}
JUDGE_COLOUR, READERS_COLOUR = "#D55E00", "#0072B2"


def _figure(width: float, height: float) -> Figure:
    figure = Figure(figsize=(width, height), layout="constrained")
    figure.patch.set_facecolor("white")
    return figure


def _empty(name: str, message: str) -> Figure:
    figure = _figure(8, 2.5)
    axes = figure.add_subplot()
    axes.set_title(JUDGE_TITLES[name])
    axes.text(0.5, 0.5, message, ha="center", va="center", fontsize=12, transform=axes.transAxes)
    axes.set_axis_off()
    return figure


def draw_judge_figure(tables: dict[str, pd.DataFrame], name: str) -> Figure:
    if name == "judges_confusion":
        return _confusion(tables.get("judge_confusion"))
    return _versus(tables.get("judge_vs_readers"))


def _confusion(table: pd.DataFrame | None) -> Figure:
    name = "judges_confusion"
    if table is None or table.empty:
        return _empty(name, "No judge has rated an example with a consensus yet.")
    overall = table[table["level"] == "overall"]
    panels = sorted({(row.judge, row.task) for row in overall.itertuples()}, key=lambda p: (int(p[0]), p[1]))
    columns = min(len(panels), 4)
    rows = -(-len(panels) // columns)
    figure = _figure(3.6 * columns, 3.4 * rows + 0.6)
    axes_grid = figure.subplots(rows, columns, squeeze=False)
    for axes, (judge, task) in zip(axes_grid.flat, panels, strict=False):
        part = overall[(overall["judge"] == judge) & (overall["task"] == task)]
        labels = list(dict.fromkeys(part["consensus"]))
        matrix = part.pivot_table(index="consensus", columns="judge_rating", values="n", aggfunc="sum")
        matrix = matrix.reindex(index=labels, columns=labels).fillna(0).to_numpy(dtype=int)
        axes.imshow(matrix, cmap="Blues", vmin=0, vmax=max(int(matrix.max()), 1))
        for (i, j), value in np.ndenumerate(matrix):
            colour = "white" if value > matrix.max() / 2 else "black"
            axes.text(j, i, str(value), ha="center", va="center", color=colour, fontsize=10)
        short = [label.split()[0] for label in labels]
        axes.set_xticks(range(3), short, fontsize=8)
        axes.set_yticks(range(3), short, fontsize=8)
        axes.set_xlabel("judge")
        axes.set_ylabel("consensus")
        axes.set_title(f"judge {judge} · {TASK_TITLES[task]}", fontsize=9)
    for axes in list(axes_grid.flat)[len(panels) :]:
        axes.set_axis_off()
    figure.suptitle(JUDGE_TITLES[name])
    return figure


def _versus(table: pd.DataFrame | None) -> Figure:
    name = "judges_vs_readers"
    if table is None or table.empty or not table["judge_reader"].notna().any():
        return _empty(name, "No judge has rated an example with a consensus yet.")
    rows = table.sort_values(["task", "judge"], key=lambda c: c.astype(int) if c.name == "judge" else c)
    labels = [f"judge {row.judge} · {TASK_TITLES[row.task]} (n={row.n_examples})" for row in rows.itertuples()]
    figure = _figure(10, 0.6 * len(labels) + 1.8)
    axes = figure.add_subplot()
    y = np.arange(len(labels))[::-1]
    for position, row in zip(y, rows.itertuples(), strict=True):
        for offset, value, low, high, colour, label in (
            (0.15, row.judge_reader, row.judge_reader_ci_low, row.judge_reader_ci_high, JUDGE_COLOUR,
             "judge vs a radiologist"),
            (-0.15, row.reader_reader, row.reader_reader_ci_low, row.reader_reader_ci_high, READERS_COLOUR,
             "radiologist vs radiologist"),
        ):  # fmt: skip
            if value is None or pd.isna(value):
                continue
            if low is not None and not pd.isna(low):
                axes.plot([low, high], [position + offset] * 2, color=colour, linewidth=1.6)
            axes.plot(value, position + offset, "o", color=colour, label=label if position == y[0] else None)
    axes.set_yticks(y, labels, fontsize=9)
    axes.set_xlim(0, 1)
    axes.set_xlabel("Share of agreeing pairs of ratings (95% bootstrap CI)")
    axes.spines[["top", "right"]].set_visible(False)
    axes.legend(loc="lower right", frameon=False)
    axes.set_title(JUDGE_TITLES[name])
    return figure
