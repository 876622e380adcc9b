"""Results computed on Django's Tasks framework, run by `manage.py db_worker`, never in a web request."""

import logging

from django.tasks import task

from analysis.services import Scope, compute_results, fail_results
from annotation.models import Study

logger = logging.getLogger("readingroom.analysis")


@task()
def compute_results_task(study_public_id: str, dataset: str, task_filter: str, version: str) -> dict:
    """Compute one scope of a study's results (see analysis.services); a failure is written where the page shows it."""
    study = Study.objects.filter(public_id=study_public_id).first()
    if study is None:
        logger.warning("Study %s is gone; no results to compute.", study_public_id)
        return {"study": study_public_id, "status": "skipped"}
    scope = Scope(dataset, task_filter)
    try:
        folder = compute_results(study, scope, requested_version=version)
    except Exception:
        logger.exception("The results of study %s (%s) failed", study.slug, scope.name)
        fail_results(
            study, scope, version, "The computation failed unexpectedly; the error is in the server log. Try again."
        )
        return {"study": study_public_id, "status": "failed"}
    except BaseException:
        fail_results(study, scope, version, "The worker was stopped during the computation. Try again.")
        raise
    return {"study": study_public_id, "status": "done", "version": folder.name}
