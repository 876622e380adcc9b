"""Box and strip plots of a metric per variation: clinically equivalent pairs against Major Discrepancy.

A layer over `analysis.sensitivity.Sensitivity` (its per-pair scores); matplotlib's Agg backend,
no pyplot state. One figure per metric and direction, named by `figure_name`.
"""

import io
from pathlib import Path

import matplotlib
import numpy as np
import pandas as pd
from matplotlib.figure import Figure

from analysis import figure_cache, metrics
from analysis.names import REVERSE, figure_name
from analysis.sensitivity import Sensitivity

matplotlib.use("Agg")

FORMATS = ("svg", "png")
DPI = 110
COLOURS = {"equivalent": "#0072B2", "major": "#D55E00"}  # Okabe & Ito
MAX_POINTS = 150  # per box: a seeded sample of the points is drawn over the box
SEED = 0


def figure_names(sensitivity: Sensitivity) -> dict[str, dict]:
    """Every figure's name -> its metric, direction and title."""
    names = {}
    for entry in sensitivity.document["metrics"]:
        name = figure_name(entry["metric"], entry["direction"])
        reverse = " (reverse: the alternative as the reference)" if entry["direction"] == REVERSE else ""
        names[name] = entry | {
            "figure_title": f"{entry['title']}{reverse}: clinically equivalent vs major, per variation"
        }
    return names


def render(sensitivity: Sensitivity, name: str, fmt: str = "svg") -> bytes:
    entry = figure_names(sensitivity).get(name)
    if entry is None:
        raise ValueError(f"figure {name!r}: unknown.")
    # A figure reads its entry and the per-pair scores only (figure_cache).
    entry_frame = pd.DataFrame([{key: str(value) for key, value in sorted(entry.items())}])
    key = figure_cache.content_key(name, fmt, [("entry", entry_frame), ("scores", sensitivity.scores)])
    return figure_cache.rendered(key, lambda: _render(sensitivity, entry, fmt))


def _render(sensitivity: Sensitivity, entry: dict, fmt: str) -> bytes:
    figure = _draw(sensitivity, entry)
    buffer = io.BytesIO()
    metadata = {"Date": None} if fmt == "svg" else {}
    with matplotlib.rc_context({"svg.hashsalt": "readingroom", "svg.fonttype": "none"}):
        figure.savefig(buffer, format=fmt, dpi=DPI, metadata=metadata, bbox_inches="tight")
    return buffer.getvalue()


def render_all(sensitivity: Sensitivity, outdir: str | Path) -> list[Path]:
    outdir = Path(outdir)
    outdir.mkdir(parents=True, exist_ok=True)
    written = []
    for name in figure_names(sensitivity):
        for fmt in FORMATS:
            path = outdir / f"{name}.{fmt}"
            path.write_bytes(render(sensitivity, name, fmt))
            written.append(path)
    return written


def _draw(sensitivity: Sensitivity, entry: dict) -> Figure:
    scores = sensitivity.scores
    scores = scores[(scores["metric"] == entry["metric"]) & (scores["direction"] == entry["direction"])]
    variations = sorted(set(scores["reref_variation"]))
    groups = [*variations, "all variations"]
    figure = Figure(figsize=(10, 0.6 * len(groups) + 2), layout="constrained")
    figure.patch.set_facecolor("white")
    axes = figure.add_subplot()
    rng = np.random.default_rng(SEED)
    y = np.arange(len(groups))[::-1].astype(float)
    for position, group in zip(y, groups, strict=True):
        part = scores if group == "all variations" else scores[scores["reref_variation"] == group]
        for offset, (kind, mask) in zip(
            (0.18, -0.18),
            (("equivalent", part["rating"] != "Major Discrepancy"), ("major", part["rating"] == "Major Discrepancy")),
            strict=True,
        ):
            values = part.loc[mask, "score"].to_numpy(dtype=float)
            if len(values) == 0:
                continue
            axes.boxplot([values], positions=[position + offset], widths=0.3, orientation="horizontal",
                         showfliers=False, patch_artist=True,
                         boxprops={"facecolor": "white", "edgecolor": COLOURS[kind]},
                         medianprops={"color": COLOURS[kind], "linewidth": 2},
                         whiskerprops={"color": COLOURS[kind]}, capprops={"color": COLOURS[kind]})  # fmt: skip
            shown = values if len(values) <= MAX_POINTS else rng.choice(values, MAX_POINTS, replace=False)
            jitter = rng.uniform(-0.1, 0.1, len(shown))
            axes.plot(shown, position + offset + jitter, "o", color=COLOURS[kind], alpha=0.45, markersize=3,
                      label=None)  # fmt: skip
            axes.annotate(f"n={len(values)}", (1.01, position + offset), xycoords=("axes fraction", "data"),
                          va="center", fontsize=7)  # fmt: skip
    perfect = entry.get("perfect")
    if perfect is not None:
        axes.axvline(perfect, color="grey", linestyle="--", linewidth=1)
    axes.set_yticks(y, groups, fontsize=9)
    axes.plot([], [], "s", color=COLOURS["equivalent"], label="clinically equivalent (Equivalent, Minor)")
    axes.plot([], [], "s", color=COLOURS["major"], label="Major Discrepancy")
    axes.legend(loc="lower center", bbox_to_anchor=(0.5, 1.0), ncols=2, frameon=False, fontsize=9)
    scale = f" (perfect = {perfect:g}, dashed)" if perfect is not None else ""
    axes.set_xlabel(f"{entry['title']}{scale}")
    name = figure_names(sensitivity)[figure_name(entry["metric"], entry["direction"])]["figure_title"]
    axes.set_title(name, pad=28)
    axes.spines[["top", "right"]].set_visible(False)
    if metrics.PERFECT.get(entry["metric"]) is not None and entry["direction"] != "imported":
        axes.set_xlim(-0.02 * perfect, 1.02 * perfect)
    return figure
