"""Release builds in the background: requested, retried and deleted by the data manager.

A build runs in the worker (exports.tasks, `manage.py db_worker`), never in a web request: a
request stores the Release and queues its task once the transaction commits. What a build
writes is exports.building; what happens to a build whose worker died, exports.recovery.
"""

import logging
from datetime import timedelta
from functools import partial

from django.contrib.auth.models import AbstractBaseUser
from django.core.files.storage import storages
from django.db import IntegrityError, transaction
from django.db.models import Count, OuterRef, Subquery
from django.tasks import TaskResultStatus
from django.utils import timezone
from django_tasks_db.models import DBTaskResult

from annotation.models import Example, ExampleState, Study
from exports.building import ReleaseRefused, check_guide_option, check_release_options
from exports.models import Release, ReleaseAction, ReleaseEvent, ReleaseStatus
from exports.tasks import build_release_task

logger = logging.getLogger("readingroom.exports")


class ReleaseConflict(Exception):
    """The release is not in a state that allows this (e.g. delete while building); nothing changed."""


def next_free_version(study: Study, version: str) -> str:
    """The first version after this one, counting up its last number, that no build of the study holds."""
    parts = version.split(".")
    held = Release.objects.filter(study=study).exclude(status=ReleaseStatus.FAILED)
    taken = set(held.values_list("version", flat=True))
    number = int(parts[-1])
    while True:
        number += 1
        candidate = ".".join([*parts[:-1], str(number)])
        if candidate not in taken:
            return candidate


def _version_taken(study: Study, version: str) -> ReleaseRefused:
    return ReleaseRefused(
        f"Version {version} of {study.slug} is already built or building, and a version names one content "
        f"for ever (even once its zip is deleted; only a failed build gives it back). "
        f"Use the next free version, {next_free_version(study, version)}.",
        field="version",
    )


def request_release(
    study: Study,
    *,
    user: AbstractBaseUser | None,
    version: str,
    datasets: list[str] | None,
    include_unfinished: bool,
    license_text: str,
    include_guide: bool = False,
    include_judges: bool = False,
    enqueue: bool = True,
) -> Release:
    """Queue a release build of a study; the worker (manage.py db_worker) builds it, never a request.

    Bad options are refused at once with ReleaseRefused (the same checks as build_release) and
    nothing is stored; so is a version the study already has (built, building, or built and
    deleted), naming the next free one. The database holds that rule too (a partial unique
    constraint), so two requests racing for one version cannot both win. The build is enqueued
    when the transaction commits, so the worker never looks for a Release row that is not there
    yet. enqueue=False reserves the version for a build run in this process (export_release).
    """
    datasets = check_release_options(version=version, license_text=license_text, datasets=datasets)
    if include_guide:
        check_guide_option(study)
    limit = Release._meta.get_field("version").max_length
    if len(version) > limit:
        raise ReleaseRefused(f"Version '{version}' is longer than {limit} characters.", field="version")
    if Release.objects.holding_version(study, version).exists():
        raise _version_taken(study, version)
    try:
        with transaction.atomic():
            release = Release.objects.create(
                study=study,
                requested_by=user,
                version=version,
                datasets=datasets,
                include_unfinished=include_unfinished,
                include_guide=include_guide,
                include_judges=include_judges,
                license_text=license_text,
            )
            _record(release, ReleaseAction.REQUESTED, user)
            if enqueue:
                transaction.on_commit(partial(_enqueue_build, release.pk, str(release.public_id)))
    except IntegrityError:
        if Release.objects.holding_version(study, version).exists():
            raise _version_taken(study, version) from None
        raise
    return release


def retry_release(release: Release, *, user: AbstractBaseUser) -> Release:
    """Queue a failed build again, with the same options and version (if no other build took it since)."""
    try:
        with transaction.atomic():
            locked = Release.objects.select_for_update().select_related("study").get(pk=release.pk)
            if not locked.can_retry:
                raise ReleaseConflict(
                    f"Release {locked.version} is {locked.get_status_display().lower()}"
                    f"{' and deleted' if locked.is_deleted else ''}: only a failed build can be built again."
                )
            Release.objects.filter(pk=locked.pk).update(
                status=ReleaseStatus.QUEUED, progress=0, error="", finished_at=None, heartbeat_at=None, task_id=""
            )
            _record(locked, ReleaseAction.RETRIED, user, detail=locked.error)
            transaction.on_commit(partial(_enqueue_build, locked.pk, str(locked.public_id)))
    except IntegrityError:
        raise _version_taken(release.study, release.version) from None
    locked.refresh_from_db()
    return locked


def delete_release(release: Release, *, user: AbstractBaseUser) -> Release:
    """Delete a finished build's zip from the releases storage. The row stays, marked deleted (by whom, when).

    A built version stays taken after its zip is deleted: a later build of the same version could
    hold other content under the same name. Nothing is ever deleted otherwise (no pruning).
    """
    with transaction.atomic():
        locked = Release.objects.select_for_update().get(pk=release.pk)
        if locked.is_deleted:
            raise ReleaseConflict(f"Release {locked.version} was already deleted.")
        if locked.is_building:
            raise ReleaseConflict(
                f"Release {locked.version} is still {locked.get_status_display().lower()}: "
                "delete it once it is done or has failed."
            )
        Release.objects.filter(pk=locked.pk).update(deleted_at=timezone.now(), deleted_by=user, zip_path="")
        _record(locked, ReleaseAction.DELETED, user, detail=locked.zip_path)
        if locked.zip_path:
            # After the commit: a rolled-back deletion must not lose the file.
            transaction.on_commit(partial(storages["releases"].delete, locked.zip_path))
    locked.refresh_from_db()
    return locked


def _record(release: Release, action: str, user: AbstractBaseUser | None, *, detail: str = "") -> None:
    actor = user if user is not None and user.is_authenticated else None
    ReleaseEvent.objects.create(release=release, action=action, actor=actor, detail=detail)


def _enqueue_build(release_pk: int, public_id: str) -> None:
    try:
        result = build_release_task.enqueue(public_id)
    except Exception:
        # Otherwise the release would wait for ever in the list: say so there instead.
        logger.exception("Could not queue the build of release %s", public_id)
        Release.objects.filter(pk=release_pk, status=ReleaseStatus.QUEUED).update(
            status=ReleaseStatus.FAILED,
            error="The build could not be queued (the error is in the server log). Try again later.",
            finished_at=timezone.now(),
        )
        return
    Release.objects.filter(pk=release_pk).update(task_id=str(result.id))


# A task that has waited this long while none runs means no worker is taking tasks.
WORKER_SILENCE = timedelta(minutes=1)


def worker_seems_stopped() -> bool:
    """True when a background task (a release build, a results computation) has waited more than
    WORKER_SILENCE to start while none is running: the worker process is not running.

    The worker leaves no other trace, so this can tell only once something waits for it.
    """
    waiting = DBTaskResult.objects.filter(
        status=TaskResultStatus.READY, run_after__lte=timezone.now() - WORKER_SILENCE
    ).exists()
    return waiting and not DBTaskResult.objects.filter(status=TaskResultStatus.RUNNING).exists()


def studies_with_last_release() -> list[Study]:
    """Every study with its reading state (examples, with a consensus) and its last release build.

    One query: counts and the last build are subqueries, so the rows do not multiply.
    """
    examples = Example.objects.filter(study=OuterRef("pk")).order_by().values("study")
    last = Release.objects.filter(study=OuterRef("pk"), deleted_at__isnull=True).order_by("-created_at", "-pk")
    studies = Study.objects.annotate(
        n_examples=Subquery(examples.annotate(n=Count("pk")).values("n")[:1]),
        n_consensus=Subquery(examples.filter(state=ExampleState.CONSENSUS).annotate(n=Count("pk")).values("n")[:1]),
        last_version=Subquery(last.values("version")[:1]),
        last_status=Subquery(last.values("status")[:1]),
        last_release_at=Subquery(last.values("created_at")[:1]),
    ).order_by("name")
    studies = list(studies)
    for study in studies:
        study.last_status_label = ReleaseStatus(study.last_status).label if study.last_status else ""
    return studies
