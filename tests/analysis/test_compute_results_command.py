"""manage.py compute_results: the worker's computation, run at once, or queued for the worker (bin/demo)."""

import io
import shutil

import pytest
from django.core.management import CommandError, call_command

from analysis.models import ResultsComputation
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


def test_with_queue_it_asks_the_worker_once_and_computes_nothing_itself(django_capture_on_commit_callbacks):
    study = rated_study()
    out = io.StringIO()

    with django_capture_on_commit_callbacks(execute=True):
        call_command("compute_results", "--study", study.slug, "--queue", stdout=out)
        call_command("compute_results", "--study", study.slug, "--queue", stdout=out)

    state = results_state(study, Scope())
    assert (state.is_current, state.status) == (False, "queued")
    assert ResultsComputation.objects.filter(study=study).count() == 1
    assert (
        out.getvalue().splitlines()
        == [f"The results of {study.slug} (all datasets, both tasks) are queued for the worker."] * 2
    )


def test_results_whose_files_are_gone_are_stored_again_by_the_next_computation(settings):
    study = rated_study()
    call_command("compute_results", "--study", study.slug, stdout=io.StringIO())
    state = results_state(study, Scope())
    shutil.rmtree(settings.RESULTS_DIR / str(study.public_id))  # the folder wiped by hand

    call_command("compute_results", "--study", study.slug, stdout=io.StringIO())

    again = results_state(study, Scope())
    assert again.computed_version == state.computed_version  # the same ratings, the same version
    assert again.document()["counts"]["task1"]["examples"] == 4
