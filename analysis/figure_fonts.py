"""The figures' typeface: matplotlib's own DejaVu Sans, cut down to the characters figures use.

A PDF figure embeds the glyphs it shows (TrueType, which journals accept), and matplotlib has fontTools
read and subset the whole font file for every PDF and every weight: for DejaVu Sans (about 6,000
glyphs, and layout tables that are read before they are dropped) that was about a sixth of the time a
figure took in all three formats. Cut to Latin, Greek, punctuation and a few arrows and operators
(BLOCKS: about 700 glyphs, no layout tables), the same glyphs are embedded in a fraction of the time.
Glyphs, advances, kerning and hinting are DejaVu Sans' own, so a figure looks the same (its PNG
differs by sub-pixel shifts in a few places, if at all); a figure with a character outside the cut is
drawn in the whole DejaVu Sans, so nothing goes missing. The cut is renamed
"ReadingRoom Sans" so that it is never mistaken for the whole font (DejaVu's licence allows modified
copies under a name without "Bitstream" or "Vera"; its text is kept beside the files).

The fonts are cut once per machine from the installed matplotlib's files, into matplotlib's cache
folder (a folder per matplotlib version and per CUT), written under a temporary name and renamed, so
that processes starting together never read half a file. Where that folder cannot be written, the
figures use DejaVu Sans as before.
"""

import hashlib
import io
import logging
import os
import tempfile
from collections.abc import Callable
from functools import cache
from pathlib import Path

import matplotlib
from fontTools import subset
from fontTools.ttLib import TTFont
from matplotlib import font_manager, ft2font
from matplotlib.figure import Figure
from matplotlib.text import Text

log = logging.getLogger("readingroom")

FAMILY = "ReadingRoom Sans"
SOURCE_FAMILY = "DejaVu Sans"
WEIGHTS = ("", "-Bold", "-Oblique", "-BoldOblique")
# Characters kept: Basic Latin, Latin-1 Supplement and Latin Extended-A (the taxonomy's and the readers'
# names in European languages), Greek and Coptic, General Punctuation, Superscripts and Subscripts, and a
# few arrows and mathematical operators (minus, approximately, not equal, less and greater or equal,
# infinity). Every glyph kept is read again for every PDF (the subset matplotlib embeds): with Latin
# Extended-B, Currency, Letterlike Symbols, all Arrows, all Mathematical Operators and Geometric Shapes
# (1,478 glyphs) that was a seventh of a figure's time.
BLOCKS = (
    (0x0020, 0x007E), (0x00A0, 0x017F), (0x0370, 0x03FF), (0x2000, 0x206F), (0x2070, 0x209F),
    (0x2190, 0x2195), (0x2212, 0x2212), (0x221E, 0x221E), (0x2248, 0x2248), (0x2260, 0x2265),
)  # fmt: skip
# Bump when the cut changes (BLOCKS, the options, the names): the fonts are cut again.
CUT = 3
# The characters of nearly every figure's text: Basic Latin, and the punctuation, Greek letters and
# operators the results write. A PDF embeds, for each face of the cut it uses, the glyphs of its text:
# where they are all among these, the face's subset to all of them is embedded instead, made once per
# process (common_subset), rather than fontTools subsetting the face again for each PDF (about a
# seventh of a figure's time in three formats). Each such face weighs about 15 kB more in the PDF.
COMMON = "".join(map(chr, range(0x20, 0x7F))) + (
    "\u00a0\u2013\u2014\u2018\u2019\u201c\u201d…\u00d7·°±µαβγδεκλμπρσφχωΔΣ"  # spaces, dashes, quotes, Greek
    "\u2212\u2264\u2265\u2248\u2260\u2190\u2192\u221e"  # minus, comparisons, arrows, infinity
)


def cut_family() -> str | None:
    """FAMILY, its fonts registered with matplotlib (on the first call); None where they cannot be made.

    It is used alone, without matplotlib's font fallback (looking up a chain of families for every
    piece of text cost as much as the cut saved): draw a figure in it only if `covers` it."""
    return FAMILY if _characters() else None


def covers(figure: Figure) -> bool:
    """Whether the cut has every character of every text the figure holds (tick labels that a
    formatter writes while drawing are digits, signs and points, which it has)."""
    characters = _characters()
    return all(ord(character) in characters for text in figure.findobj(Text) for character in text.get_text())


def name_whole_font(figure: Figure) -> None:
    """Set the figure's text in the whole DejaVu Sans and matplotlib's sans-serif fallbacks, as an SVG
    names them for its reader (the glyphs' widths are the cut's: nothing moves)."""
    for text in figure.findobj(Text):
        text.set_fontfamily("sans-serif")


@cache
def _characters() -> frozenset[int]:
    """The characters the cut fonts have (empty if they could not be made), registering them."""
    try:
        paths = cut_fonts(Path(matplotlib.get_cachedir()))
        # Every weight has the same characters (the same blocks cut from fonts that share them).
        characters = frozenset.intersection(*(frozenset(ft2font.FT2Font(str(p)).get_charmap()) for p in paths))
        for path in paths:
            font_manager.fontManager.addfont(str(path))
    except (OSError, RuntimeError) as error:  # RuntimeError: FreeType could not read a file
        log.warning("Figures use the whole DejaVu Sans: its cut could not be written or read (%s).", error)
        return frozenset()
    return characters


def source_folder() -> Path:
    return Path(matplotlib.get_data_path()) / "fonts" / "ttf"


def cut_fonts(cache_folder: Path) -> list[Path]:
    """The cut fonts' files in `cache_folder` (made there if they are not)."""
    sources = [source_folder() / f"DejaVuSans{weight}.ttf" for weight in WEIGHTS]
    version = hashlib.sha256(f"{CUT}|{matplotlib.__version__}".encode()).hexdigest()[:12]
    folder = cache_folder / f"readingroom-fonts-{version}"
    targets = [folder / f"ReadingRoomSans{weight}.ttf" for weight in WEIGHTS]
    missing = [(source, target) for source, target in zip(sources, targets, strict=True) if not _readable(target)]
    if missing:
        folder.mkdir(parents=True, exist_ok=True)
        licence = folder / "LICENSE_DEJAVU"
        if not licence.is_file():
            _write_atomically(licence, (source_folder() / "LICENSE_DEJAVU").read_bytes())
        for source, target in missing:
            _write_atomically(target, cut(source))
    return targets


def common_subset(fontfile: str, characters: str, subsetting: Callable[[str, str], TTFont]) -> TTFont | None:
    """The face of the cut at `fontfile` subset to COMMON by `subsetting` (matplotlib's subsetter: the
    same options as a PDF's own subsets), as a new font for the caller to close; None where the file
    is not a face of the cut or a character is not in COMMON."""
    if Path(fontfile).name not in CUT_NAMES or not set(characters) <= _COMMON_SET:
        return None
    return TTFont(io.BytesIO(_common_bytes(fontfile, subsetting)), recalcTimestamp=False)


CUT_NAMES = frozenset(f"ReadingRoomSans{weight}.ttf" for weight in WEIGHTS)
_COMMON_SET = frozenset(COMMON)


@cache
def _common_bytes(fontfile: str, subsetting: Callable[[str, str], TTFont]) -> bytes:
    with subsetting(fontfile, COMMON) as font:
        font.recalcTimestamp = False  # the same bytes every time
        buffer = io.BytesIO()
        font.save(buffer, reorderTables=False)
    return buffer.getvalue()


def _readable(path: Path) -> bool:
    """Whether a cut font's file is there and reads as a font: one cut short (a disk that filled up
    outside this code, a copy stopped half-way) is made again rather than failing every figure."""
    try:
        return ft2font.FT2Font(str(path)).num_glyphs > 1
    except (OSError, RuntimeError):
        return False


def cut(source: Path) -> bytes:
    """A DejaVu Sans file cut to BLOCKS, without layout tables, renamed to FAMILY (same bytes every time)."""
    options = subset.Options(
        glyph_names=True, notdef_outline=True, name_IDs=["*"], name_languages=["*"], legacy_kern=True
    )
    options.drop_tables += ["GSUB", "GPOS", "GDEF", "FFTM"]
    font = subset.load_font(str(source), options)
    font.recalcTimestamp = False
    subsetter = subset.Subsetter(options=options)
    subsetter.populate(unicodes=[code for low, high in BLOCKS for code in range(low, high + 1)])
    subsetter.subset(font)
    for record in font["name"].names:
        text = record.toUnicode()
        renamed = text.replace(SOURCE_FAMILY, FAMILY).replace(SOURCE_FAMILY.replace(" ", ""), FAMILY.replace(" ", ""))
        if renamed != text:
            record.string = renamed
    buffer = io.BytesIO()
    font.save(buffer)
    return buffer.getvalue()


def _write_atomically(target: Path, data: bytes) -> None:
    descriptor, temporary = tempfile.mkstemp(dir=target.parent, prefix=f".{target.name}.")
    try:
        with os.fdopen(descriptor, "wb") as file:
            file.write(data)
        os.chmod(temporary, 0o644)  # readable like the cache folder's other files
        os.replace(temporary, target)
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise
