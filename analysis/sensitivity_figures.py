"""Box and strip plots of a metric per variation: clinically equivalent pairs against Major Discrepancy.

A layer over the per-pair scores of `analysis.sensitivity.Sensitivity`, drawn like the results'
figures (analysis.figure_layout: journal sizes, rows by taxonomy label under their dimensions, SVG,
PNG and PDF). One figure per metric and direction, named by `figure_name`.
"""

import numpy as np
import pandas as pd
from matplotlib import cbook
from matplotlib.collections import LineCollection, PatchCollection
from matplotlib.figure import Figure
from matplotlib.lines import Line2D
from matplotlib.patches import Rectangle

from analysis import metrics
from analysis.figure_layout import (
    ONE_AND_A_HALF_COLUMNS,
    height,
    lines_of,
    new_figure,
    positions,
    right_labels,
    row_labels,
)

COLOURS = {"equivalent": "#0072B2", "major": "#D55E00"}  # Okabe & Ito
MAX_POINTS = 150  # per box: a seeded sample of the points is drawn over the box
SEED = 0


BOX_HEIGHT = 0.32
BOX_ZORDER = 2  # as matplotlib's boxplot: lines' zorder, medians a tenth above (over the points)


def box_plots(axes, boxes: list[tuple[float, np.ndarray]], colour: str) -> None:
    """Horizontal box plots at the given heights, as matplotlib's `boxplot` draws them (its statistics:
    quartiles, median, whiskers to the furthest value within 1.5 IQR; white boxes, caps half the box's
    height, no fliers), but as three collections for all of them rather than six artists for each
    (the demo's five sensitivity figures took a fifth less CPU to draw and save)."""
    stats = cbook.boxplot_stats([values for _, values in boxes])
    half, cap = BOX_HEIGHT / 2, BOX_HEIGHT / 4
    ys = [y for y, _ in boxes]
    axes.add_collection(PatchCollection(
        [Rectangle((s["q1"], y - half), s["q3"] - s["q1"], BOX_HEIGHT) for y, s in zip(ys, stats, strict=True)],
        facecolor="white", edgecolor=colour, linewidth=0.7, zorder=BOX_ZORDER,
    ))  # fmt: skip
    whiskers = []
    for y, s in zip(ys, stats, strict=True):
        whiskers += [[(s["q1"], y), (s["whislo"], y)], [(s["q3"], y), (s["whishi"], y)]]
        whiskers += [[(s["whislo"], y - cap), (s["whislo"], y + cap)], [(s["whishi"], y - cap), (s["whishi"], y + cap)]]
    axes.add_collection(LineCollection(whiskers, colors=colour, linewidths=0.7, zorder=BOX_ZORDER))
    medians = [[(s["med"], y - half), (s["med"], y + half)] for y, s in zip(ys, stats, strict=True)]
    axes.add_collection(LineCollection(medians, colors=colour, linewidths=1.2, zorder=BOX_ZORDER + 0.1))


def draw(scores: pd.DataFrame, entry: dict, variations: dict) -> Figure:
    """The figure of one metric and direction (`entry`) from its per-pair scores (the columns
    analysis.figure_jobs.SCORED)."""
    present = set(scores["reref_variation"])
    order = [key for key in variations if key in present] + sorted(present - set(variations))
    rows = lines_of(order, variations)
    figure = new_figure(ONE_AND_A_HALF_COLUMNS, height(len(rows) * 1.6, 0.8))
    axes = figure.add_subplot()
    rng = np.random.default_rng(SEED)
    ys = positions(rows)
    right_y, right_text = [], []
    boxes = {kind: [] for kind in COLOURS}  # kind -> [(y, values)]
    points = {kind: ([], []) for kind in COLOURS}  # kind -> (xs, ys)
    for position, row in zip(ys, rows, strict=True):
        if row.group is None:
            continue
        part = scores if row.level == "overall" else scores[scores["reref_variation"] == row.group]
        for offset, (kind, mask) in zip(
            (0.2, -0.2),
            (("equivalent", part["rating"] != "Major Discrepancy"), ("major", part["rating"] == "Major Discrepancy")),
            strict=True,
        ):
            values = part.loc[mask, "score"].to_numpy(dtype=float)
            right_y.append(position + offset)
            right_text.append(f"{len(values)}")
            if len(values) == 0:
                continue
            boxes[kind].append((position + offset, values))
            shown = values if len(values) <= MAX_POINTS else rng.choice(values, MAX_POINTS, replace=False)
            points[kind][0].append(shown)
            points[kind][1].append(position + offset + rng.uniform(-0.1, 0.1, len(shown)))
    for kind, colour in COLOURS.items():
        if boxes[kind]:
            box_plots(axes, boxes[kind], colour)
            point_xs, point_ys = (np.concatenate(part) for part in points[kind])
            axes.plot(point_xs, point_ys, "o", color=colour, alpha=0.45, markersize=1.5, zorder=BOX_ZORDER)
    perfect = entry.get("perfect")
    if perfect is not None:
        axes.axvline(perfect, color="grey", linestyle="--", linewidth=0.6)
    row_labels(axes, rows, ys)
    if metrics.PERFECT.get(entry["metric"]) is not None and entry["direction"] != "imported":
        axes.set_xlim(-0.02 * perfect, 1.02 * perfect)
    scale = f" (perfect = {perfect:g}, dashed)" if perfect is not None else ""
    axes.set_xlabel(f"{entry['title']}{scale}")
    right_labels(axes, right_y, right_text, header="Pairs")
    handles = [
        Line2D([], [], color=COLOURS["equivalent"], marker="s", linestyle="", label="clinically equivalent"),
        Line2D([], [], color=COLOURS["major"], marker="s", linestyle="", label="Major Discrepancy"),
    ]
    figure.legend(handles=handles, loc="outside upper center", ncols=2, frameon=False)
    return figure
