from django.contrib.auth.decorators import login_required
from django.db import transaction
from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.views.decorators.http import require_POST

from annotation.decorators import role_required
from annotation.forms import ImportForm, SampleForm, StudyForm
from annotation.importing import ImportRejected
from annotation.models import Role, Study
from annotation.roles import has_role
from annotation.services import SamplingRefused, import_pairs, sample_pairs

# htmx swaps 422 responses in place (see the htmx-config meta tag in base.html).
UNPROCESSABLE = 422


@login_required
def home(request: HttpRequest) -> HttpResponse:
    if has_role(request.user, Role.COORDINATOR):
        return redirect("study_list")
    return render(request, "annotation/home.html")


@role_required(Role.COORDINATOR)
def study_list(request: HttpRequest) -> HttpResponse:
    form = StudyForm(request.POST or None)
    if request.method == "POST" and form.is_valid():
        with transaction.atomic():
            study = Study.objects.create_with_taxonomy(slug=form.cleaned_data["slug"], name=form.cleaned_data["name"])
            study.keep_versions_apart = form.cleaned_data["keep_versions_apart"]
            study.save(update_fields=["keep_versions_apart"])
        return redirect(study)
    studies = Study.objects.order_by("name")
    return render(request, "annotation/study_list.html", {"studies": studies, "form": form})


def _study_context(study: Study, **extra) -> dict:
    return {
        "study": study,
        "summary": study.candidate_summary(),
        "import_form": ImportForm(),
        "sample_form": SampleForm(initial={"per_variation": study.sample_per_variation or 10}),
        **extra,
    }


@role_required(Role.COORDINATOR)
def study_detail(request: HttpRequest, slug: str) -> HttpResponse:
    study = get_object_or_404(Study, slug=slug)
    return render(request, "annotation/study_detail.html", _study_context(study))


@require_POST
@role_required(Role.COORDINATOR)
def study_import(request: HttpRequest, slug: str) -> HttpResponse:
    study = get_object_or_404(Study, slug=slug)
    form = ImportForm(request.POST, request.FILES)
    context = {"study": study, "import_form": form}
    status = 200
    if not form.is_valid():
        status = UNPROCESSABLE
    else:
        upload = form.cleaned_data["file"]
        try:
            report = import_pairs(study, upload.read(), filename=upload.name, dry_run=form.cleaned_data["dry_run"])
        except ImportRejected as rejected:
            context["problems"] = rejected.problems
            status = UNPROCESSABLE
        else:
            context["report"] = report
            context["summary"] = study.candidate_summary()
    return _render_partial(request, "import-result", context, status=status)


@require_POST
@role_required(Role.COORDINATOR)
def study_sample(request: HttpRequest, slug: str) -> HttpResponse:
    study = get_object_or_404(Study, slug=slug)
    form = SampleForm(request.POST)
    context = {"study": study, "sample_form": form}
    status = 200
    if not form.is_valid():
        status = UNPROCESSABLE
    else:
        try:
            report = sample_pairs(
                study,
                per_variation=form.cleaned_data["per_variation"],
                seed=form.cleaned_data["seed"],
                datasets=form.cleaned_data["datasets"] or None,
            )
        except SamplingRefused as refused:
            context["refusal"] = str(refused)
            status = UNPROCESSABLE
        else:
            context["sample_report"] = report
            context["summary"] = study.candidate_summary()
    return _render_partial(request, "sample-result", context, status=status)


def _render_partial(request: HttpRequest, partial: str, context: dict, *, status: int) -> HttpResponse:
    if request.htmx:
        return render(request, f"annotation/study_detail.html#{partial}", context, status=status)
    # Without JavaScript: the whole page, with the result in place.
    full = _study_context(**context)
    return render(request, "annotation/study_detail.html", full, status=status)
