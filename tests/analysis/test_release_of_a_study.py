"""analyze() on what build_release writes: the real files, with examples still unfinished."""

import pytest

from analysis.release_folder import read_release
from analysis.results import analyze
from annotation.models import Example, RatingChoice, Task
from exports.building import build_release
from tests.factories import make_reading_study, rate_open_reads

pytestmark = pytest.mark.django_db


def test_a_release_with_unfinished_examples_counts_only_those_with_a_consensus(tmp_path):
    # Enough readers for every third read (the default): realism[1] takes one.
    study, _, _ = make_reading_study(pairs=3)
    realism = list(Example.objects.filter(study=study, task=Task.REALISM).order_by("pk"))
    rate_open_reads(realism[0], RatingChoice.REALISTIC, RatingChoice.REALISTIC)
    rate_open_reads(realism[1], RatingChoice.MINOR_ISSUES, RatingChoice.REALISTIC, RatingChoice.MINOR_ISSUES)
    rate_open_reads(realism[2], RatingChoice.MAJOR_ISSUES)  # one read: no consensus yet
    equivalence = Example.objects.filter(study=study, task=Task.EQUIVALENCE).order_by("pk").first()
    rate_open_reads(equivalence, RatingChoice.EQUIVALENT, RatingChoice.EQUIVALENT)
    build_release(study, tmp_path / "release", license_text="CC BY 4.0\n", include_unfinished=True)

    results = analyze(read_release(tmp_path / "release"))

    assert results.document["counts"]["task1"]["examples"] == 2
    assert results.document["counts"]["task1"]["annotations"] == 5
    assert results.document["counts"]["task2"] == {"examples": 1, "annotations": 2}
    settled = results.tables["disagreement"].set_index(["task", "level"])
    assert settled.loc[("task1", "overall"), ["two_reads_agreed", "third_read_settled"]].tolist() == [1, 1]
