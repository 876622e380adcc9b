"""manage.py compute_results: the worker's computation, run at once (bin/demo uses it)."""

import io

import pytest
from django.core.management import CommandError, call_command

from analysis.services import Scope, results_state
from tests.exports.release_helpers import rated_study

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def results_dir(settings, tmp_path):
    settings.RESULTS_DIR = tmp_path / "results"


def test_it_computes_the_results_the_page_then_shows():
    study = rated_study()
    out = io.StringIO()

    call_command("compute_results", "--study", study.slug, stdout=out)

    state = results_state(study, Scope())
    assert state.is_current
    assert state.document()["counts"]["task1"]["examples"] == 4
    assert f"Computed the results of {study.slug} (all datasets, both tasks)" in out.getvalue()


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--study", "nope"], "No study 'nope'."),
        (["--study", "s1", "--task", "task9"], "task: unknown task 'task9'."),
        (
            ["--study", "s1", "--dataset", "iu-xray"],
            "dataset: the study has no dataset 'iu-xray'. Use one of: mimic-cxr.",
        ),
    ],
)
def test_it_refuses_what_it_cannot_compute_and_writes_nothing(args, message, settings):
    rated_study("s1")

    with pytest.raises(CommandError, match=message.replace("(", r"\(").replace(")", r"\)").replace(".", r"\.")):
        call_command("compute_results", *args)
    assert not settings.RESULTS_DIR.exists()
