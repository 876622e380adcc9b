"""Figures drawn once per content (analysis.figure_cache): the same data gives the cached bytes without
drawing again; other data, another figure or another format is drawn."""

import pytest

from analysis import figure_cache, figures
from analysis.figures import render_figure
from analysis.results import analyze
from tests.analysis.helpers import make_frames


@pytest.fixture
def draws(monkeypatch):
    figure_cache.clear()
    calls = []
    render = figures._render

    def counting(results, name, fmt):
        calls.append((name, fmt))
        return render(results, name, fmt)

    monkeypatch.setattr(figures, "_render", counting)
    yield calls
    figure_cache.clear()


def _results(second_read: int = 0):
    """Two pairs of one variation; the first original's reads are 0, second_read and 0 (third when needed)."""
    first = (0, 0) if second_read == 0 else (0, second_read, 0)
    task1 = [
        ("structure--structured", "1", "original", first, None),
        ("structure--structured", "1", "alternative", (1, 1), None),
        ("structure--structured", "2", "original", (0, 0), None),
        ("structure--structured", "2", "alternative", (2, 2), None),
    ]
    task2 = [("structure--structured", "1", (0, 0), None), ("structure--structured", "2", (1, 1), None)]
    return analyze(make_frames(task1, task2), seed=0)


def test_the_same_tables_give_the_cached_bytes_without_drawing_again(draws):
    first = render_figure(_results(), "task1_ratings", "svg")
    again = render_figure(_results(), "task1_ratings", "svg")

    assert again == first
    assert draws == [("task1_ratings", "svg")]


def test_other_tables_another_figure_or_format_are_drawn(draws):
    render_figure(_results(), "task1_ratings", "svg")
    render_figure(_results(second_read=2), "task1_ratings", "svg")
    render_figure(_results(), "agreement", "svg")
    render_figure(_results(), "task1_ratings", "png")

    assert draws == [("task1_ratings", "svg"), ("task1_ratings", "svg"), ("agreement", "svg"), ("task1_ratings", "png")]


def test_a_cached_figure_is_the_figure_drawn_afresh():
    figure_cache.clear()
    cached = render_figure(_results(), "task1_forest", "svg")
    assert render_figure(_results(), "task1_forest", "svg") == cached
    figure_cache.clear()
    assert render_figure(_results(), "task1_forest", "svg") == cached
