"""Figures over the result tables: matplotlib's Agg backend, no pyplot state (safe in a web worker).

`render_figure(results, name, fmt)` returns one figure as SVG or PNG bytes (what the Results page
serves as an image); `render_figures(results, outdir)` writes every figure in `FIGURES`. A figure
whose data are missing (no Task 2 examples yet, a filter that leaves nothing) says so in the figure
instead of failing. Palette: Okabe & Ito's colour-blind-safe colours.
"""

import io
from pathlib import Path

import matplotlib
import numpy as np
import pandas as pd
from matplotlib.figure import Figure

from analysis import figure_cache
from analysis.judge_figures import draw_judge_figure
from analysis.names import FIGURES, JUDGE_FIGURES, TITLES
from analysis.results import LABELS, Results

matplotlib.use("Agg")

FORMATS = ("svg", "png")
# Okabe & Ito: blue, orange, vermillion for 0 / 1 / 2; black and grey for the rest.
SCALE_COLOURS = ("#0072B2", "#E69F00", "#D55E00")
MEASURE_COLOURS = ("#0072B2", "#009E73", "#CC79A7", "#E69F00", "#56B4E9", "#D55E00")
MEASURE_NAMES = {
    "two_reads_agreed": "first two reads agreed",
    "krippendorff_alpha_ordinal_all_reads": "Krippendorff's alpha, ordinal (all reads)",
    "krippendorff_alpha_ordinal_first_two_reads": "Krippendorff's alpha, ordinal (first two reads; a range where "
    "three-way splits leave them open)",
    "percent_agreement": "percent agreement (initial reads)",
    "gwet_ac1": "Gwet's AC1 (initial reads)",
    "gwet_ac2_ordinal": "Gwet's AC2, ordinal (initial reads)",
    "krippendorff_alpha_ordinal": "Krippendorff's alpha, ordinal (initial reads)",
}
RELEASE_MEASURES = ("two_reads_agreed", "krippendorff_alpha_ordinal_first_two_reads")
LIVE_MEASURES = ("percent_agreement", "gwet_ac1", "gwet_ac2_ordinal", "krippendorff_alpha_ordinal")
DPI = 110


def render_figure(results: Results, name: str, fmt: str = "svg") -> bytes:
    """One figure of `FIGURES` (or, with judges, of `JUDGE_FIGURES`) as SVG or PNG bytes."""
    if name not in FIGURES and name not in JUDGE_FIGURES:
        raise ValueError(f"figure {name!r}: unknown; the figures are {', '.join(FIGURES + JUDGE_FIGURES)}.")
    if fmt not in FORMATS:
        raise ValueError(f"format {fmt!r}: use svg or png.")
    # A figure reads the results' tables only: the same tables draw the same figure (figure_cache).
    key = figure_cache.content_key(name, fmt, sorted(results.tables.items()))
    return figure_cache.rendered(key, lambda: _render(results, name, fmt))


def _render(results: Results, name: str, fmt: str) -> bytes:
    figure = draw_judge_figure(results.tables, name) if name in JUDGE_FIGURES else _DRAW[name](results)
    buffer = io.BytesIO()
    # No creation date and a fixed hash salt: the same results give the same bytes.
    metadata = {"Date": None} if fmt == "svg" else {}
    with matplotlib.rc_context({"svg.hashsalt": "readingroom", "svg.fonttype": "none"}):
        figure.savefig(buffer, format=fmt, dpi=DPI, metadata=metadata, bbox_inches="tight")
    return buffer.getvalue()


def render_figures(results: Results, outdir: str | Path, formats: tuple[str, ...] = FORMATS) -> list[Path]:
    """Write every figure as <name>.<fmt> into outdir; return the paths written."""
    outdir = Path(outdir)
    outdir.mkdir(parents=True, exist_ok=True)
    written = []
    for name in figure_names(results):
        for fmt in formats:
            path = outdir / f"{name}.{fmt}"
            path.write_bytes(render_figure(results, name, fmt))
            written.append(path)
    return written


def figure_names(results: Results) -> tuple[str, ...]:
    """The figures of these results: the study's, and the judges' when there are judge tables."""
    return FIGURES + (JUDGE_FIGURES if "judge_agreement" in results.tables else ())


def _figure(width: float, height: float) -> Figure:
    figure = Figure(figsize=(width, height), layout="constrained")
    figure.patch.set_facecolor("white")
    return figure


def _empty(name: str, message: str) -> Figure:
    figure = _figure(8, 2.5)
    axes = figure.add_subplot()
    axes.set_title(TITLES[name])
    axes.text(0.5, 0.5, message, ha="center", va="center", fontsize=12, transform=axes.transAxes)
    axes.set_axis_off()
    return figure


def _by_variation(table: pd.DataFrame) -> pd.DataFrame:
    """The variation rows, then the overall row last, labelled 'all variations'."""
    variations = table[table["level"] == "variation"]
    overall = table[table["level"] == "overall"].assign(group="all variations")
    return pd.concat([variations, overall], ignore_index=True)


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


def _ratings_figure(results: Results, name: str, task: str) -> Figure:
    table = results.tables.get(f"{task}_ratings")
    if table is None or not (table["total"] > 0).any():
        return _empty(name, f"No {'Task 1' if task == 'task1' else 'Task 2'} examples with a consensus yet.")
    table = _by_variation(table)
    groups = list(dict.fromkeys(table["group"]))
    bars = [(None, "")] if task == "task2" else [("original", "original"), ("alternative", "alternative")]
    height = 0.8 / len(bars)
    figure = _figure(10, (0.32 if task == "task2" else 0.55) * len(groups) + 1.8)
    axes = figure.add_subplot()
    y = np.arange(len(groups))[::-1].astype(float)
    for index, (report_type, caption) in enumerate(bars):
        shares, totals = _shares(table, groups, {"report_type": report_type} if report_type else None)
        positions = y + 0.4 - height / 2 - index * height
        left = np.zeros(len(groups))
        for score, label in enumerate(LABELS[task]):
            axes.barh(positions, shares[:, score], height * 0.92, left=left, color=SCALE_COLOURS[score],
                      label=label if index == 0 else None, edgecolor="white", linewidth=0.5)  # fmt: skip
            left += shares[:, score]
        for position, total in zip(positions, totals, strict=True):
            axes.text(101, position, f"{caption} n={total}".strip(), va="center", fontsize=8)
    axes.set_yticks(y, groups, fontsize=9)
    axes.set_xlim(0, 100)
    axes.set_xlabel("Share of consensus ratings (%)")
    axes.set_title(TITLES[name] + ("\n(upper bar: original report, lower bar: alternative)" if task == "task1" else ""))
    axes.legend(loc="lower center", bbox_to_anchor=(0.5, 1.0 + 0.6 / figure.get_figheight()), ncols=3,
                title="Consensus rating", frameon=False)  # fmt: skip
    axes.spines[["top", "right"]].set_visible(False)
    return figure


def _interval_text(row) -> str:
    """What a forest row says beside its line: p-values, or why there is no test or interval."""
    notes = row.note or ""
    if row.p_value is None:
        text = "not tested: " + notes.split("test: ")[-1].split(";")[0] if "test:" in notes else ""
    elif row.p_holm is None:
        text = f"p = {row.p_value:.3g}"
    else:
        text = f"p = {row.p_value:.3g}, Holm p = {row.p_holm:.3g}"
    if row.ci_low is None and "too few" in notes:
        text += "; too few exams for a useful interval"
    elif row.ci_low is not None and row.ci_low == row.ci_high:
        text += "; zero-width interval"
    verdict = getattr(row, "verdict", "")
    return f"{text}; {verdict}" if verdict else text


def _forest_rows(axes, table: pd.DataFrame, estimate: str) -> list[float]:
    """Draw each row's interval (a bar; a zero-width one as a tall tick) and estimate; return the ends."""
    ends = []
    for row in table.itertuples():
        overall = row.group == "all variations"
        colour = "black" if overall else SCALE_COLOURS[0]
        value = getattr(row, estimate)
        if row.ci_low is not None and row.ci_low == row.ci_high:
            axes.plot(row.ci_low, row.Index, marker="|", color=colour, markersize=16, markeredgewidth=2)
        elif row.ci_low is not None:
            axes.plot([row.ci_low, row.ci_high], [row.Index, row.Index], color=colour, linewidth=2)
        if value is not None:
            axes.plot(value, row.Index, marker="D" if overall else "o", color=colour, markersize=7)
        axes.annotate(f"n={row.n_pairs} ({row.n_exams} exams)   {_interval_text(row)}", (1.01, row.Index),
                      xycoords=("axes fraction", "data"), va="center", fontsize=8)  # fmt: skip
        ends += [v for v in (row.ci_low, row.ci_high, value) if v is not None]
    axes.set_yticks(np.arange(len(table)), list(table["group"]), fontsize=9)
    axes.set_ylim(-0.7, len(table) - 0.3)
    axes.axvline(0, color="grey", linestyle="--", linewidth=1)
    axes.spines[["top", "right"]].set_visible(False)
    return ends


def _forest(results: Results) -> Figure:
    name = "task1_forest"
    table = results.tables.get("task1_degradation")
    if table is None or not (table["n_pairs"] > 0).any():
        return _empty(name, "No Task 1 pairs with a consensus for both reports yet.")
    table = _by_variation(table).iloc[::-1].reset_index(drop=True)
    figure = _figure(10, 0.45 * len(table) + 2)
    axes = figure.add_subplot()
    ends = _forest_rows(axes, table, "mean_difference")
    limit = max([1.0, *(abs(v) for v in ends)])
    axes.set_xlim(-limit - 0.1, limit + 0.1)
    axes.set_xlabel(
        "Mean difference in consensus score, alternative - original (exact 95% CI, inverted sign-flip test)\n"
        "< 0: alternative rated more realistic; > 0: less realistic (0 Realistic, 1 Minor, 2 Major)"
    )
    axes.set_title(TITLES[name] + "\nExact sign-flip test over exams, Holm-adjusted across variations")
    return figure


def _realistic_forest(results: Results) -> Figure:
    name = "task1_realistic_forest"
    table = results.tables.get("task1_realistic_difference")
    if table is None or not (table["n_pairs"] > 0).any():
        return _empty(name, "No Task 1 pairs with a consensus for both reports yet.")
    table = _by_variation(table).iloc[::-1].reset_index(drop=True)
    figure = _figure(11.5, 0.45 * len(table) + 2.3)
    axes = figure.add_subplot()
    _forest_rows(axes, table, "difference")
    margin = results.document.get("margins", {}).get("task1_realistic")
    if margin is not None:
        line = axes.axvline(-margin, color=SCALE_COLOURS[2], linewidth=1.5)
        label = f"non-inferiority margin: -{margin * 100:g} percentage points"
        figure.legend([line], [label], loc="outside lower center", fontsize=8, frameon=False)
    axes.set_xlim(-1.05, 1.05)
    axes.set_xlabel(
        "Share rated Realistic, alternative - original (95% CI: Newcombe per variation, exact sign-flip over "
        "exams overall)\n< 0: the alternative is rated Realistic less often"
    )
    axes.set_title(
        TITLES[name] + ("" if margin is None else "\nNon-inferior where the interval lies right of the margin")
    )
    return figure


def _agreement(results: Results) -> Figure:
    name = "agreement"
    table = results.tables.get("agreement")
    if table is None or table.empty or not table["value"].notna().any():
        return _empty(name, "No agreement can be computed yet (no examples with two reads).")
    live = (table["source"] == "initial_reads").any()
    measures = LIVE_MEASURES if live else RELEASE_MEASURES
    tasks = [t for t in ("task1", "task2") if (table["task"] == t).any()]
    figure = _figure(11, 0.55 * len(_groups(table)) + 2.5)
    axes_list = figure.subplots(1, len(tasks), sharey=True, squeeze=False)[0]
    groups = _groups(table)
    y = np.arange(len(groups))[::-1]
    for axes, task in zip(axes_list, tasks, strict=True):
        part = table[table["task"] == task]
        step = 0.7 / len(measures)
        for index, measure in enumerate(measures):
            rows = _by_variation(part[part["measure"] == measure]).set_index("group").reindex(groups)
            offset = 0.35 - step / 2 - index * step
            for position, row in zip(y + offset, rows.itertuples(), strict=True):
                label = MEASURE_NAMES[measure] if position == y[0] + offset else None
                if (row.value is None or pd.isna(row.value)) and pd.notna(row.range_low):
                    # Three-way splits leave the first two reads open: the range, as a hollow bar.
                    axes.plot([row.range_low, row.range_high], [position, position], color=MEASURE_COLOURS[index],
                              linewidth=4, alpha=0.45, solid_capstyle="butt", label=label)  # fmt: skip
                    continue
                if row.value is None or pd.isna(row.value):
                    continue
                if pd.notna(row.ci_low):
                    axes.plot([row.ci_low, row.ci_high], [position, position], color=MEASURE_COLOURS[index],
                              linewidth=1.6)  # fmt: skip
                axes.plot(row.value, position, "o", color=MEASURE_COLOURS[index], markersize=5, label=label)
        counts = _by_variation(part[part["measure"] == measures[0]]).set_index("group").reindex(groups)["n_examples"]
        for position, n in zip(y, counts, strict=True):
            axes.text(1.07, position, f"n={'-' if pd.isna(n) else int(n)}", va="center", fontsize=8)
        axes.set_yticks(y, groups, fontsize=9)
        axes.axvline(0, color="grey", linestyle="--", linewidth=1)
        axes.set_xlim(-0.6, 1.25)
        axes.set_xticks([-0.5, 0, 0.5, 1])
        axes.set_xlabel("Agreement (95% CI; none with fewer than 10 examples)")
        axes.set_title("Task 1, realism" if task == "task1" else "Task 2, equivalence")
        axes.spines[["top", "right"]].set_visible(False)
    handles, labels = axes_list[0].get_legend_handles_labels()
    figure.legend(handles, labels, loc="outside lower center", ncols=2, frameon=False)
    figure.suptitle(TITLES[name] + ("" if live else " (from the release files: the first two reads of each example)"))
    return figure


def _groups(table: pd.DataFrame) -> list[str]:
    variations = sorted(set(table.loc[table["level"] == "variation", "group"]))
    return [*variations, "all variations"]


_DRAW = {
    "task1_ratings": lambda results: _ratings_figure(results, "task1_ratings", "task1"),
    "task2_ratings": lambda results: _ratings_figure(results, "task2_ratings", "task2"),
    "task1_forest": _forest,
    "task1_realistic_forest": _realistic_forest,
    "agreement": _agreement,
}
