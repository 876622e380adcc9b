"""The figures' cut of DejaVu Sans (analysis.figure_fonts): DejaVu Sans' own glyphs, advances and
kerning, without layout tables, under its own name, the same bytes every time; embedded in a PDF
figure (the common characters' subset, made once per face, where a PDF shows no other); the whole font
for a figure with a character outside the cut; an SVG names the whole font; a machine where the cut
cannot be written draws with the whole font."""

import logging
from pathlib import Path

import matplotlib
import pytest
from fontTools.pens.recordingPen import RecordingPen
from fontTools.ttLib import TTFont
from matplotlib.backends import _backend_pdf_ps

from analysis import figure_cache, figure_fonts
from analysis.figure_jobs import render_figure
from tests.analysis.test_figure_cache import _embedded_fonts, _results

# Latin, digits, an en dash and a minus sign, a comparison, Greek, an arrow, a dot, an accent
SAMPLE = "Aa9%\u2013\u2212\u2265\u03ba\u03b1\u2192\u00b7\u00e9"


@pytest.fixture(scope="module")
def cut_files(tmp_path_factory):
    return figure_fonts.cut_fonts(tmp_path_factory.mktemp("fonts"))


def _outline(font: TTFont, character: str) -> list:
    pen = RecordingPen()
    font.getGlyphSet()[font.getBestCmap()[ord(character)]].draw(pen)
    return pen.value


def test_the_cut_has_dejavu_sans_glyphs_advances_and_kerning_under_its_own_name(cut_files):
    for weight, path in zip(figure_fonts.WEIGHTS, cut_files, strict=True):
        cut = TTFont(path)
        whole = TTFont(figure_fonts.source_folder() / f"DejaVuSans{weight}.ttf")
        assert not {"GSUB", "GPOS", "GDEF"} & set(cut.keys())
        assert "kern" in cut and "fpgm" in cut  # kerning and hinting kept: text sets and renders as before
        assert 500 < cut["maxp"].numGlyphs < whole["maxp"].numGlyphs / 8
        assert cut["name"].getDebugName(1) == "ReadingRoom Sans"
        assert "DejaVu" not in cut["name"].getDebugName(6) and "Vera" not in cut["name"].getDebugName(4)
        cut_map, whole_map = cut.getBestCmap(), whole.getBestCmap()
        for character in SAMPLE:
            assert _outline(cut, character) == _outline(whole, character), character
            assert cut["hmtx"][cut_map[ord(character)]] == whole["hmtx"][whole_map[ord(character)]], character
        assert ord("Ж") not in cut_map  # Cyrillic is left to the whole font
    assert (cut_files[0].parent / "LICENSE_DEJAVU").read_bytes().startswith(b"Fonts are (c) Bitstream")


def test_the_cut_is_the_same_bytes_every_time_and_made_once(cut_files):
    source = figure_fonts.source_folder() / "DejaVuSans.ttf"
    assert figure_fonts.cut(source) == figure_fonts.cut(source) == cut_files[0].read_bytes()
    made = {path: path.stat().st_mtime_ns for path in cut_files}
    cut_files[1].unlink()
    cut_files[2].write_bytes(cut_files[2].read_bytes()[:5000])  # cut short

    again = figure_fonts.cut_fonts(cut_files[0].parent.parent)

    assert again == cut_files
    assert cut_files[0].stat().st_mtime_ns == made[cut_files[0]]  # kept
    assert cut_files[1].is_file()  # made again
    assert cut_files[2].read_bytes() == figure_fonts.cut(figure_fonts.source_folder() / "DejaVuSans-Oblique.ttf")
    assert not [path for path in cut_files[0].parent.iterdir() if path.name.startswith(".")]  # no temporary left


def test_a_pdf_figure_embeds_the_cut_and_an_svg_names_the_whole_font():
    figure_cache.clear()
    pdf = render_figure(_results(), "task1_forest", "pdf")
    svg = render_figure(_results(), "task1_forest", "svg").decode()

    assert {font["name"].getDebugName(1) for font in _embedded_fonts(pdf)} == {"ReadingRoom Sans"}
    assert "ReadingRoom" not in svg
    assert "font-family: 'DejaVu Sans'," in svg and "sans-serif" in svg


def test_a_figure_with_a_character_outside_the_cut_is_drawn_in_the_whole_font(caplog):
    figure_cache.clear()
    with caplog.at_level(logging.WARNING):
        pdf = render_figure(_results(label="Структура: structured"), "task1_forest", "pdf")

    fonts = _embedded_fonts(pdf)
    assert {font["name"].getDebugName(1) for font in fonts} == {"DejaVu Sans"}
    assert any(ord("\u0421") in font.getBestCmap() for font in fonts)  # the label's first letter
    assert not [record for record in caplog.records if "missing from font" in record.getMessage()]


def test_where_the_cut_cannot_be_written_figures_use_the_whole_font(tmp_path, monkeypatch, caplog):
    blocked = tmp_path / "a file, not a folder"
    blocked.write_text("")
    monkeypatch.setattr(matplotlib, "get_cachedir", lambda: str(blocked))
    figure_fonts._characters.cache_clear()
    figure_cache.clear()
    try:
        with caplog.at_level(logging.WARNING, logger="readingroom"):
            assert figure_fonts.cut_family() is None
            pdf = render_figure(_results(), "task1_forest", "pdf")
    finally:
        figure_fonts._characters.cache_clear()
        figure_cache.clear()

    assert {font["name"].getDebugName(1) for font in _embedded_fonts(pdf)} == {"DejaVu Sans"}
    assert "Figures use the whole DejaVu Sans: its cut could not be written or read" in caplog.text


def test_a_pdf_whose_text_is_all_common_embeds_the_common_subset_made_once_per_face(monkeypatch):
    made = []
    subsetting = _backend_pdf_ps.get_glyphs_subset

    def counting(fontfile, characters):
        made.append((Path(fontfile).name, characters))
        return subsetting(fontfile, characters)

    monkeypatch.setattr(_backend_pdf_ps, "get_glyphs_subset", counting)
    figure_fonts._common_bytes.cache_clear()
    figure_cache.clear()
    try:
        first = render_figure(_results(), "task1_forest", "pdf")
        second = render_figure(_results(label="Structure: free text"), "task1_forest", "pdf")
    finally:
        figure_fonts._common_bytes.cache_clear()
        figure_cache.clear()

    assert first != second
    # One subset per face, to every common character, for both PDFs.
    assert made and all(characters == figure_fonts.COMMON for _, characters in made)
    assert len({name for name, _ in made}) == len(made)
    for pdf in (first, second):
        for font in _embedded_fonts(pdf):
            assert set(font.getBestCmap()) == {ord(c) for c in figure_fonts.COMMON}, font["name"].getDebugName(4)


def test_a_pdf_with_a_character_of_the_cut_outside_the_common_ones_embeds_a_subset_holding_it():
    figure_cache.clear()
    label = "Struktura: Žádná"  # Ž and á: in the cut (Latin Extended-A, Latin-1), not common
    pdf = render_figure(_results(label=label), "task1_forest", "pdf")
    figure_cache.clear()

    fonts = _embedded_fonts(pdf)
    assert {font["name"].getDebugName(1) for font in fonts} == {"ReadingRoom Sans"}
    assert not set("Žá") & set(figure_fonts.COMMON)
    [holding] = [font.getBestCmap() for font in fonts if ord("Ž") in font.getBestCmap()]
    assert ord("á") in holding
    assert len(holding) < len(figure_fonts.COMMON) / 2  # a subset for this PDF: only what it shows
