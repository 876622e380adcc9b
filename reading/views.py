"""The reader's and the adjudicator's pages: their queues, the reading and adjudication pages, undo,
the reader guide and the practice round."""

import uuid
from urllib.parse import urlencode

from django.contrib import messages
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.urls import reverse
from django.utils.http import url_has_allowed_host_and_scheme
from django.views.decorators.http import require_POST
from django_htmx.http import HttpResponseClientRedirect, push_url, reswap, retarget

from annotation.decorators import role_required
from annotation.forms import (
    ConfirmGuideForm,
    RatingForm,
)
from annotation.guide import (
    GuideRefused,
    confirm_guide,
    guide_changes,
    guide_status,
    needs_confirmation,
    render_guide,
)
from annotation.models import (
    Assignment,
    AssignmentStatus,
    GuideVersion,
    PracticeAttempt,
    RatingChoice,
    Role,
    Study,
    Task,
)
from annotation.practice import (
    PendingStep,
    PracticeRefused,
    next_practice,
    pending_step,
    practice_reading_item,
    practice_required,
    show_practice,
    submit_practice,
)
from annotation.reading import (
    home_studies,
    queue_position,
    reading_item,
    saved_notice,
    taken_back_rating,
)
from annotation.roles import has_role
from consensus import reserve
from consensus.adjudication import adjudication_queue, adjudication_queues, prior_ratings
from consensus.models import Adjudication, AdjudicationStatus
from consensus.services import (
    AlreadySubmitted,
    NoSuchWork,
    NotShownYet,
    SubmissionRefused,
    UndoRefused,
    show_adjudication,
    show_assignment,
    submit_adjudication,
    submit_annotation,
    undo_last_rating,
)

# htmx swaps 422 responses in place (see the htmx-config meta tag in base.html).
UNPROCESSABLE = 422


def _reading_context(request: HttpRequest, assignment: Assignment, form: RatingForm | None = None, **extra) -> dict:
    example = assignment.example
    position = queue_position(assignment)
    taken_back = None
    if form is None and assignment.status == AssignmentStatus.OPEN:
        # A rating the reader took back fills the form again, to change and submit.
        taken_back = taken_back_rating(assignment)
        form = RatingForm(task=example.task, initial={"form_token": uuid.uuid4(), **(taken_back or {})})
    stored = getattr(assignment, "annotation", None) if assignment.status != AssignmentStatus.OPEN else None
    extra.setdefault("saved_notice", saved_notice(request.user))
    return {
        "assignment": assignment,
        "item": reading_item(example, report_a_type=assignment.report_a_type),
        "form": form,
        "stored": stored,
        "taken_back": taken_back,
        "position": position,
        "next_url": reverse("reading_next", args=[example.study.slug, example.task]),
        **extra,
    }


def _own_assignment(request: HttpRequest, assignment_id: uuid.UUID) -> Assignment:
    return get_object_or_404(Assignment.objects.visible_to(request.user), public_id=assignment_id)


@role_required(Role.READER, Role.ADJUDICATOR)
def reader_home(request: HttpRequest) -> HttpResponse:
    queues = []
    if has_role(request.user, Role.READER):
        queues = reserve.reader_queues(request.user)
    adjudicates = has_role(request.user, Role.ADJUDICATOR)
    adjudications = adjudication_queues(request.user) if adjudicates else []
    studies = home_studies(queues, adjudications)
    context = {"studies": studies, "adjudicates": adjudicates, "saved_notice": saved_notice(request.user)}
    return render(request, "reading/reader_home.html", context)


@role_required(Role.ADJUDICATOR)
def adjudication_next(request: HttpRequest, slug: str) -> HttpResponse:
    """The adjudicator's next open adjudication in a study, or home when none waits."""
    study = get_object_or_404(
        Study.objects.filter(examples__adjudications__adjudicator=request.user).distinct(), slug=slug
    )
    following = adjudication_queue(request.user, study_id=study.pk)["next"]
    if following is None:
        messages.success(request, f"No adjudication is waiting for you in {study.name} now. Thank you.")
        return redirect("reader_home")
    return redirect("adjudication_page", following.public_id)


@role_required(Role.READER)
def reading_next(request: HttpRequest, slug: str, task: str) -> HttpResponse:
    # A study the reader has no part in is a 404, exactly like one that does not exist.
    study = get_object_or_404(Study.objects.of_reader(request.user), slug=slug)
    if task not in Task.values:
        raise Http404
    if first := _pending_step_redirect(request, study, task):
        return first
    assignment = reserve.next_assignment(request.user, task=task, study_id=study.pk)
    if assignment is None:
        messages.success(
            request,
            f"Nothing is waiting for you in {Task(task).label} now. More items may come as the study goes on. "
            "Thank you.",
        )
        return redirect("reader_home")
    return redirect("reading_page", assignment.public_id)


@role_required(Role.READER)
def reading_page(request: HttpRequest, assignment_id: uuid.UUID) -> HttpResponse:
    assignment = _own_assignment(request, assignment_id)
    if request.method == "POST":
        return _submit_rating(request, assignment)
    if assignment.status == AssignmentStatus.OPEN:
        if first := _pending_step_redirect(request, assignment.example.study, assignment.task):
            return first
        show_assignment(assignment)
    template = "reading/reading.html"
    if request.htmx and not request.htmx.history_restore_request:
        return render(request, template + "#reading-panel", _reading_context(request, assignment))
    context = _reading_context(request, assignment, guide_html=_guide_html(assignment.example.study))
    return render(request, template, context)


def _submit_rating(request: HttpRequest, assignment: Assignment) -> HttpResponse:
    form = RatingForm(request.POST, task=assignment.example.task)
    panel = "reading/reading.html#reading-panel" if request.htmx else "reading/reading.html"
    if not form.is_valid():
        return render(request, panel, _reading_context(request, assignment, form), status=UNPROCESSABLE)
    try:
        result = submit_annotation(
            reader=request.user,
            assignment_id=assignment.public_id,
            rating=form.cleaned_data["rating"],
            rationale=form.cleaned_data["rationale"],
            form_token=form.cleaned_data["form_token"],
            # As in the API: a rating of an item the page never showed has no time on task.
            require_shown=True,
        )
    except NotShownYet:
        # This answer shows the item, so its time on task starts now; the reader rates it again.
        show_assignment(assignment)
        form.add_error(None, "This item had not been opened, so the rating was not stored. Read it and rate it again.")
        return render(request, panel, _reading_context(request, assignment, form), status=UNPROCESSABLE)
    except AlreadySubmitted:
        assignment = _own_assignment(request, assignment.public_id)
        context = _reading_context(request, assignment, notice="This example was already rated (in another tab?).")
        return render(request, panel, context, status=409)
    except SubmissionRefused as refused:
        form.add_error(refused.field, str(refused))
        return render(request, panel, _reading_context(request, assignment, form), status=UNPROCESSABLE)
    except NoSuchWork:
        raise Http404 from None

    example = assignment.example
    # The guide changed meanwhile: the reader sees what changed and confirms it before the next item.
    if first := _pending_step_redirect(request, example.study, example.task):
        return first
    following = reserve.next_assignment(request.user, task=example.task, study_id=example.study_id)
    if not request.htmx:
        return redirect("reading_page", following.public_id) if following else redirect("reader_home")
    notice = saved_notice(request.user, saved=result.annotation)
    if following is None:
        context = {"task_label": Task(example.task).label, "saved_notice": notice}
        response = render(request, "reading/reading.html#queue-done", context)
        return push_url(response, reverse("reader_home"))
    show_assignment(following)
    context = _reading_context(request, following, saved_notice=notice)
    response = render(request, "reading/reading.html#reading-panel", context)
    return push_url(response, reverse("reading_page", args=[following.public_id]))


@require_POST
@role_required(Role.READER)
def reading_undo(request: HttpRequest) -> HttpResponse:
    """Take back the reader's last rating and return them to its item, its form filled with what they sent."""
    try:
        result = undo_last_rating(request.user)
    except UndoRefused as refused:
        if not request.htmx:
            messages.error(request, str(refused))
            return redirect("reader_home")
        return render(request, "reading/_saved_notice.html", {"refusal": str(refused)}, status=409)
    assignment = _own_assignment(request, result.assignment.public_id)
    # The guide changed meanwhile (or practice became due): that step comes first, as before any item.
    taken_back = "Your rating was taken back. The item waits first in your queue."
    if first := _pending_step_redirect(request, assignment.example.study, assignment.task, done=taken_back):
        return first
    if not request.htmx:
        return redirect("reading_page", assignment.public_id)
    context = _reading_context(request, assignment, saved_notice=None)
    response = render(request, "reading/reading.html#reading-panel", context)
    # The button sits in the notice, which a refusal replaces; the item replaces the whole panel.
    response = reswap(retarget(response, "#reading"), "outerHTML settle:0ms")
    return push_url(response, reverse("reading_page", args=[assignment.public_id]))


# --- Adjudication -----------------------------------------------------------------------------


def _own_adjudication(request: HttpRequest, adjudication_id: uuid.UUID) -> Adjudication:
    return get_object_or_404(
        Adjudication.objects.select_related("example__pair", "example__study"),
        public_id=adjudication_id,
        adjudicator=request.user,
    )


def _adjudication_context(adjudication: Adjudication, form: RatingForm | None = None, **extra) -> dict:
    queue = adjudication_queue(adjudication.adjudicator, study_id=adjudication.example.study_id)
    is_open = adjudication.status == AdjudicationStatus.OPEN
    if form is None and is_open:
        form = RatingForm(task=adjudication.task, initial={"form_token": uuid.uuid4()})
    return {
        "adjudication": adjudication,
        "item": reading_item(adjudication.example, report_a_type=adjudication.report_a_type),
        "priors": prior_ratings(adjudication),
        "form": form if is_open else None,
        "position": queue["done"] + (1 if is_open else 0),
        "total": queue["total"],
        "decided": queue["done"],  # the bar fills as adjudications are decided, not as they are opened
        **extra,
    }


@role_required(Role.ADJUDICATOR)
def adjudication_page(request: HttpRequest, adjudication_id: uuid.UUID) -> HttpResponse:
    adjudication = _own_adjudication(request, adjudication_id)
    panel = "reading/adjudication.html#reading-panel" if request.htmx else "reading/adjudication.html"
    if request.method == "POST":
        form = RatingForm(request.POST, task=adjudication.task)
        if not form.is_valid():
            return render(request, panel, _adjudication_context(adjudication, form), status=UNPROCESSABLE)
        try:
            submit_adjudication(
                adjudicator=request.user,
                adjudication_id=adjudication.public_id,
                rating=form.cleaned_data["rating"],
                rationale=form.cleaned_data["rationale"],
                form_token=form.cleaned_data["form_token"],
                require_shown=True,
            )
        except NotShownYet:
            # As on the reading page: this answer shows the adjudication; the adjudicator decides again.
            adjudication = show_adjudication(adjudication)
            form.add_error(
                None, "This adjudication had not been opened, so the decision was not stored. Read it and decide again."
            )
            return render(request, panel, _adjudication_context(adjudication, form), status=UNPROCESSABLE)
        except AlreadySubmitted:
            adjudication = _own_adjudication(request, adjudication_id)
            context = _adjudication_context(adjudication, notice="This example was already adjudicated.")
            return render(request, panel, context, status=409)
        except SubmissionRefused as refused:
            form.add_error(refused.field, str(refused))
            return render(request, panel, _adjudication_context(adjudication, form), status=UNPROCESSABLE)
        except NoSuchWork:
            raise Http404 from None
        following = adjudication_queue(request.user, study_id=adjudication.example.study_id)["next"]
        if following is None:
            if not request.htmx:
                return redirect("reader_home")
            response = render(request, "reading/reading.html#queue-done", {"task_label": "adjudication"})
            return push_url(response, reverse("reader_home"))
        if not request.htmx:
            return redirect("adjudication_page", following.public_id)
        following = show_adjudication(_own_adjudication(request, following.public_id))
        response = render(request, panel, _adjudication_context(following))
        return push_url(response, reverse("adjudication_page", args=[following.public_id]))
    if adjudication.status == AdjudicationStatus.OPEN:
        study = adjudication.example.study
        if needs_confirmation(request.user, study):
            messages.info(request, "Read the study's guide and confirm it before adjudicating.")
            return redirect(
                reverse("reader_guide", args=[study.slug]) + "?" + urlencode({"next": request.get_full_path()})
            )
        show_adjudication(adjudication)
    if request.htmx and not request.htmx.history_restore_request:
        return render(request, panel, _adjudication_context(adjudication))
    context = _adjudication_context(adjudication, guide_html=_guide_html(adjudication.example.study))
    return render(request, "reading/adjudication.html", context)


# --- The reader guide and the practice round -----------------------------------------------------


def _guide_html(study: Study) -> str | None:
    """The study's current guide, rendered, for the panel of reading pages (no query without a guide)."""
    if not study.guide_number:
        return None
    current = GuideVersion.objects.current(study)
    return render_guide(current.text) if current else None


def _pending_step_redirect(request: HttpRequest, study: Study, task: str, *, done: str = "") -> HttpResponse | None:
    """What comes before the reader's next item of a study's task (its guide to confirm, or a
    practice round), as a redirect there that says why (after done, what was just done, if given);
    by the client for htmx, which would otherwise swap the whole page into its panel. None when
    nothing comes first."""
    step = pending_step(request.user, study, task)
    if step is None:
        return None
    if done:
        messages.success(request, done)
    messages.info(request, step.detail)
    url = _step_url(step, study, task)
    return HttpResponseClientRedirect(url) if request.htmx else redirect(url)


def _step_url(step: PendingStep, study: Study, task: str, *, then: str = "") -> str:
    """Where a reader goes for a pending step (the guide, or the practice round of a task)."""
    if step.kind == "guide":
        return reverse("reader_guide", args=[study.slug]) + "?" + urlencode({"next": then or task})
    return reverse("practice_next", args=[study.slug, task])


def _after_guide_url(request: HttpRequest, study: Study) -> str:
    then = request.POST.get("next") or request.GET.get("next") or ""
    if then in Task.values:
        return reverse("reading_next", args=[study.slug, then])
    if then.startswith("/") and url_has_allowed_host_and_scheme(then, allowed_hosts={request.get_host()}):
        return then
    return reverse("reader_home")


@role_required(Role.READER, Role.ADJUDICATOR)
def reader_guide(request: HttpRequest, slug: str) -> HttpResponse:
    """The study's guide for a reader: read it (with what changed since the version they
    confirmed) and confirm it."""
    study = get_object_or_404(Study.objects.of_reader(request.user), slug=slug)
    status = guide_status(request.user, study)
    if status.current is None:
        raise Http404
    form = ConfirmGuideForm(request.POST or None, initial={"version": status.current.number})
    problem = ""
    if request.method == "POST" and form.is_valid():
        try:
            confirm_guide(request.user, study, form.cleaned_data["version"])
        except GuideRefused as refused:
            problem = str(refused)
            form = ConfirmGuideForm(initial={"version": status.current.number})
        else:
            messages.success(request, f"You confirmed version {status.current.number} of the guide.")
            return redirect(_after_guide_url(request, study))
    changes = None
    if status.needs_confirmation and status.confirmed is not None:
        changes = guide_changes(status.confirmed.text, status.current.text)
    context = {
        "study": study,
        "guide": status.current,
        "guide_html": render_guide(status.current.text),
        "confirmed": status.confirmed,
        "needs_confirmation": status.needs_confirmation,
        "changes": changes,
        "form": form,
        "problem": problem,
        "next": request.POST.get("next") or request.GET.get("next") or "",
        "back_url": _after_guide_url(request, study),
    }
    return render(request, "reading/reader_guide.html", context, status=409 if problem else 200)


def _own_practice(request: HttpRequest, attempt_id: uuid.UUID) -> PracticeAttempt:
    return get_object_or_404(
        PracticeAttempt.objects.select_related("item", "study"), public_id=attempt_id, reader=request.user
    )


@role_required(Role.READER)
def practice_next(request: HttpRequest, slug: str, task: str) -> HttpResponse:
    study = get_object_or_404(Study.objects.of_reader(request.user), slug=slug)
    if task not in Task.values:
        raise Http404
    step = pending_step(request.user, study, task)
    if step is not None and step.kind == "guide":
        return redirect(_step_url(step, study, task))
    attempt = next_practice(request.user, study, task)
    if attempt is None:
        return redirect("reading_next", study.slug, task)
    return redirect("practice_page", attempt.public_id)


def _practice_context(attempt: PracticeAttempt, form: RatingForm | None = None, **extra) -> dict:
    if form is None and not attempt.is_rated:
        form = RatingForm(task=attempt.task, initial={"form_token": uuid.uuid4()})
    remaining = practice_required(attempt.reader, attempt.study, attempt.task)
    return {
        "attempt": attempt,
        "study": attempt.study,
        "item": practice_reading_item(attempt),
        "form": None if attempt.is_rated else form,
        "remaining": remaining,
        "reference_label": RatingChoice(attempt.item.reference_rating).label,
        "next_url": reverse("practice_next", args=[attempt.study.slug, attempt.task]),
        **extra,
    }


@role_required(Role.READER)
def practice_page(request: HttpRequest, attempt_id: uuid.UUID) -> HttpResponse:
    """A practice item, on the same page as real items; after the rating, the reference and why."""
    attempt = _own_practice(request, attempt_id)
    panel = "reading/practice.html#reading-panel" if request.htmx else "reading/practice.html"
    if request.method == "POST":
        form = RatingForm(request.POST, task=attempt.task)
        if not form.is_valid():
            return render(request, panel, _practice_context(attempt, form), status=UNPROCESSABLE)
        try:
            attempt, _ = submit_practice(
                reader=request.user,
                attempt_id=attempt.public_id,
                rating=form.cleaned_data["rating"],
                rationale=form.cleaned_data["rationale"],
                form_token=form.cleaned_data["form_token"],
            )
        except PracticeRefused as refused:
            attempt = _own_practice(request, attempt_id)
            if attempt.is_rated:
                return render(request, panel, _practice_context(attempt, notice=str(refused)), status=409)
            form.add_error(refused.field, str(refused))
            show_practice(attempt)
            return render(request, panel, _practice_context(attempt, form), status=UNPROCESSABLE)
        return render(request, panel, _practice_context(attempt))
    if not attempt.is_rated:
        if needs_confirmation(request.user, attempt.study):
            step = PendingStep("guide", "Read the study's guide and confirm it before practising.")
            return redirect(_step_url(step, attempt.study, attempt.task))
        show_practice(attempt)
    if request.htmx and not request.htmx.history_restore_request:
        return render(request, "reading/practice.html#reading-panel", _practice_context(attempt))
    context = _practice_context(attempt, guide_html=_guide_html(attempt.study))
    return render(request, "reading/practice.html", context)
