"""A figure's rows line up: in the agreement figure, every row is at one height in each panel of its
task and in the n column beside them, and the column's header is above the rows."""

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


def test_every_row_is_at_one_height_across_its_tasks_panels_and_its_n_column():
    figure = _agreement(analyze(make_frames(*_plan(), live=True)))
    figure.draw_without_rendering()  # the layout solved, as a save does
    panels_per_task = len(LIVE_MEASURES)
    panels, columns = figure.axes[: 2 * panels_per_task], figure.axes[2 * panels_per_task :]
    assert len(columns) == 2  # the n column of each task

    for task in range(2):
        row = panels[task * panels_per_task : (task + 1) * panels_per_task]
        column = columns[task]
        names = row[0]
        ys = [*names.get_yticks(), *names.get_yticks(minor=True)]  # variations and dimensions' headings
        for y in ys:
            heights = {round(_height(axes, y), 6) for axes in [*row, column]}
            assert len(heights) == 1, (task, y, heights)
        *counted, header = column.get_yticks()
        assert sorted(counted) == sorted(ys)  # a place for each row's n (blank for a heading)
        assert column.get_yticklabels()[-1].get_text() == "n"
        top = column.get_window_extent().y1
        assert max(_height(names, y) for y in ys) < _height(column, header) < top
