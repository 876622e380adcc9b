"""Results computed on Django's Tasks framework, run by `manage.py db_worker`, never in a web request."""

import logging

from django.tasks import task

from analysis import parallel
from analysis.computing import compute_results, score_pairs
from analysis.models import ComputationStatus, ResultsComputation
from analysis.services import Scope, claim_computation, fail_computation, finish_computation
from annotation.models import Study
from exports.tasks import BuildMonitor

logger = logging.getLogger("readingroom.analysis")


@task()
def compute_results_task(study_public_id: str, dataset: str, task_filter: str, version: str) -> dict:
    """Compute one scope of a study's results (see analysis.services), once: the queued computation
    is claimed first, its progress and heartbeat written while it runs, a failure written on it."""
    study = Study.objects.filter(public_id=study_public_id).first()
    if study is None:
        logger.warning("Study %s is gone; no results to compute.", study_public_id)
        return {"study": study_public_id, "status": "skipped"}
    scope = Scope(dataset, task_filter)
    computation_pk = claim_computation(study, scope, version)
    if computation_pk is None:
        logger.warning("The results of study %s (%s, %s) are not queued (any more).", study.slug, scope.name, version)
        return {"study": study_public_id, "status": "skipped"}
    monitor = BuildMonitor(computation_pk, model=ResultsComputation, running=ComputationStatus.RUNNING, label="Results")
    try:
        # The heartbeat's thread stops while the figures' and fits' processes are forked (analysis.parallel).
        with monitor, parallel.stopped_for_forks(monitor):
            stored = compute_results(study, scope, progress=monitor.progress)
    except Exception:
        logger.exception("The results of study %s (%s) failed", study.slug, scope.name)
        fail_computation(
            computation_pk, "The computation failed unexpectedly; the error is in the server log. Try again."
        )
        return {"study": study_public_id, "status": "failed"}
    except BaseException:
        fail_computation(computation_pk, "The worker was stopped during the computation. Try again.")
        raise
    finish_computation(computation_pk)
    return {"study": study_public_id, "status": "done", "version": stored.rsplit("/", 1)[-1]}


@task()
def score_pairs_task(study_public_id: str) -> dict:
    """Score the built-in metrics of a study's sampled pairs into the metric cache (queued when a
    sample is drawn: analysis.queueing.score_sampled_pairs). Pairs already in the cache are skipped."""
    study = Study.objects.filter(public_id=study_public_id).first()
    if study is None:
        logger.warning("Study %s is gone; no pairs to score.", study_public_id)
        return {"study": study_public_id, "status": "skipped"}
    return {"study": study_public_id, "status": "done", "pairs": score_pairs(study)}
