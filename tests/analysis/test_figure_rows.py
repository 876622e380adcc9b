"""A figure's rows line up: in the agreement figure, every row is at one height in each panel of its
task and in the n column beside them, and the column's header is above the rows."""

from matplotlib.text import Annotation, Text

from analysis.figures import LIVE_MEASURES, _agreement
from analysis.results import analyze
from tests.analysis.helpers import make_frames

VARIATIONS = ("structure--structured", "negation--implicit", "terminology")


def _plan():
    task1, task2 = [], []
    for number, variation in enumerate(VARIATIONS * 4):
        exam = str(number)
        reads = ((0, 0), (0, 1, 1), (1, 1), (2, 1, 2))[number % 4]
        task1 += [(variation, exam, "original", reads, None), (variation, exam, "alternative", reads[::-1], None)]
        task2.append((variation, exam, reads, None))
    return task1, task2


def _height(axes, y: float) -> float:
    return axes.transData.transform((0, y))[1]


def _place(text: Text) -> tuple[float, float]:
    return tuple(text.get_transform().transform(text.get_position()))


def test_every_row_is_at_one_height_across_its_tasks_panels_and_its_n_column():
    figure = _agreement(analyze(make_frames(*_plan(), live=True)))
    figure.draw_without_rendering()  # the layout solved, as a save does
    panels_per_task = len(LIVE_MEASURES)
    assert len(figure.axes) == 2 * panels_per_task  # the n column is text beside the last panel

    for task in range(2):
        row = figure.axes[task * panels_per_task : (task + 1) * panels_per_task]
        names, last = row[0], row[-1]
        ys = [*names.get_yticks(), *names.get_yticks(minor=True)]  # variations and dimensions' headings
        for y in ys:
            heights = {round(_height(axes, y), 6) for axes in row}
            assert len(heights) == 1, (task, y, heights)
        *counted, header = [text for text in last.texts if not isinstance(text, Annotation)]
        assert sorted(text.get_position()[1] for text in counted) == sorted(
            ys
        )  # an n for each row (blank for a heading)
        edge = last.get_window_extent()
        for text in counted:
            x, height = _place(text)
            assert x > edge.x1 and round(height, 6) == round(_height(names, text.get_position()[1]), 6)
        assert header.get_text() == "n"
        assert max(_height(names, y) for y in ys) < _place(header)[1] < edge.y1
