"""The results' LaTeX tables (analysis.report.latex_table) are written directly, byte for byte as
pandas' to_latex(index=False, escape=True) writes them: for every table of an analysis, for text with
every character LaTeX treats specially (alone, doubled, before a space), and for a table without rows."""

import pandas as pd
from hypothesis import given, settings
from hypothesis import strategies as st

from analysis.report import LATEX_SPECIAL, latex_table, presented_tables
from analysis.results import analyze
from tests.analysis.helpers import make_frames
from tests.hypothesis_profiles import examples

TASK1 = [
    ("structure--structured", "1", "original", (0, 1, 0), None),
    ("structure--structured", "1", "alternative", (1, 2, 0), 1),
    ("negation--implicit", "2", "original", (0, 0), None),
    ("negation--implicit", "2", "alternative", (2, 2), None),
]
TASK2 = [("structure--structured", "1", (0, 1, 1), None), ("negation--implicit", "2", (2, 2), None)]


def pandas_latex(table: dict) -> str:
    """What to_latex writes for the table (the reference)."""
    caption = "".join(LATEX_SPECIAL.get(character, character) for character in table["caption"])
    frame = pd.DataFrame(table["rows"], columns=table["columns"])
    return frame.to_latex(index=False, escape=True, caption=caption, label=f"tab:{table['name']}", position="htbp")


def test_every_table_of_an_analysis_is_written_as_to_latex_writes_it():
    tables = presented_tables(analyze(make_frames(TASK1, TASK2, live=True)).document)

    assert len(tables) > 10
    for table in tables:
        assert latex_table(table) == pandas_latex(table), table["name"]


SPECIAL = "\\&%$#_{}~^ "
text = st.text(alphabet=st.sampled_from([*SPECIAL, "a", "é", "κ", "-", "\n"]), max_size=12)


@settings(max_examples=examples(300))
@given(
    columns=st.lists(text, min_size=1, max_size=4),
    cells=st.lists(st.lists(text, min_size=4, max_size=4), max_size=4),
    caption=text,
)
def test_text_with_the_characters_latex_treats_specially_is_escaped_as_to_latex_escapes_it(columns, cells, caption):
    table = {
        "name": "sample",
        "caption": caption,
        "columns": columns,
        "rows": [row[: len(columns)] for row in cells],
    }
    assert latex_table(table) == pandas_latex(table)


def test_a_table_whose_cells_are_not_all_text_is_written_by_to_latex():
    table = {"name": "counts", "caption": "Counts", "columns": ["Group", "n"], "rows": [["All", 3], ["A_1", 1]]}

    assert latex_table(table) == pandas_latex(table)
    assert "\\begin{tabular}{lr}" in latex_table(table)  # the number's column right-aligned, as pandas does
