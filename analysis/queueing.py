"""Asking the worker for a study's results: a computation queued once per version of its ratings,
and queued again after a failure; and for the metric scores of a study's pairs, once they are sampled.

The Results page, its API and `manage.py compute_results --queue` call these; the worker runs
analysis.tasks; analysis.services holds the state both read and write.
"""

import logging
from functools import partial

from django.db import IntegrityError, transaction
from django.utils import timezone

from analysis.models import ComputationStatus, ResultsComputation
from analysis.services import ResultsState, Scope, forget_lost_results, results_state, scope_computations
from annotation.models import Study

logger = logging.getLogger("readingroom.analysis")


def request_results(study: Study, scope: Scope) -> ResultsState:
    """The scope's state, with a computation queued if its results are not of the current version.

    Queued once per version: the row is unique per (study, scope, version), so two requests at
    the same moment, on any server, enqueue one computation. A failed computation is not retried
    on its own: see retry_results.
    """
    state = forget_lost_results(study, scope, results_state(study, scope))
    if state.is_current or state.status:
        return state
    try:
        with transaction.atomic():
            computation = ResultsComputation.objects.create(
                study=study, dataset=scope.dataset, task=scope.task, version=state.version
            )
    except IntegrityError:
        return results_state(study, scope)
    transaction.on_commit(partial(_enqueue, computation.pk, study, scope, state.version))
    state.status = ComputationStatus.QUEUED
    return state


def retry_results(study: Study, scope: Scope) -> ResultsState:
    """Queue a failed computation of the current version again."""
    state = results_state(study, scope)
    if state.status != ComputationStatus.FAILED:
        return request_results(study, scope)
    failed = scope_computations(study, scope).filter(version=state.version, status=ComputationStatus.FAILED)
    pk = failed.values_list("pk", flat=True).first()
    # Conditional: of two retries at once, one queues it.
    requeued = ResultsComputation.objects.filter(pk=pk, status=ComputationStatus.FAILED).update(
        status=ComputationStatus.QUEUED, progress=0, error="", heartbeat_at=None, task_id="", created_at=timezone.now()
    )
    if requeued:
        transaction.on_commit(partial(_enqueue, pk, study, scope, state.version))
    return results_state(study, scope)


def _enqueue(computation_pk: int, study: Study, scope: Scope, version: str) -> None:
    # Imported when a computation is queued, not when a web process starts: analysis.tasks loads
    # analysis.computing and the scientific stack with it (tests/config/test_startup.py).
    from analysis.tasks import compute_results_task

    try:
        result = compute_results_task.enqueue(str(study.public_id), scope.dataset, scope.task, version)
    except Exception:
        logger.exception("Could not queue the results of study %s (%s)", study.slug, scope.name)
        ResultsComputation.objects.filter(pk=computation_pk, status=ComputationStatus.QUEUED).update(
            status=ComputationStatus.FAILED,
            error="The computation could not be queued (the error is in the server log). Try again later.",
        )
        return
    ResultsComputation.objects.filter(pk=computation_pk).update(task_id=str(result.id))


def score_sampled_pairs(sender, study: Study, **kwargs) -> None:
    """Queue the scoring of a study's newly sampled pairs (annotation.signals.pairs_sampled): the
    built-in metrics are computed once per pair, while the study is set up, and kept in the metric
    cache, where computing the results finds them (at 100,000 pairs of distinct texts scoring takes
    over a minute; reading the scores back, half a second). If it cannot be queued, or has not run
    yet, computing the results scores what is missing itself."""
    from analysis.tasks import score_pairs_task

    try:
        score_pairs_task.enqueue(str(study.public_id))
    except Exception:
        logger.exception("Could not queue the metric scores of study %s's sample", study.slug)
