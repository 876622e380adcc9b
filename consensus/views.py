"""The coordinator's pages: progress, people and their workload, unrouted examples, one example, one reader.

Coordinators are not blinded: these pages name readers and say which report is the original.
A coordinator who also reads in the study is refused the pages of the pairs they still have to
rate, and sees those pairs' rows masked in lists (consensus.conflicts).
"""

import uuid
from urllib.parse import urlencode

from django.contrib.auth import get_user_model
from django.core.paginator import Paginator
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, render
from django.views.decorators.http import require_POST

from annotation.decorators import role_required
from annotation.models import Annotation, Assignment, Example, ExampleState, Role, Study, Task
from annotation.roles import enrolment_warning, user_roles
from consensus import progress
from consensus.assignment import (
    QueueRefused,
    add_study_member,
    assign_example,
    assign_readers,
    reassign_assignment,
    withdraw_assignment,
)
from consensus.conflicts import PAIR_HIDDEN, hidden_pair_ids, is_hidden_from, mark_hidden
from consensus.forms import AddMemberForm, AutoAssignForm, ReaderForm, VoidForm, first_error
from consensus.services import NoSuchWork, SubmissionRefused, void_annotation

# htmx swaps 422 responses in place (see the htmx-config meta tag in base.html).
UNPROCESSABLE = 422


@role_required(Role.COORDINATOR)
def study_progress(request: HttpRequest, slug: str) -> HttpResponse:
    study = get_object_or_404(Study, slug=slug)
    context = {
        "study": study,
        "progress": progress.study_progress(study),
        "unassigned": progress.unassigned_examples(study),
    }
    # The table polls this view and swaps in its own fragment.
    template = "consensus/study_progress.html#progress-table" if request.htmx else "consensus/study_progress.html"
    return render(request, template, context)


@role_required(Role.COORDINATOR)
def study_unrouted(request: HttpRequest, slug: str) -> HttpResponse:
    study = get_object_or_404(Study, slug=slug)
    examples = progress.unrouted_examples(study, request.user)
    context = {"study": study, "examples": examples, "unassigned": progress.unassigned_examples(study)}
    return render(request, "consensus/study_unrouted.html", context)


EXAMPLES_PER_PAGE = 50
READER_ROWS_PER_PAGE = 25


@role_required(Role.COORDINATOR)
def study_examples(request: HttpRequest, slug: str) -> HttpResponse:
    """The examples behind a number of the Progress table, a page at a time, each linking to its page."""
    study = get_object_or_404(Study, slug=slug)
    filters = {name: request.GET.get(name, "") for name in ("task", "variation", "state")}
    if filters["task"] not in ["", *Task.values] or filters["state"] not in ["", *progress.EXAMPLE_FILTER_STATES]:
        raise Http404
    page = Paginator(progress.filtered_examples(study, **filters), EXAMPLES_PER_PAGE).get_page(request.GET.get("page"))
    mark_hidden(page.object_list, hidden_pair_ids(request.user, study), "pair_id")
    context = {
        "study": study,
        "page": page,
        "filters": filters,
        "task_label": Task(filters["task"]).label if filters["task"] else "",
        "state_label": _state_label(filters["state"]),
        "query": urlencode({k: v for k, v in filters.items() if v}),
    }
    return render(request, "consensus/study_examples.html", context)


def _state_label(state: str) -> str:
    if state == "unrouted":
        return "waiting for an eligible person"
    return ExampleState(state).label.lower() if state else ""


# --- Members and their workload ------------------------------------------------------------------


def _readers_context(study: Study, **extra) -> dict:
    return {
        "study": study,
        "workload": progress.study_workload(study),
        "member_form": AddMemberForm(study=study),
        "assign_form": AutoAssignForm(),
        "unassigned": progress.unassigned_examples(study),
        **extra,
    }


def _render_readers(request: HttpRequest, study: Study, partial: str, context: dict, *, status: int) -> HttpResponse:
    if request.htmx:
        return render(request, f"consensus/study_readers.html#{partial}", {"study": study, **context}, status=status)
    # Without JavaScript: the whole page, with the result in place.
    return render(request, "consensus/study_readers.html", _readers_context(study, **context), status=status)


@role_required(Role.COORDINATOR)
def study_readers(request: HttpRequest, slug: str) -> HttpResponse:
    study = get_object_or_404(Study, slug=slug)
    return render(request, "consensus/study_readers.html", _readers_context(study))


@require_POST
@role_required(Role.COORDINATOR)
def study_add_member(request: HttpRequest, slug: str) -> HttpResponse:
    study = get_object_or_404(Study, slug=slug)
    form = AddMemberForm(request.POST, study=study)
    if not form.is_valid():
        return _render_readers(request, study, "member-panel", {"member_form": form}, status=UNPROCESSABLE)
    try:
        member = add_study_member(
            study,
            form.cleaned_data["user"],
            form.cleaned_data["role"],
            actor=request.user,
            max_assignments=form.cleaned_data["max_assignments"],
        )
    except QueueRefused as refused:
        context = {"member_form": form, "member_refusal": str(refused)}
        return _render_readers(request, study, "member-panel", context, status=UNPROCESSABLE)
    context = {
        "member_form": AddMemberForm(study=study),
        "member_added": member,
        "member_warning": enrolment_warning(member.user.get_username(), user_roles(member.user)),
        "workload": progress.study_workload(study),
        "unassigned": progress.unassigned_examples(study),  # the minimum beside the Assign form, swapped out of band
    }
    return _render_readers(request, study, "member-panel", context, status=200)


@require_POST
@role_required(Role.COORDINATOR)
def study_assign(request: HttpRequest, slug: str) -> HttpResponse:
    study = get_object_or_404(Study, slug=slug)
    form = AutoAssignForm(request.POST)
    if not form.is_valid():
        return _render_readers(request, study, "assign-panel", {"assign_form": form}, status=UNPROCESSABLE)
    try:
        report = assign_readers(study, actor=request.user, tasks=form.cleaned_data["tasks"] or None)
    except QueueRefused as refused:
        context = {"assign_form": form, "assign_refusal": str(refused)}
        return _render_readers(request, study, "assign-panel", context, status=UNPROCESSABLE)
    context = {
        "assign_form": form,
        "assign_report": report,
        "workload": progress.study_workload(study),
        "unassigned": progress.unassigned_examples(study),  # the minimum above the form, swapped out of band
    }
    return _render_readers(request, study, "assign-panel", context, status=200)


@role_required(Role.COORDINATOR)
def reader_detail(request: HttpRequest, slug: str, username: str) -> HttpResponse:
    study = get_object_or_404(Study, slug=slug)
    user = get_object_or_404(progress.study_members(study), **{get_user_model().USERNAME_FIELD: username})
    detail = progress.reader_detail(
        study,
        user,
        request.user,
        per_page=READER_ROWS_PER_PAGE,
        assignments_page=request.GET.get("assignments"),
        history_page=request.GET.get("history"),
    )
    context = {
        "study": study,
        "detail": detail,
        # Each pager keeps the other's page.
        "assignments_query": urlencode({"history": detail.pages["history"].number}),
        "history_query": urlencode({"assignments": detail.pages["assignments"].number}),
    }
    return render(request, "consensus/reader_detail.html", context)


# --- One example and the coordinator's changes to it --------------------------------------------


def _get_example(study: Study, example_id: uuid.UUID) -> Example:
    return get_object_or_404(progress.study_examples(study), public_id=example_id)


def _hidden(request: HttpRequest, study: Study, example: Example) -> HttpResponse | None:
    """A 403 page if the example's pair is hidden from the user (they still have to rate it), else None."""
    if not is_hidden_from(request.user, example.pair_id):
        return None
    return render(request, "consensus/pair_hidden.html", {"study": study, "message": PAIR_HIDDEN}, status=403)


def _example_context(study: Study, example: Example, **extra) -> dict:
    return {
        "study": study,
        "detail": progress.example_detail(example),
        "readers": list(progress.reader_choices(study)),
        "assign_form": ReaderForm(study=study),
        **extra,
    }


def _render_example(
    request: HttpRequest, study: Study, example: Example, *, status: int = 200, **extra
) -> HttpResponse:
    """The example's work panel (htmx) or whole page after a change; the example is read afresh."""
    example = _get_example(study, example.public_id)
    template = "consensus/example_detail.html#example-work" if request.htmx else "consensus/example_detail.html"
    return render(request, template, _example_context(study, example, **extra), status=status)


def _refused(
    request: HttpRequest, study: Study, example: Example, target: object, message: str, **extra
) -> HttpResponse:
    """The work panel again with the message next to the form it concerns (target: "assign" or a public id)."""
    return _render_example(request, study, example, status=UNPROCESSABLE, error=message, error_for=str(target), **extra)


@role_required(Role.COORDINATOR)
def example_detail(request: HttpRequest, slug: str, example_id: uuid.UUID) -> HttpResponse:
    study = get_object_or_404(Study, slug=slug)
    example = _get_example(study, example_id)
    if refused := _hidden(request, study, example):
        return refused
    return render(request, "consensus/example_detail.html", _example_context(study, example))


@require_POST
@role_required(Role.COORDINATOR)
def example_assign(request: HttpRequest, slug: str, example_id: uuid.UUID) -> HttpResponse:
    study = get_object_or_404(Study, slug=slug)
    example = _get_example(study, example_id)
    if refused := _hidden(request, study, example):
        return refused
    form = ReaderForm(request.POST, study=study)
    if not form.is_valid():
        return _refused(request, study, example, "assign", first_error(form), assign_form=form)
    reader = form.cleaned_data["reader"]
    try:
        assign_example(example.public_id, reader, actor=request.user)
    except QueueRefused as refused:
        return _refused(request, study, example, "assign", str(refused), assign_form=form)
    return _render_example(request, study, example, notice=f"Assigned to {reader.get_username()}.")


def _get_assignment(study: Study, assignment_id: uuid.UUID) -> Assignment:
    return get_object_or_404(
        Assignment.objects.select_related("reader", "example"), public_id=assignment_id, example__study=study
    )


@require_POST
@role_required(Role.COORDINATOR)
def assignment_withdraw(request: HttpRequest, slug: str, assignment_id: uuid.UUID) -> HttpResponse:
    study = get_object_or_404(Study, slug=slug)
    assignment = _get_assignment(study, assignment_id)
    if refused := _hidden(request, study, assignment.example):
        return refused
    try:
        withdraw_assignment(assignment.public_id, actor=request.user)
    except QueueRefused as refused:
        return _refused(request, study, assignment.example, assignment.public_id, str(refused))
    notice = f"Withdrew the assignment of {assignment.reader.get_username()}."
    return _render_example(request, study, assignment.example, notice=notice)


@require_POST
@role_required(Role.COORDINATOR)
def assignment_reassign(request: HttpRequest, slug: str, assignment_id: uuid.UUID) -> HttpResponse:
    study = get_object_or_404(Study, slug=slug)
    assignment = _get_assignment(study, assignment_id)
    if refused := _hidden(request, study, assignment.example):
        return refused
    form = ReaderForm(request.POST, study=study)
    if not form.is_valid():
        return _refused(request, study, assignment.example, assignment.public_id, first_error(form))
    reader = form.cleaned_data["reader"]
    try:
        reassign_assignment(assignment.public_id, reader, actor=request.user)
    except QueueRefused as refused:
        return _refused(request, study, assignment.example, assignment.public_id, str(refused))
    notice = f"Moved the assignment of {assignment.reader.get_username()} to {reader.get_username()}."
    return _render_example(request, study, assignment.example, notice=notice)


@require_POST
@role_required(Role.COORDINATOR)
def annotation_void(request: HttpRequest, slug: str, annotation_id: uuid.UUID) -> HttpResponse:
    study = get_object_or_404(Study, slug=slug)
    annotation = get_object_or_404(
        Annotation.objects.select_related("reader", "example"), public_id=annotation_id, example__study=study
    )
    if refused := _hidden(request, study, annotation.example):
        return refused
    form = VoidForm(request.POST)
    if not form.is_valid():
        return _refused(request, study, annotation.example, annotation.public_id, first_error(form))
    try:
        void_annotation(annotation.public_id, actor=request.user, reason=form.cleaned_data["reason"])
    except (SubmissionRefused, NoSuchWork) as refused:
        message = str(refused) or "This rating no longer exists."
        return _refused(request, study, annotation.example, annotation.public_id, message)
    notice = f"Voided the rating of {annotation.reader.get_username()}; the example is routed again."
    return _render_example(request, study, annotation.example, notice=notice)
