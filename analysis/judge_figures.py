"""Figures over the judge tables (analysis.judges): confusion matrices, and judge vs radiologists.

Drawn like analysis.figures (analysis.figure_layout: journal sizes and type, no title in the image,
Okabe & Ito colours), which renders them next to the study's figures when the results have judge
tables.
"""

import numpy as np
import pandas as pd
from matplotlib.figure import Figure

from analysis.figure_layout import (
    DOUBLE_COLUMN,
    ONE_AND_A_HALF_COLUMNS,
    SINGLE_COLUMN,
    empty_figure,
    height,
    new_figure,
)

TASK_TITLES = {"task1": "Task 1, realism", "task2": "Task 2, equivalence"}
JUDGE_COLOUR, READERS_COLOUR = "#D55E00", "#0072B2"


def draw_judge_figure(tables: dict[str, pd.DataFrame], name: str) -> Figure:
    if name == "judges_confusion":
        return _confusion(tables.get("judge_confusion"))
    return _versus(tables.get("judge_vs_readers"))


def _confusion(table: pd.DataFrame | None) -> Figure:
    if table is None or table.empty:
        return empty_figure("No judge has rated an example with a consensus yet.")
    overall = table[table["level"] == "overall"]
    panels = sorted({(row.judge, row.task) for row in overall.itertuples()}, key=lambda p: (int(p[0]), p[1]))
    columns = min(len(panels), 2)
    rows = -(-len(panels) // columns)
    width = SINGLE_COLUMN if columns == 1 else DOUBLE_COLUMN
    figure = new_figure(width, rows * min(width / columns, 2.4) + 0.2)
    axes_grid = figure.subplots(rows, columns, squeeze=False)
    for axes, (judge, task) in zip(axes_grid.flat, panels, strict=False):
        part = overall[(overall["judge"] == judge) & (overall["task"] == task)]
        labels = list(dict.fromkeys(part["consensus"]))
        matrix = part.pivot_table(index="consensus", columns="judge_rating", values="n", aggfunc="sum")
        matrix = matrix.reindex(index=labels, columns=labels).fillna(0).to_numpy(dtype=int)
        axes.imshow(matrix, cmap="Blues", vmin=0, vmax=max(int(matrix.max()), 1))
        for (i, j), value in np.ndenumerate(matrix):
            colour = "white" if value > matrix.max() / 2 else "black"
            axes.text(j, i, str(value), ha="center", va="center", color=colour)
        short = [label.split()[0] for label in labels]
        axes.set_xticks(range(3), short)
        axes.set_yticks(range(3), short)
        axes.set_xlabel("judge")
        axes.set_ylabel("consensus")
        axes.set_title(f"Judge {judge} · {TASK_TITLES[task]}")
    for axes in list(axes_grid.flat)[len(panels) :]:
        axes.set_axis_off()
    return figure


def _versus(table: pd.DataFrame | None) -> Figure:
    if table is None or table.empty or not table["judge_reader"].notna().any():
        return empty_figure("No judge has rated an example with a consensus yet.")
    rows = table.sort_values(["task", "judge"], key=lambda c: c.astype(int) if c.name == "judge" else c)
    labels = [f"judge {row.judge} · {TASK_TITLES[row.task]} (n={row.n_examples})" for row in rows.itertuples()]
    figure = new_figure(ONE_AND_A_HALF_COLUMNS, height(2.2 * len(labels), 0.9))
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
    axes.set_yticks(y, labels)
    axes.set_xlim(0, 1)
    axes.set_xlabel("Share of agreeing pairs of ratings (95% bootstrap CI)")
    # Outside the axes: a legend inside covered an interval.
    figure.legend(loc="outside upper center", ncols=2, frameon=False)
    return figure
