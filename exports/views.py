"""The data manager's pages: queue a release build, watch it, download, retry or delete it."""

import uuid
from collections.abc import Callable

from django.contrib import messages
from django.core.files.storage import storages
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.views.decorators.http import require_POST

from annotation.decorators import role_required
from annotation.models import Role, Study
from exports.building import ReleaseRefused
from exports.downloads import download_response
from exports.forms import ReleaseForm
from exports.models import Release, ReleaseStatus
from exports.recovery import fail_stale_releases
from exports.services import (
    ReleaseConflict,
    delete_release,
    request_release,
    retry_release,
    studies_with_last_release,
    worker_seems_stopped,
)

# htmx swaps 422 responses in place (see the htmx-config meta tag in base.html).
UNPROCESSABLE = 422


@role_required(Role.DATA_MANAGER)
def release_index(request: HttpRequest) -> HttpResponse:
    # Roles are global: a data manager builds releases of every study.
    return render(
        request,
        "exports/release_index.html",
        {"studies": studies_with_last_release(), "worker_stopped": worker_seems_stopped()},
    )


def _releases_context(study: Study, **extra) -> dict:
    # A build whose worker died is marked Failed here at the latest: the list never polls for ever.
    fail_stale_releases()
    releases = list(study.releases.select_related("study", "requested_by", "deleted_by"))
    return {
        "study": study,
        "releases": releases,
        "building": any(release.is_building for release in releases),
        "worker_stopped": worker_seems_stopped(),
        **extra,
    }


@role_required(Role.DATA_MANAGER)
def release_list(request: HttpRequest, slug: str) -> HttpResponse:
    study = get_object_or_404(Study, slug=slug)
    if request.method != "POST":
        if request.htmx and request.htmx.target == "releases":
            # The list polls itself while a build is queued or running.
            return render(request, "exports/release_list.html#release-list", _releases_context(study))
        return render(request, "exports/release_list.html", _releases_context(study, form=ReleaseForm(study=study)))

    form = ReleaseForm(request.POST, study=study)
    queued = None
    if form.is_valid():
        try:
            queued = request_release(study, user=request.user, **form.cleaned_data)
        except ReleaseRefused as refused:
            # Tied to its field when it names one, so the field is marked invalid and described by it.
            form.add_error(refused.field if refused.field in form.fields else None, str(refused))
    if queued is not None and not request.htmx:
        messages.success(request, f"Release {queued.version} is queued; it is listed below as it builds.")
        return redirect("release_list", slug=study.slug)
    if queued is not None:
        form = ReleaseForm(study=study)
    status = UNPROCESSABLE if form.errors else 200
    context = _releases_context(study, form=form, queued=queued)
    template = "exports/release_list.html#release-form" if request.htmx else "exports/release_list.html"
    return render(request, template, context, status=status)


def zip_response(release: Release) -> HttpResponse:
    """The release's zip as a download named <slug>-<version>.zip, for a caller whose access was
    checked; 404 if it is gone from the releases storage (exports.downloads says how it is sent)."""
    storage = storages["releases"]
    if not release.zip_path or not storage.exists(release.zip_path):
        raise Http404("The zip of this release is no longer on the server. Build it again.")
    return download_response(storage, release.zip_path, filename=release.filename, content_type="application/zip")


def _release_action(
    request: HttpRequest, release_id: uuid.UUID, action: Callable[..., Release], done: Callable[[Release], str]
) -> HttpResponse:
    """Retry or delete a build; answer the list (htmx) or go back to the page, saying what happened."""
    release = get_object_or_404(Release.objects.select_related("study"), public_id=release_id)
    study = release.study
    try:
        release = action(release, user=request.user)
    except (ReleaseConflict, ReleaseRefused) as refused:
        if not request.htmx:
            messages.error(request, str(refused))
            return redirect("release_list", slug=study.slug)
        context = _releases_context(study, refusal=str(refused), refused_id=release.public_id)
        return render(request, "exports/release_list.html#release-list", context, status=UNPROCESSABLE)
    notice = done(release)
    if not request.htmx:
        messages.success(request, notice)
        return redirect("release_list", slug=study.slug)
    return render(request, "exports/release_list.html#release-list", _releases_context(study, notice=notice))


@require_POST
@role_required(Role.DATA_MANAGER)
def release_retry(request: HttpRequest, release_id: uuid.UUID) -> HttpResponse:
    return _release_action(request, release_id, retry_release, lambda r: f"Release {r.version} is queued again.")


@require_POST
@role_required(Role.DATA_MANAGER)
def release_delete(request: HttpRequest, release_id: uuid.UUID) -> HttpResponse:
    def done(release: Release) -> str:
        if release.is_done:
            return f"Release {release.version} is deleted; its version stays taken."
        return f"The failed build of {release.version} is deleted; the version is free."

    return _release_action(request, release_id, delete_release, done)


@role_required(Role.DATA_MANAGER)
def release_download(request: HttpRequest, release_id: uuid.UUID) -> HttpResponse:
    release = get_object_or_404(
        Release.objects.select_related("study"),
        public_id=release_id,
        status=ReleaseStatus.DONE,
        deleted_at__isnull=True,
    )
    return zip_response(release)
