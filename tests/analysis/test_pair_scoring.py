"""A drawn sample's pairs are scored once, by the worker, while the study is set up: computing the
results then reads the metric scores back from the cache (analysis.queueing.score_sampled_pairs)."""

import pytest
from django.tasks import default_task_backend

from analysis import computing, metrics
from analysis.tasks import score_pairs_task
from annotation.models import CandidatePair
from annotation.services import SamplingRefused, sample_pairs
from tests.factories import make_pair, make_study

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def no_tasks_queued_before():
    default_task_backend.clear()  # the test settings' DummyBackend keeps what was queued


def _study_with_candidates(slug="scored"):
    study = make_study(slug)
    for i in range(3):
        make_pair(study, study_id=f"5000000{i}", variation="hedging")
    return study


def _queued(study) -> list:
    return [
        result
        for result in default_task_backend.results
        if result.task.func is score_pairs_task.func and result.args == [str(study.public_id)]
    ]


def test_a_drawn_sample_queues_the_scoring_of_its_pairs_once_it_is_committed(django_capture_on_commit_callbacks):
    study = _study_with_candidates()

    with django_capture_on_commit_callbacks(execute=False) as callbacks:
        sample_pairs(study, per_variation=2, seed=1)
    assert _queued(study) == []  # not before the sample is committed
    for callback in callbacks:
        callback()

    assert len(_queued(study)) == 1


def test_a_refused_sample_queues_nothing(django_capture_on_commit_callbacks):
    study = make_study("nothing-to-draw")

    with django_capture_on_commit_callbacks(execute=True), pytest.raises(SamplingRefused):
        sample_pairs(study, per_variation=2, seed=1)

    assert _queued(study) == []


def test_the_task_fills_the_metric_cache_so_computing_the_results_scores_nothing(monkeypatch):
    study = _study_with_candidates()
    sample_pairs(study, per_variation=3, seed=1)
    scored = []
    real_score_chunk = metrics._score_chunk
    monkeypatch.setattr(metrics, "_score_chunk", lambda pairs: scored.extend(pairs) or real_score_chunk(pairs))

    result = score_pairs_task.call(str(study.public_id))

    assert result == {"study": str(study.public_id), "status": "done", "pairs": 3}
    assert len(scored) == 3
    scored.clear()
    scores, _ = computing.study_scores(study)
    assert scored == []  # every pair's scores read back from the cache
    assert len(scores) == 3 * 5 and scores["score"].notna().all()


def test_a_study_gone_before_the_task_ran_is_skipped():
    assert score_pairs_task.call("00000000-0000-0000-0000-000000000000")["status"] == "skipped"


def test_sampling_goes_on_if_the_scoring_cannot_be_queued(monkeypatch, django_capture_on_commit_callbacks, caplog):
    study = _study_with_candidates()

    def refuse(*args):
        raise RuntimeError("queue down")

    monkeypatch.setattr(default_task_backend, "enqueue", refuse)
    with django_capture_on_commit_callbacks(execute=True):
        sample_pairs(study, per_variation=2, seed=1)

    assert CandidatePair.objects.filter(study=study, sampled=True).count() == 2
    assert "Could not queue the metric scores of study scored's sample" in caplog.text
