"""Figures drawn once per content (analysis.figure_cache): the same data gives the cached bytes without
drawing again, in every format from one drawing; other data, labels or margins, or another figure, is
drawn; figures drawn in parallel processes are byte for byte those drawn in this one."""

import functools
import io
import logging
import os
import re
import subprocess
import sys
import zlib
from pathlib import Path

import pytest
from fontTools.ttLib import TTFont
from matplotlib.figure import Figure
from matplotlib.layout_engine import ConstrainedLayoutEngine
from PIL import Image

from analysis import figure_cache, figure_layout, figures
from analysis.figure_jobs import render_figure
from analysis.figure_layout import LAYOUT_TABLES
from analysis.names import FIGURE_FORMATS, FIGURES
from analysis.results import Margins, analyze
from tests.analysis.helpers import make_frames

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def draws(monkeypatch):
    figure_cache.clear()
    calls = []
    draw = figures.figure_of

    def counting(results, name):
        calls.append(name)
        return draw(results, name)

    monkeypatch.setattr(figures, "figure_of", counting)
    yield calls
    figure_cache.clear()


@functools.cache  # read-only: analysed once per set of arguments, for every test here
def _results(second_read: int = 0, label: str = "Structure: structured", margin: float | None = None):
    """Two pairs of one variation; the first original's reads are 0, second_read and 0 (third when needed)."""
    first = (0, 0) if second_read == 0 else (0, second_read, 0)
    task1 = [
        ("structure--structured", "1", "original", first, None),
        ("structure--structured", "1", "alternative", (1, 1), None),
        ("structure--structured", "2", "original", (0, 0), None),
        ("structure--structured", "2", "alternative", (2, 2), None),
    ]
    task2 = [("structure--structured", "1", (0, 0), None), ("structure--structured", "2", (1, 1), None)]
    return analyze(
        make_frames(task1, task2),
        seed=0,
        taxonomy=[("structure--structured", label, "Organization")],
        margins=Margins(task1_realistic=margin),
    )


def test_the_same_tables_give_the_cached_bytes_without_drawing_again(draws):
    first = render_figure(_results(), "task1_ratings", "svg")
    again = render_figure(_results(), "task1_ratings", "svg")
    png = render_figure(_results(), "task1_ratings", "png")
    pdf = render_figure(_results(), "task1_ratings", "pdf")

    assert again == first
    assert png.startswith(b"\x89PNG") and pdf.startswith(b"%PDF")
    # Drawn once, saved in every format.
    assert draws == ["task1_ratings"]


def test_other_tables_labels_margins_or_another_figure_are_drawn(draws):
    render_figure(_results(), "task1_ratings", "svg")
    render_figure(_results(), "agreement", "svg")
    render_figure(_results(second_read=2), "agreement", "svg")  # the first two reads now disagree
    relabelled = render_figure(_results(label="Template"), "task1_ratings", "svg")
    render_figure(_results(), "task1_realistic_forest", "svg")
    with_margin = render_figure(_results(margin=0.1), "task1_realistic_forest", "svg")

    assert draws == [
        "task1_ratings", "agreement", "agreement", "task1_ratings", "task1_realistic_forest", "task1_realistic_forest",
    ]  # fmt: skip
    assert b"Template" in relabelled
    assert b"non-inferiority margin" in with_margin


def test_a_figure_is_not_drawn_again_when_only_what_it_does_not_read_changed(draws):
    render_figure(_results(), "task1_ratings", "svg")
    # The second read changes the agreement table, not the consensus ratings; a margin is read by the
    # realistic forest only.
    render_figure(_results(second_read=2), "task1_ratings", "svg")
    render_figure(_results(margin=0.1), "task1_ratings", "svg")
    render_figure(_results(second_read=2, margin=0.1), "task1_forest", "svg")
    render_figure(_results(), "task1_forest", "svg")

    assert draws == ["task1_ratings", "task1_forest"]


def test_a_cached_figure_is_the_figure_drawn_afresh():
    figure_cache.clear()
    cached = render_figure(_results(), "task1_forest", "svg")
    assert render_figure(_results(), "task1_forest", "svg") == cached
    figure_cache.clear()
    assert render_figure(_results(), "task1_forest", "svg") == cached


def test_the_layout_is_solved_once_for_every_format(draws, monkeypatch):
    solved = []
    execute = ConstrainedLayoutEngine.execute
    monkeypatch.setattr(ConstrainedLayoutEngine, "execute", lambda self, fig: solved.append(1) or execute(self, fig))
    render_figure(_results(), "task1_forest", "svg")
    assert len(solved) == 1


def test_each_format_draws_the_figure_once(draws, monkeypatch):
    # A figure that keeps a layout engine, even matplotlib's placeholder for "none", is drawn twice
    # by savefig (once more, with its output off, to lay it out); the layout is solved without a draw.
    drawn = []
    draw = Figure.draw
    monkeypatch.setattr(Figure, "draw", lambda self, renderer: drawn.append(1) or draw(self, renderer))
    render_figure(_results(), "task1_forest", "svg")
    assert len(drawn) == len(FIGURE_FORMATS)


def test_the_layout_solved_beforehand_is_the_one_the_pngs_save_would_solve(monkeypatch):
    figure_cache.clear()
    solved_beforehand = render_figure(_results(), "task1_ratings", "png")
    monkeypatch.setattr(figure_layout, "_lay_out", lambda figure: None)  # savefig solves it (drawing once more)
    figure_cache.clear()
    assert render_figure(_results(), "task1_ratings", "png") == solved_beforehand


def _embedded_fonts(pdf: bytes) -> list[TTFont]:
    """The TrueType fonts a PDF embeds: its FontFile2 streams (Flate-compressed), read by fontTools."""
    fonts = []
    for header, body in re.findall(rb"<<([^>]*?/Length1 [^>]*?)>>\s*stream\r?\n(.*?)\r?\nendstream", pdf, re.S):
        data = zlib.decompress(body) if b"/FlateDecode" in header else body
        fonts.append(TTFont(io.BytesIO(data)))
    return fonts


def test_pdfs_embed_their_fonts_as_truetype_without_the_tables_a_pdf_never_uses(caplog):
    figure_cache.clear()
    with caplog.at_level(logging.INFO):
        pdf = render_figure(_results(), "task1_forest", "pdf")
    assert not [record for record in caplog.records if record.name.startswith("fontTools")]  # nothing in the log
    fonts = _embedded_fonts(pdf)

    assert fonts, "no TrueType font embedded"
    assert b"/Subtype /Type3" not in pdf  # Type 42 (TrueType), which journals accept
    for font in fonts:
        assert "glyf" in font and font["maxp"].numGlyphs > 1  # .notdef and the glyphs drawn
        assert not set(LAYOUT_TABLES) & set(font.keys()), sorted(font.keys())


# Run in a fresh interpreter: a test worker has threads (a fork there could deadlock), a command has none.
PARALLEL = """
import sys
import django
django.setup()
from analysis import parallel
from analysis.figure_jobs import render_figures
from tests.analysis.test_figure_cache import _results
pools = []
real_pool = parallel.ProcessPoolExecutor
def pool(*args, **kwargs):
    pools.append(kwargs["max_workers"])
    return real_pool(*args, **kwargs)
parallel.ProcessPoolExecutor = pool
render_figures(_results(), sys.argv[1])
print(pools)
"""


def _drawn_here_and_by(script: str, folder: Path) -> tuple[dict, str]:
    """Every figure drawn in this process, and what a fresh interpreter running `script` printed
    (having written every figure into folder)."""
    results = _results()
    figure_cache.clear()
    here = {name: {fmt: render_figure(results, name, fmt) for fmt in FIGURE_FORMATS} for name in FIGURES}
    figure_cache.clear()
    env = {**os.environ, "DJANGO_SETTINGS_MODULE": "config.settings_test", "PYTHONPATH": str(ROOT)}
    done = subprocess.run(  # noqa: S603 (this interpreter, our own script)
        [sys.executable, "-c", script, str(folder)], env=env, cwd=ROOT, capture_output=True, text=True, check=True
    )
    return here, done.stdout


def _assert_written(folder: Path, drawn: dict) -> None:
    assert sorted(path.name for path in folder.iterdir()) == sorted(f"{n}.{f}" for n in FIGURES for f in FIGURE_FORMATS)
    for name, formats in drawn.items():
        for fmt, data in formats.items():
            assert (folder / f"{name}.{fmt}").read_bytes() == data, (name, fmt)


@pytest.mark.slow  # a fresh interpreter that imports the whole analysis stack
def test_figures_drawn_in_parallel_processes_are_those_drawn_in_this_one(tmp_path):
    here, printed = _drawn_here_and_by(PARALLEL, tmp_path)

    assert printed.strip() == str([min(len(FIGURES), os.cpu_count())]), printed  # forked
    _assert_written(tmp_path, here)


# As manage.py compute_results: the drawing process starts before anything scientific is imported.
EARLY = """
import sys
from functools import partial
import django
django.setup()
from analysis import figure_jobs, parallel
with figure_jobs.drawing_processes():
    assert "matplotlib" not in sys.modules and "scipy" not in sys.modules
    from analysis.figure_jobs import render_figures
    from tests.analysis.test_figure_cache import _results
    results = _results()
    print(parallel.early_processes_started())
    render_figures(results, sys.argv[1])
    # What the processes that drew had imported, asked of each of them (a builtin, pickled by name).
    asked = partial(eval, "sorted({'scipy', 'statsmodels', 'matplotlib'} & set(__import__('sys').modules))")
    print(sorted(set(map(tuple, parallel.run_beside([asked] * 4, [])[0]))))
"""


@pytest.mark.slow  # a fresh interpreter that imports the whole analysis stack
def test_figures_drawn_by_the_processes_started_first_are_those_drawn_in_this_one(tmp_path):
    here, printed = _drawn_here_and_by(EARLY, tmp_path)

    started, imported = printed.strip().splitlines()
    assert started == str(os.cpu_count() > 1)
    if os.cpu_count() > 1:
        assert imported == "[('matplotlib',)]"  # drawn there, without the statistics
    _assert_written(tmp_path, here)


def test_a_png_holds_the_pixels_savefig_draws_in_rgb_at_300_dpi(monkeypatch):
    figure_cache.clear()
    png = render_figure(_results(), "task1_ratings", "png")
    # savefig's own PNG of the same figure, laid out the same way (figure_layout.draw)
    monkeypatch.setattr(figure_layout, "_png", lambda figure: _savefig_png(figure))
    figure_cache.clear()
    reference = render_figure(_results(), "task1_ratings", "png")
    figure_cache.clear()

    ours, theirs = Image.open(io.BytesIO(png)), Image.open(io.BytesIO(reference))
    assert (ours.mode, theirs.mode) == ("RGB", "RGBA")
    assert ours.size == theirs.size and ours.info["dpi"] == pytest.approx((300, 300), abs=0.01)
    assert ours.tobytes() == theirs.convert("RGB").tobytes()
    assert ours.text["Software"] == theirs.text["Software"]
    assert len(png) < len(reference)


def _savefig_png(figure: Figure) -> bytes:
    buffer = io.BytesIO()
    figure.savefig(buffer, format="png", dpi=figure_layout.DPI, pil_kwargs={"compress_level": 3})
    return buffer.getvalue()
