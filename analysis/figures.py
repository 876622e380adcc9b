"""Figures over the result tables, sized and typeset for a journal (analysis.figure_layout).

`figure_of(results, name)` draws one figure of `FIGURES` (or of `JUDGE_FIGURES`), which
analysis.figure_jobs keys, caches and saves in SVG, PNG (300 dpi) and PDF. A figure
whose data are missing (no Task 2 examples yet, a filter that leaves nothing) says so in the figure
instead of failing. Rows are the variations by their taxonomy labels, grouped under the dimensions,
then all variations together. Palette: Okabe & Ito's colour-blind-safe colours. No figure carries a
title: its title and caption are written beside it (analysis.names.TITLES and CAPTIONS).
"""

import numpy as np
import pandas as pd
from matplotlib.figure import Figure
from matplotlib.lines import Line2D
from matplotlib.ticker import MaxNLocator

from analysis.figure_layout import (
    DOUBLE_COLUMN,
    ONE_AND_A_HALF_COLUMNS,
    SCALE_COLOURS,
    SINGLE_COLUMN,
    empty_figure,
    height,
    interval,
    lines,
    new_figure,
    positions,
    right_labels,
    row_labels,
    symmetric_limits,
)
from analysis.judge_figures import draw_judge_figure
from analysis.names import JUDGE_FIGURES, variation_labels
from analysis.result_data import LABELS, Results

MEASURE_COLOUR = "#0072B2"
RANGE_COLOUR = "#56B4E9"
# One panel per measure: (name, axis label, axis limits).
RELEASE_MEASURES = (
    ("two_reads_agreed", "First two reads agreed (share)", (0.0, 1.0)),
    ("krippendorff_alpha_ordinal_first_two_reads", "Krippendorff's alpha, ordinal", (-0.5, 1.0)),
)
LIVE_MEASURES = (
    ("percent_agreement", "Percent agreement (share)", (0.0, 1.0)),
    ("gwet_ac1", "Gwet's AC1", (-0.5, 1.0)),
    ("gwet_ac2_ordinal", "Gwet's AC2, ordinal", (-0.5, 1.0)),
    ("krippendorff_alpha_ordinal", "Krippendorff's alpha, ordinal", (-0.5, 1.0)),
)
TASK_TITLES = {"task1": "Task 1, realism", "task2": "Task 2, equivalence"}


def figure_of(results: Results, name: str) -> Figure:
    """The figure `name` (of FIGURES or JUDGE_FIGURES) of these results, to be saved (analysis.figure_jobs)."""
    return draw_judge_figure(results.tables, name) if name in JUDGE_FIGURES else _DRAW[name](results)


def _shares(table: pd.DataFrame, groups: list[str], extra: dict | None = None) -> tuple[np.ndarray, np.ndarray]:
    subset = table
    for column, value in (extra or {}).items():
        subset = subset[subset[column] == value]
    pivot = subset.pivot_table(index="group", columns="score", values="n", aggfunc="sum").reindex(groups).fillna(0)
    counts = pivot.reindex(columns=[0, 1, 2], fill_value=0).to_numpy(dtype=float)
    totals = counts.sum(axis=1)
    with np.errstate(invalid="ignore", divide="ignore"):
        shares = np.where(totals[:, None] > 0, 100 * counts / np.maximum(totals[:, None], 1), 0)
    return shares, totals.astype(int)


def _ratings_figure(results: Results, task: str) -> Figure:
    table = results.tables.get(f"{task}_ratings")
    if table is None or not (table["total"] > 0).any():
        return empty_figure(f"No {TASK_TITLES[task].split(',')[0]} examples with a consensus yet.")
    table = table[table["level"].isin(["variation", "overall"])]
    rows = lines(table, variation_labels(results.document))
    data = [row for row in rows if row.group is not None]
    groups = [row.group for row in data]
    bars = [(None, "n")] if task == "task2" else [("original", "original"), ("alternative", "rewrite")]
    per_row = 1.0 if task == "task2" else 1.7
    figure = new_figure(SINGLE_COLUMN if task == "task2" else ONE_AND_A_HALF_COLUMNS, height(len(rows) * per_row, 0.9))
    axes = figure.add_subplot()
    ys = positions(rows)
    data_y = np.array([y for y, row in zip(ys, rows, strict=True) if row.group is not None])
    bar_height = 0.8 / len(bars)
    right_y, right_text = [], []
    for index, (report_type, caption) in enumerate(bars):
        shares, totals = _shares(table, groups, {"report_type": report_type} if report_type else None)
        bar_y = data_y + 0.4 - bar_height / 2 - index * bar_height
        left = np.zeros(len(groups))
        for score, label in enumerate(LABELS[task]):
            axes.barh(bar_y, shares[:, score], bar_height * 0.9, left=left, color=SCALE_COLOURS[score],
                      label=label if index == 0 else None, edgecolor="white", linewidth=0.3)  # fmt: skip
            left += shares[:, score]
        right_y += list(bar_y)
        right_text += [f"{caption} {total}" if report_type else f"n = {total}" for total in totals]
    row_labels(axes, rows, ys)
    axes.set_xlim(0, 100)
    axes.set_xticks([0, 25, 50, 75, 100])
    axes.set_xlabel("Consensus ratings (%)")
    right_labels(axes, right_y, right_text)
    figure.legend(loc="outside upper center", ncols=3, frameon=False, title="Consensus rating",
                  handlelength=1, columnspacing=1)  # fmt: skip
    return figure


def _interval_text(row) -> str:
    """What a forest row says beside it: n, the p-values, or why there is no test or interval."""
    notes = row.note or ""
    if row.p_value is None:
        # The note's reason, up to its explanation: "not tested: 1 pair", "not tested: no discordant pairs".
        text = (
            "not tested: " + notes.split("test: ")[-1].split(";")[0].split(":")[0] if "test:" in notes else "not tested"
        )
    elif row.p_holm is None:
        text = f"p = {row.p_value:.2g}"
    else:
        text = f"p = {row.p_value:.2g}, Holm {row.p_holm:.2g}"
    if row.ci_low is None and "too few" in notes:
        text += "; too few exams for an interval"
    elif row.ci_low is not None and row.ci_low == row.ci_high:
        text += "; zero-width interval"
    verdict = getattr(row, "verdict", "")
    return f"{row.n_pairs} ({row.n_exams})   {text}" + (f"; {verdict}" if verdict else "")


def _forest(results: Results, table_name: str, estimate: str, most: float, xlabel: str) -> Figure:
    table = results.tables.get(table_name)
    if table is None or not (table["n_pairs"] > 0).any():
        return empty_figure("No Task 1 pairs with a consensus for both reports yet.")
    table = table[table["level"].isin(["variation", "overall"])]
    limits = symmetric_limits([*table[estimate], *table["ci_low"], *table["ci_high"]], 0.5, most)
    rows = lines(table, variation_labels(results.document))
    by_group = {(row.level, row.group): row for row in table.itertuples()}
    figure = new_figure(DOUBLE_COLUMN, height(len(rows), 0.75))
    axes = figure.add_subplot(1, 1, 1)
    ys = positions(rows)
    right_y, right_text = [], []
    for y, line in zip(ys, rows, strict=True):
        row = by_group.get((line.level, line.group))
        if row is None:
            continue
        overall = line.level == "overall"
        colour = "black" if overall else SCALE_COLOURS[0]
        value = getattr(row, estimate)
        if row.ci_low is not None and row.ci_low == row.ci_high:
            axes.plot(row.ci_low, y, marker="|", color=colour, markersize=7, markeredgewidth=1.2)
        else:
            interval(axes, row.ci_low, row.ci_high, y, limits, colour)
        if value is not None:
            axes.plot(value, y, marker="D" if overall else "o", color=colour, markersize=3.5 if overall else 3,
                      clip_on=False)  # fmt: skip
        right_y.append(y)
        right_text.append(_interval_text(row))
    row_labels(axes, rows, ys)
    axes.set_xlim(*limits)
    axes.xaxis.set_major_locator(MaxNLocator(nbins=8, steps=[1, 2, 2.5, 5, 10]))
    axes.axvline(0, color="grey", linestyle="--", linewidth=0.6)
    axes.set_xlabel(xlabel)
    right_labels(axes, right_y, right_text, header="Pairs (exams), test")
    return figure


def _degradation_forest(results: Results) -> Figure:
    return _forest(
        results, "task1_degradation", "mean_difference", 2.0,
        "Mean difference in consensus score, rewrite - original (95% CI); > 0: the rewrite less realistic",
    )  # fmt: skip


def _realistic_forest(results: Results) -> Figure:
    figure = _forest(
        results, "task1_realistic_difference", "difference", 1.0,
        "Difference in the share rated Realistic, rewrite - original (95% CI)",
    )  # fmt: skip
    margin = results.document.get("margins", {}).get("task1_realistic")
    if margin is not None and figure.axes and figure.axes[0].has_data():
        axes = figure.axes[0]
        line = axes.axvline(-margin, color=SCALE_COLOURS[2], linewidth=1)
        label = f"non-inferiority margin: -{margin * 100:g} percentage points"
        figure.legend([line], [label], loc="outside upper center", frameon=False)
    return figure


def _agreement(results: Results) -> Figure:
    table = results.tables.get("agreement")
    if table is None or table.empty or not (table["value"].notna() | table["range_low"].notna()).any():
        return empty_figure("No agreement can be computed yet (no examples with two reads).")
    live = (table["source"] == "initial_reads").any()
    measures = LIVE_MEASURES if live else RELEASE_MEASURES
    tasks = [t for t in ("task1", "task2") if (table["task"] == t).any()]
    table = table[table["level"].isin(["variation", "overall"])]
    rows = lines(table, variation_labels(results.document))
    ys = positions(rows)
    figure = new_figure(DOUBLE_COLUMN, len(tasks) * height(len(rows), 0.55) + 0.3)
    # The panels of a task show the same rows, but do not share the y axis: each panel would then have
    # the first's ticks (a tick mark, two labels and a grid line per row, hidden but laid out and
    # drawn in every format), a fifth of this figure's time. The first panel names the rows.
    grid = figure.subplots(len(tasks), len(measures), squeeze=False)
    ranged = False
    for task, panels in zip(tasks, grid, strict=True):
        part = table[table["task"] == task]
        for column, (axes, (measure, label, limits)) in enumerate(zip(panels, measures, strict=True)):
            values = part[part["measure"] == measure].set_index(["level", "group"])
            for y, line in zip(ys, rows, strict=True):
                if line.group is None or (line.level, line.group) not in values.index:
                    continue
                row = values.loc[(line.level, line.group)]
                colour = "black" if line.level == "overall" else MEASURE_COLOUR
                if pd.isna(row["value"]) and pd.notna(row["range_low"]):
                    # Three-way splits leave the first two reads open: the range, as a light band.
                    axes.plot([max(row["range_low"], limits[0]), min(row["range_high"], limits[1])], [y, y],
                              color=RANGE_COLOUR, linewidth=3, solid_capstyle="butt")  # fmt: skip
                    ranged = True
                    continue
                if pd.isna(row["value"]):
                    continue
                interval(axes, row["ci_low"], row["ci_high"], y, limits, colour, linewidth=0.9)
                axes.plot(row["value"], y, "D" if line.level == "overall" else "o", color=colour, markersize=2.8,
                          clip_on=False)  # fmt: skip
            axes.set_xlim(limits[0], limits[1] + 0.04)  # room for a point at 1
            if limits[0] < 0:
                axes.axvline(0, color="grey", linestyle="--", linewidth=0.5)
            axes.set_xlabel(label)
            axes.set_title(TASK_TITLES[task] if column == 0 else "", loc="left", fontweight="bold")
            if column == 0:
                row_labels(axes, rows, ys)
            else:
                axes.set_yticks([])
                axes.set_ylim(panels[0].get_ylim())  # the rows, as row_labels set them
        counts = part[part["measure"] == measures[0][0]].set_index(["level", "group"])["n_examples"]
        texts = [
            "" if line.group is None else str(int(counts.get((line.level, line.group), 0))) for line in rows
        ]  # fmt: skip
        right_labels(panels[-1], ys, texts, header="n")
        for axes in panels[:-1]:  # the rows' limits, with the header's row that right_labels added
            axes.set_ylim(panels[-1].get_ylim())
    handles = [
        Line2D([], [], color=MEASURE_COLOUR, marker="o", markersize=3, linewidth=0.9, label="estimate with 95% CI"),
        Line2D([], [], color="black", marker="D", markersize=3, linewidth=0.9, label="all variations"),
    ]
    if ranged:
        handles.append(Line2D([], [], color=RANGE_COLOUR, linewidth=3,
                              label="range: three-way splits leave the first two reads open"))  # fmt: skip
    figure.legend(handles=handles, loc="outside lower center", ncols=len(handles), frameon=False)
    return figure


_DRAW = {
    "task1_ratings": lambda results: _ratings_figure(results, "task1"),
    "task2_ratings": lambda results: _ratings_figure(results, "task2"),
    "task1_forest": _degradation_forest,
    "task1_realistic_forest": _realistic_forest,
    "agreement": _agreement,
}
