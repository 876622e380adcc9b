"""Which figures an analysis has, their content keys, and their bytes: every figure of the results
(analysis.figures) and of the metric sensitivity (analysis.sensitivity_figures), drawn once per
content (analysis.figure_cache) in SVG, PNG (300 dpi) and PDF.

Nothing here imports the drawing code (matplotlib): a figure to draw is a `Drawing`, its function
named by module and name, so that a process can describe, key, write and send figures without
importing it, and the processes that draw can import it while this one imports and computes the
statistics (`drawing_processes`: how `manage.py compute_results` and `analyze_release` start).
The mixed models' fits then run in the computing process, beside the drawing (results.with_fits).
"""

import importlib
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from functools import partial
from pathlib import Path

import pandas as pd

from analysis import figure_cache, parallel
from analysis.names import FIGURE_FORMATS, FIGURES, JUDGE_FIGURES, REVERSE, figure_name
from analysis.result_data import Results, Sensitivity

# The modules whose functions draw (Drawing.module): what a process that draws imports first.
DRAWING_MODULES = ("analysis.figures", "analysis.sensitivity_figures")
# The columns of the per-pair scores a metric's figure reads (analysis.sensitivity_figures.draw).
SCORED = ["reref_variation", "rating", "score"]


@dataclass(frozen=True)
class Drawing:
    """One figure to draw: `function` of `module`, called with `args`, returns the matplotlib Figure,
    which figure_layout.draw saves in every format. Pickled whole to a process that draws."""

    module: str
    function: str
    args: tuple

    def __call__(self) -> dict[str, bytes]:
        # The drawing code is imported where a figure is drawn, not where it is described.
        from analysis import figure_layout

        draw_figure = getattr(importlib.import_module(self.module), self.function)
        return figure_layout.draw(partial(draw_figure, *self.args))


def render_many(figures: dict[str, Drawing], run: Callable[[list], list] | None = None) -> dict[str, dict[str, bytes]]:
    """Every figure (content key -> Drawing) in every format: the cached bytes where a figure was drawn
    before (figure_cache), the others drawn once each by `run`: by default in the processes that the
    process drawing_processes started forks, or else in processes forked here now where that pays
    (analysis.parallel); results.with_fits runs the mixed models' fits beside them."""
    out = {key: found for key in figures if (found := figure_cache.cached(key)) is not None}
    missing = [key for key in figures if key not in out]
    drawings = [figures[key] for key in missing]
    if drawings and not parallel.early_processes_started():
        _ready_to_draw()  # here, once, before any process forks: each inherits it
    drawn = run(drawings) if run is not None else parallel.run_beside(drawings, [])[0]
    for key, formats in zip(missing, drawn, strict=True):
        figure_cache.keep(key, formats)
        out[key] = formats
    return {key: out[key] for key in figures}


@contextmanager
def drawing_processes() -> Iterator[None]:
    """Within it, figures are drawn by way of a process started on entering it (none where forking
    does not pay or is not safe, analysis.parallel): it imports the drawing code and makes the fonts
    on the core this process leaves idle while it imports and computes the statistics, then forks the
    processes that draw (one per core), which inherit all that. Entered before the scientific stack is
    imported, this takes matplotlib's import off the way to the results, and imports it once."""
    with parallel.early_processes(_ready_to_draw):
        yield


def _ready_to_draw() -> None:
    """Import the drawing code and make the figures' fonts (analysis.figure_fonts)."""
    for module in DRAWING_MODULES:
        importlib.import_module(module)
    from analysis import figure_fonts

    figure_fonts.cut_family()


# The results' figures. What each reads: its tables, and whether the study's margins. Every figure
# also reads the taxonomy's labels. A figure is drawn from these alone, so that its content key covers
# all it sees.
READS = {
    "task1_ratings": (("task1_ratings",), False),
    "task2_ratings": (("task2_ratings",), False),
    "task1_forest": (("task1_degradation",), False),
    "task1_realistic_forest": (("task1_realistic_difference",), True),
    "agreement": (("agreement",), False),
    "judges_confusion": (("judge_confusion",), False),
    "judges_vs_readers": (("judge_vs_readers",), False),
}


def figure_names(results: Results) -> tuple[str, ...]:
    """The figures of these results: the study's, and the judges' when there are judge tables."""
    return FIGURES + (JUDGE_FIGURES if "judge_agreement" in results.tables else ())


def jobs(results: Results, names) -> dict[str, Drawing]:
    """Each figure's content key -> its Drawing. A figure is given only what it reads (READS): the same
    tables, labels and margins give the same figure (figure_cache), and a change elsewhere in the
    results (another table, another filter's agreement rows) does not draw it again."""
    variations = pd.DataFrame(results.document.get("variations", []), columns=["key", "label", "dimension"])
    margins = results.document.get("margins", {})
    labels = figure_cache.digest([("variations", variations)])
    out = {}
    for name in names:
        table_names, with_margins = READS[name]
        tables = {table: results.tables[table] for table in table_names if table in results.tables}
        document = {"variations": results.document.get("variations", [])}
        if with_margins:
            document["margins"] = margins
        seen = sorted(tables.items()) + ([("margins", pd.DataFrame([margins]))] if with_margins else [])
        key = figure_cache.content_key(name, figure_cache.digest(seen), labels)
        out[key] = Drawing("analysis.figures", "figure_of", (Results(document=document, tables=tables), name))
    return out


def render_figure(results: Results, name: str, fmt: str = "svg") -> bytes:
    """One figure of `FIGURES` (or, with judges, of `JUDGE_FIGURES`) as SVG, PNG or PDF bytes."""
    if name not in FIGURES and name not in JUDGE_FIGURES:
        raise ValueError(f"figure {name!r}: unknown; the figures are {', '.join(FIGURES + JUDGE_FIGURES)}.")
    if fmt not in FIGURE_FORMATS:
        raise ValueError(f"format {fmt!r}: use svg, png or pdf.")
    [formats] = render_many(jobs(results, [name])).values()
    return formats[fmt]


def render_figures(results: Results, outdir: str | Path) -> list[Path]:
    """Write every figure as <name>.svg, .png and .pdf into outdir; return the paths written."""
    names = figure_names(results)
    return _write(outdir, zip(names, render_many(jobs(results, names)).values(), strict=True))


# The metric sensitivity's figures: one per metric and direction.
def sensitivity_figure_names(sensitivity: Sensitivity) -> dict[str, dict]:
    """Every figure's name -> its metric, direction and title."""
    names = {}
    for entry in sensitivity.document["metrics"]:
        name = figure_name(entry["metric"], entry["direction"])
        reverse = " (reverse: the rewrite as the reference)" if entry["direction"] == REVERSE else ""
        names[name] = entry | {
            "figure_title": f"{entry['title']}{reverse}: clinically equivalent vs major, per variation"
        }
    return names


def sensitivity_jobs(sensitivity: Sensitivity, names, variations: dict) -> dict[str, Drawing]:
    """Each figure's content key -> its Drawing: a figure reads its entry, the per-pair scores and the
    taxonomy's labels only (figure_cache)."""
    entries = sensitivity_figure_names(sensitivity)
    labels = pd.DataFrame([{"key": key, **value} for key, value in sorted(variations.items())])
    shared = figure_cache.digest([("scores", sensitivity.scores), ("variations", labels)])
    # Only a figure's own scores go to the process that draws it (a tenth of them, or less).
    by_metric = dict(iter(sensitivity.scores.groupby(["metric", "direction"], sort=False)))
    out = {}
    for name in names:
        entry = entries[name]
        entry_frame = pd.DataFrame([{key: str(value) for key, value in sorted(entry.items())}])
        key = figure_cache.content_key(name, figure_cache.digest([("entry", entry_frame)]), shared)
        mine = by_metric[(entry["metric"], entry["direction"])][SCORED]
        out[key] = Drawing("analysis.sensitivity_figures", "draw", (mine, entry, variations))
    return out


def render_sensitivity_figure(
    sensitivity: Sensitivity, name: str, fmt: str = "svg", variations: dict | None = None
) -> bytes:
    if name not in sensitivity_figure_names(sensitivity):
        raise ValueError(f"figure {name!r}: unknown.")
    [formats] = render_many(sensitivity_jobs(sensitivity, [name], variations or {})).values()
    return formats[fmt]


def render_sensitivity_figures(
    sensitivity: Sensitivity, outdir: str | Path, variations: dict | None = None
) -> list[Path]:
    """Write every figure as <name>.svg, .png and .pdf into outdir; return the paths written."""
    names = list(sensitivity_figure_names(sensitivity))
    drawn = render_many(sensitivity_jobs(sensitivity, names, variations or {}))
    return _write(outdir, zip(names, drawn.values(), strict=True))


def _write(outdir: str | Path, figures) -> list[Path]:
    outdir = Path(outdir)
    outdir.mkdir(parents=True, exist_ok=True)
    written = []
    for name, formats in figures:
        for fmt, data in formats.items():
            path = outdir / f"{name}.{fmt}"
            path.write_bytes(data)
            written.append(path)
    return written
