"""What every results figure shares: journal sizes and type, rows grouped by the taxonomy's
dimensions, intervals that say where they run past the axis, counts aligned with their rows, and
rendering to SVG, PNG (300 dpi) and PDF with the same bytes for the same figure (`draw`, which
analysis.figure_jobs calls for each figure to draw).

Matplotlib's Agg backend and no pyplot state: safe in a web worker and in a command.
"""

import contextlib
import io
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial

import matplotlib
import pandas as pd
from fontTools import subset
from matplotlib import transforms
from matplotlib.axes import Axes
from matplotlib.backends import _backend_pdf_ps
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure
from matplotlib.text import Text
from PIL import Image, PngImagePlugin

from analysis import figure_fonts
from analysis.names import FIGURE_FORMATS, OTHER_DIMENSION, group_label

matplotlib.use("Agg")

DPI = 300
# Journal widths, inches: one column (89 mm), one and a half (140 mm) and two (183 mm).
SINGLE_COLUMN, ONE_AND_A_HALF_COLUMNS, DOUBLE_COLUMN = 3.5, 5.5, 7.2
ROW_HEIGHT = 0.15  # inches per line of a figure's rows
# Okabe & Ito: blue, orange, vermillion for 0 / 1 / 2 of the rating scale.
SCALE_COLOURS = ("#0072B2", "#E69F00", "#D55E00")
STYLE = {
    "font.size": 7,
    "axes.titlesize": 7.5,
    "axes.labelsize": 7,
    "xtick.labelsize": 6.5,
    "ytick.labelsize": 6.5,
    "legend.fontsize": 6.5,
    "axes.spines.top": False,
    "axes.spines.right": False,
    # Deterministic bytes: a fixed SVG hash salt, text as text (searchable, editable), TrueType in PDF.
    "svg.hashsalt": "readingroom",
    "svg.fonttype": "none",
    "pdf.fonttype": 42,
}
# No creation date: the same figure gives the same bytes.
METADATA = {"svg": {"Date": None}, "pdf": {"CreationDate": None}}
# zlib's level 3 instead of 6: a third less time writing a PNG, a tenth larger (a PNG of a figure is
# mostly spent compressing its pixels).
PNG_COMPRESS_LEVEL = 3


def new_figure(width: float, height: float) -> Figure:
    figure = Figure(figsize=(width, height), layout="constrained")
    figure.patch.set_facecolor("white")
    figure.get_layout_engine().set(w_pad=0.02, h_pad=0.02)
    return figure


def empty_figure(message: str) -> Figure:
    """A figure that says why there is nothing to draw."""
    figure = new_figure(SINGLE_COLUMN, 1.0)
    axes = figure.add_subplot()
    axes.text(0.5, 0.5, message, ha="center", va="center", wrap=True, transform=axes.transAxes)
    axes.set_axis_off()
    return figure


def save(figure: Figure, fmt: str) -> bytes:
    """The figure as SVG, PNG (300 dpi) or PDF bytes."""
    if fmt == "png":
        return _png(figure)
    buffer = io.BytesIO()
    with _lean_pdf_fonts() if fmt == "pdf" else contextlib.nullcontext():
        figure.savefig(buffer, format=fmt, dpi=DPI, metadata=METADATA[fmt])
    return buffer.getvalue()


def _png(figure: Figure) -> bytes:
    """The figure's pixels at 300 dpi as a PNG, as savefig writes it (the same pixels, resolution and
    Software text) but without the alpha channel where every pixel is opaque (a figure's face is
    white): a quarter fewer bytes to compress, which took a sixth less time and gives a tenth smaller
    files (savefig writes RGBA)."""
    # The Agg canvas the layout was solved on (_lay_out), and its renderer, as savefig would reuse them.
    canvas = figure.canvas if isinstance(figure.canvas, FigureCanvasAgg) else FigureCanvasAgg(figure)
    figure.set_dpi(DPI)
    canvas.draw()
    image = Image.frombuffer("RGBA", canvas.get_width_height(physical=True), canvas.buffer_rgba(), "raw", "RGBA", 0, 1)
    if image.getextrema()[3] == (255, 255):
        image = image.convert("RGB")
    info = PngImagePlugin.PngInfo()
    info.add_text("Software", f"Matplotlib version{matplotlib.__version__}, https://matplotlib.org/")
    buffer = io.BytesIO()
    image.save(buffer, format="png", pnginfo=info, dpi=(DPI, DPI), compress_level=PNG_COMPRESS_LEVEL)
    return buffer.getvalue()


# Tables of a TrueType font that a PDF never uses: glyph substitution and positioning (shaping is done
# before the glyphs are written) and their definitions. Reading them was about a third of the time
# a PDF took to save (fontTools subsets DejaVu Sans for each), and they make every PDF larger.
LAYOUT_TABLES = ["GSUB", "GPOS", "GDEF"]


@contextlib.contextmanager
def _lean_pdf_fonts():
    """While a PDF is saved, fontTools' subsetter (which matplotlib calls to embed Type 42 fonts) also
    drops the layout tables; its default list of tables to drop is where fontTools reads them from.
    And a face of the cut whose text in the PDF is all among figure_fonts.COMMON embeds the cut's
    subset to those characters, made once in this process, instead of a subset made for this PDF."""
    defaults = getattr(subset.Options, "_drop_tables_default", None)
    subsetting = getattr(_backend_pdf_ps, "get_glyphs_subset", None)
    with contextlib.ExitStack() as undo:
        if isinstance(defaults, list):  # another fontTools: its own defaults, the PDF is still right
            subset.Options._drop_tables_default = defaults + [t for t in LAYOUT_TABLES if t not in defaults]
            undo.callback(setattr, subset.Options, "_drop_tables_default", defaults)
        if subsetting is not None:  # another matplotlib: a subset per PDF, as before
            _backend_pdf_ps.get_glyphs_subset = partial(_glyphs_subset, subsetting)
            undo.callback(setattr, _backend_pdf_ps, "get_glyphs_subset", subsetting)
        yield


def _glyphs_subset(subsetting: Callable, fontfile: str, characters: str):
    """matplotlib's get_glyphs_subset (a fontTools font holding `characters`), from figure_fonts'
    common subset where the font is a face of the cut and the characters are all in COMMON."""
    common = figure_fonts.common_subset(fontfile, characters, subsetting)
    return common if common is not None else subsetting(fontfile, characters)


def draw(draw_figure: Callable[[], Figure]) -> dict[str, bytes]:
    """Draw a figure (a function returning a Figure) once in the results' style, saved in every format.
    The layout is solved once, at the PNG's resolution (as a page shows it), and every format keeps it.

    The text is set in the cut of DejaVu Sans (analysis.figure_fonts) where it has every character the
    figure shows, otherwise in the whole font; an SVG's text names the whole font and its fallbacks
    (the cut is on no reader's machine), with the same glyph widths, so nothing moves."""
    cut = figure_fonts.cut_family()
    figure = None
    if cut is not None:
        with matplotlib.rc_context(STYLE | {"font.family": [cut]}):
            figure = draw_figure()
        if not figure_fonts.covers(figure):
            figure = None
    with matplotlib.rc_context(STYLE | ({"font.family": [cut]} if figure is not None else {})):
        if figure is None:
            figure = draw_figure()
        _no_empty_label_placing(figure)
        _lay_out(figure)
        saved = {"png": save(figure, "png")}
        saved["pdf"] = save(figure, "pdf")
        figure_fonts.name_whole_font(figure)
        saved["svg"] = save(figure, "svg")
        return {fmt: saved[fmt] for fmt in FIGURE_FORMATS}


def _lay_out(figure: Figure) -> None:
    """Solve the figure's layout (its engine's, constrained) as the PNG's save would, at the PNG's
    resolution and on the Agg renderer it then draws with, and keep it: the figure is left with no
    engine, so no save solves it again. savefig would instead draw the whole figure once more, with
    its output turned off, only to have the engine run first: a tenth of a figure's time."""
    FigureCanvasAgg(figure)
    figure.set_dpi(DPI)
    figure.get_layout_engine().execute(figure)
    # No engine at all: savefig lays out (by that draw) a figure that has one, even matplotlib's
    # placeholder that "none" sets.
    figure.set_layout_engine(None)


def _no_empty_label_placing(figure: Figure) -> None:
    """An axis without a label (the rows' axes: their tick labels name them) is not asked where its
    label would go: matplotlib measures every tick label of the axis and of those sharing it for that,
    at every save, which was a tenth of a figure's time for no visible effect."""
    for axes in figure.axes:
        for axis in (axes.xaxis, axes.yaxis):
            if not axis.get_label_text():
                axis.set_label_coords(0, 0)


@dataclass(frozen=True)
class Line:
    """One row of a figure: a dimension's heading, a variation, or all variations together."""

    label: str
    group: str | None  # the tables' group key (None for a heading)
    level: str  # "heading", "variation" or "overall"


def lines(table: pd.DataFrame, variations: dict[str, dict], *, overall: bool = True) -> list[Line]:
    """A figure's rows, top to bottom: each dimension's heading and its variations (by label, in the
    taxonomy's order), then all variations together."""
    keys = list(dict.fromkeys(table.loc[table["level"] == "variation", "group"]))
    return lines_of(keys, variations, overall=overall and bool((table["level"] == "overall").any()))


def lines_of(keys: list[str], variations: dict[str, dict], *, overall: bool = True) -> list[Line]:
    dimensions = list(dict.fromkeys(variations.get(key, {}).get("dimension") or OTHER_DIMENSION for key in keys))
    out = []
    for dimension in dimensions:
        members = [key for key in keys if (variations.get(key, {}).get("dimension") or OTHER_DIMENSION) == dimension]
        out.append(Line(dimension, None, "heading"))
        out += [Line(group_label("variation", key, variations), key, "variation") for key in members]
    if overall:
        out.append(Line("All variations", "all", "overall"))
    return out


def positions(rows: list[Line]) -> list[float]:
    """y of each row, the first at the top."""
    return [float(len(rows) - 1 - index) for index in range(len(rows))]


def row_labels(axes: Axes, rows: list[Line], ys: list[float]) -> None:
    """The rows' names on the y axis: the dimensions' headings (bold italic, no tick mark) as minor
    ticks, the variations as major ones, all variations together in bold."""
    data = [(y, row) for y, row in zip(ys, rows, strict=True) if row.level != "heading"]
    headings = [(y, row) for y, row in zip(ys, rows, strict=True) if row.level == "heading"]
    axes.set_yticks([y for y, _ in data], [row.label for _, row in data])
    axes.set_yticks([y for y, _ in headings], [row.label for _, row in headings], minor=True)
    axes.tick_params(axis="y", which="major", length=2)
    axes.tick_params(axis="y", which="minor", length=0)
    axes.set_ylim(min(ys) - 0.7, max(ys) + 0.7)
    for label in axes.get_yticklabels(minor=True):
        label.set_fontweight("bold")
        label.set_fontstyle("italic")
    for label, (_, row) in zip(axes.get_yticklabels(), data, strict=False):
        if row.level == "overall":
            label.set_fontweight("bold")


# Points between the axes' right edge and the column right of it (a tick label's pad).
RIGHT_LABEL_PAD = 3


def right_labels(axes: Axes, ys: list[float], texts: list[str], header: str = "") -> list[Text]:
    """A column of text right of the axes, each aligned with its row: placed in the axes' own data
    coordinates, so that it stays with its row whatever the limits, and set as the y axis' tick labels
    are; a header goes in a row of its own above the first. (A twin axis' tick labels did the same, at
    the cost of a second axes, a tenth of a figure's time.)"""
    if header:
        low, high = axes.get_ylim()
        axes.set_ylim(low, high + 1)
        ys, texts = [*ys, high + 0.5], [*texts, header]
    place = transforms.blended_transform_factory(axes.transAxes, axes.transData) + transforms.ScaledTranslation(
        RIGHT_LABEL_PAD / 72, 0, axes.get_figure(root=True).dpi_scale_trans
    )
    size = matplotlib.rcParams["ytick.labelsize"]
    labels = [
        axes.text(1, y, text, transform=place, ha="left", va="center_baseline", fontsize=size)
        for y, text in zip(ys, texts, strict=True)
    ]
    if header:
        labels[-1].set_fontweight("bold")
    return labels


def symmetric_limits(values, least: float, most: float) -> tuple[float, float]:
    """Axis limits around 0 that hold every value given (estimates and interval ends): at least
    ±least, at most ±most (an interval past them ends in an arrow)."""
    found = [abs(v) for v in values if v is not None and not pd.isna(v)]
    limit = min(max([least, *found]), most)
    return -limit - 0.05 * limit, limit + 0.05 * limit


def interval(axes: Axes, low, high, y: float, limits: tuple[float, float], colour: str, *, linewidth=1.2) -> None:
    """A 95% interval as a line; an end past the axis is drawn as an arrow at the edge with its value."""
    if low is None or high is None or pd.isna(low) or pd.isna(high):
        return
    left, right = limits
    axes.plot([max(low, left), min(high, right)], [y, y], color=colour, linewidth=linewidth, solid_capstyle="butt")
    for value, edge, marker, align, offset in ((low, left, "<", "left", 3), (high, right, ">", "right", -3)):
        if (value < edge) if marker == "<" else (value > edge):
            axes.plot(edge, y, marker=marker, color=colour, markersize=3.5, clip_on=False)
            axes.annotate(f"{value:.2f}", (edge, y), xytext=(offset, 3), textcoords="offset points", ha=align,
                          va="bottom", fontsize=5.5, color=colour)  # fmt: skip


def height(rows: int, extra: float) -> float:
    """A figure's height for this many rows, plus `extra` inches of axes, labels and legend."""
    return ROW_HEIGHT * rows + extra
