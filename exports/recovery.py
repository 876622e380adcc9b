"""Builds whose worker is gone: marked Failed, their files removed, the queue's record of their task closed.

A worker killed without a word (kill -9, a machine gone) leaves a build Building, or Queued with its
task taken, for ever; its heartbeats stop. The releases' pages and API and the next build a worker
starts find such builds here. fail_task_result and tasks_taken_and_dropped serve the results
computations (analysis.services) the same way.
"""

import logging
import uuid

from django.db import transaction
from django.db.models import Q
from django.tasks import TaskResultStatus
from django.utils import timezone
from django_tasks_db.models import DBTaskResult

from exports import models as release_models
from exports.building import remove_build_files
from exports.models import Release, ReleaseAction, ReleaseEvent, ReleaseStatus

logger = logging.getLogger("readingroom.exports")


def fail_stale_releases() -> list[Release]:
    """Mark Failed every build whose worker is gone; remove its files.

    Gone: no heartbeat for HEARTBEAT_TIMEOUT while building, or still Queued though a worker took
    its task more than HEARTBEAT_TIMEOUT ago (it died between taking the task and starting the
    build, which no other worker will ever take again). Called when the releases are read (page,
    API) and when a worker starts a build. A build that is alive writes a heartbeat every
    HEARTBEAT_INTERVAL from a thread of its own, however slow its queries, so only a dead worker
    (kill -9, a machine gone) is caught here.
    """
    failed = []
    timeout = release_models.HEARTBEAT_TIMEOUT  # read here: a test may shorten it
    minutes = int(timeout.total_seconds() // 60)
    errors = {
        ReleaseStatus.RUNNING: (
            f"The worker building this release stopped (no sign of life for {minutes} minutes); "
            "its partial files were removed. Build it again."
        ),
        ReleaseStatus.QUEUED: (
            f"The worker that took this build stopped before starting it ({minutes} minutes ago). Build it again."
        ),
    }
    # One query when nothing is stale (every page poll asks); the lock and re-check only when something is.
    queued_long = Q(status=ReleaseStatus.QUEUED, created_at__lt=timezone.now() - timeout)
    candidates = list(
        Release.objects.filter(Q(pk__in=Release.objects.stale().values("pk")) | queued_long).values_list(
            "pk", "status", "task_id"
        )
    )
    if not candidates:
        return []
    dropped = tasks_taken_and_dropped([task_id for _, status, task_id in candidates if status == ReleaseStatus.QUEUED])
    stale = [pk for pk, status, task_id in candidates if status == ReleaseStatus.RUNNING or task_id in dropped]
    if not stale:
        return []
    with transaction.atomic():
        for release in Release.objects.filter(pk__in=stale).select_for_update(skip_locked=True):
            if release.status == ReleaseStatus.RUNNING:
                if not Release.objects.stale().filter(pk=release.pk).exists():
                    continue  # a heartbeat came meanwhile
                detail = f"last heartbeat {release.heartbeat_at}"
            elif release.status == ReleaseStatus.QUEUED and release.task_id in dropped:
                detail = f"task {release.task_id} taken by a worker that never started it"
            else:
                continue
            release.status, release.error, release.finished_at = (
                ReleaseStatus.FAILED,
                errors[release.status],
                timezone.now(),
            )
            release.save(update_fields=["status", "error", "finished_at"])
            ReleaseEvent.objects.create(release=release, action=ReleaseAction.WORKER_LOST, detail=detail)
            fail_task_result(release.task_id, release.error)
            failed.append(release)
    for release in failed:
        when = "before the build started" if release.task_id in dropped else "during the build"
        logger.warning("Release %s: worker lost %s, marked failed", release.public_id, when)
        remove_build_files(release)
    return failed


def tasks_taken_and_dropped(task_ids: list[str]) -> set[str]:
    """Of these task ids, those a worker took more than HEARTBEAT_TIMEOUT ago and still holds as
    running in the queue: a job whose own row still says Queued was never started, its worker died.

    Ids of another backend (the test settings' Dummy, the Immediate backend) are left out.
    """
    ids = {}
    for task_id in task_ids:
        try:
            ids[uuid.UUID(task_id)] = task_id
        except (ValueError, TypeError):
            continue
    if not ids:
        return set()
    taken = DBTaskResult.objects.filter(
        id__in=list(ids),
        status=TaskResultStatus.RUNNING,
        started_at__lt=timezone.now() - release_models.HEARTBEAT_TIMEOUT,
    ).values_list("id", flat=True)
    return {ids[pk] for pk in taken}


def fail_task_result(task_id: str, error: str) -> None:
    """The queue's own record of a job, left "running" by the dead worker (database queue only)."""
    try:
        task_uuid = uuid.UUID(task_id)
    except (ValueError, TypeError):
        return  # no task id, or another backend's (the test settings' Dummy, the Immediate backend)
    DBTaskResult.objects.filter(id=task_uuid, status=TaskResultStatus.RUNNING).update(
        status=TaskResultStatus.FAILED,
        finished_at=timezone.now(),
        exception_class_path="exports.tasks.WorkerLost",
        traceback=error,
    )
