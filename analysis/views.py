"""A study's Results page (coordinators and data managers), its figures and its download."""

import re

from django.contrib import messages
from django.contrib.auth.models import AbstractBaseUser
from django.core.files.storage import storages
from django.http import FileResponse, Http404, HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.urls import reverse
from django.utils.csp import CSP
from django.views.decorators.csp import csp_override
from django.views.decorators.http import require_GET, require_POST

from analysis import presentation, sensitivity_presentation, writeup
from analysis.forms import MetricScoresForm
from analysis.judge_presentation import judges_section
from analysis.names import CAPTIONS, FIGURES, JUDGE_FIGURES, TITLES
from analysis.queueing import request_results, retry_results
from analysis.reader_keys import reader_keys
from analysis.services import (
    TASKS,
    ResultsRefused,
    ResultsState,
    Scope,
    check_scope,
    import_metric_scores,
    results_state,
    study_datasets,
)
from annotation.decorators import role_required
from annotation.importing import ImportRejected
from annotation.models import Role, Study
from annotation.roles import has_role
from exports.downloads import download_response

BAD_REQUEST = 400
METRIC_FIGURE = re.compile(r"metric_[A-Za-z0-9][A-Za-z0-9_.\-]{0,80}")
CONTENT_TYPES = {"svg": "image/svg+xml", "png": "image/png", "pdf": "application/pdf"}
# A figure is an image: no scripts, and matplotlib's SVG styles itself inline.
FIGURE_CSP = {"default-src": [CSP.NONE], "style-src": [CSP.UNSAFE_INLINE], "frame-ancestors": [CSP.NONE]}


def _scope(request: HttpRequest, study: Study) -> Scope:
    return check_scope(study, dataset=request.GET.get("dataset", ""), task=request.GET.get("task", ""))


def _query(scope: Scope) -> str:
    parts = [f"dataset={scope.dataset}" if scope.dataset else "", f"task={scope.task}" if scope.task else ""]
    query = "&".join(part for part in parts if part)
    return f"?{query}" if query else ""


def _context(study: Study, state: ResultsState | None, user: AbstractBaseUser, **extra) -> dict:
    context = {
        "study": study,
        "state": state,
        "datasets": study_datasets(study),
        "tasks": TASKS,
        "is_coordinator": has_role(user, Role.COORDINATOR),
        "metric_form": MetricScoresForm(),
        **extra,
    }
    document = state.document() if state else None
    if document is None:
        return context
    query = _query(state.scope)
    figures = {
        name: {
            "title": TITLES[name],
            "caption": CAPTIONS[name],
            **{fmt: reverse("results_figure", args=[study.slug, name, fmt]) + query for fmt in CONTENT_TYPES},
        }
        for name in FIGURES + JUDGE_FIGURES
    }
    context |= {
        "document": document,
        "summary": writeup.summary(document),
        "sections": presentation.sections(document, figures),
        "metric_section": sensitivity_presentation.section(
            document, lambda name, fmt: reverse("results_figure", args=[study.slug, name, fmt]) + query
        ),
        "judges_section": judges_section(document, figures),
        "download_url": reverse("results_download", args=[study.slug]) + query,
        "api_url": reverse("api_study_results", args=[study.slug]) + query,
    }
    table_url = lambda name, fmt: reverse("results_table", args=[study.slug, name, fmt]) + query  # noqa: E731
    _add_table_files(context, document, table_url)
    if context["is_coordinator"]:
        usernames = _usernames(study)
        readers = [
            {
                **reader,
                "username": usernames.get(reader["reader"], ""),
                "median_time": None
                if reader["median_seconds"] is None
                else presentation.duration(reader["median_seconds"]),
            }
            for reader in state.reader_quality()
        ]
        # By account name: the order a coordinator looks a reader up in (the analysis orders them by key).
        context["readers"] = sorted(readers, key=lambda reader: (reader["username"] == "", reader["username"]))
    return context


def _add_table_files(context: dict, document: dict, url) -> None:
    """Each table's downloads: its tidy CSV (where one holds its numbers), and the table as shown in
    Markdown and LaTeX."""

    def files(name: str) -> list[tuple[str, str]]:
        tidy = name.replace("-", "_")
        tidy = tidy if tidy in document["tables"] else ("metric_sensitivity" if name.startswith("metric_") else "")
        shown = [("Markdown", url(name, "md")), ("LaTeX", url(name, "tex"))]
        return ([("CSV", url(tidy, "csv"))] if tidy else []) + shown

    tables = [table for section in context["sections"] for table in section["tables"]]
    tables += context["judges_section"]["tables"] if context["judges_section"] else []
    tables += context["metric_section"]["metrics"] if context["metric_section"] else []
    for table in tables:
        table["files"] = files(table.get("name") or table.get("id"))


def _usernames(study: Study) -> dict[str, str]:
    from django.contrib.auth import get_user_model

    keys = reader_keys(study)
    names = dict(get_user_model().objects.filter(pk__in=keys.values()).values_list("pk", "username"))
    return {key: names.get(user_id, "") for key, user_id in keys.items()}


@role_required(Role.COORDINATOR, Role.DATA_MANAGER)
def study_results(request: HttpRequest, slug: str) -> HttpResponse:
    study = get_object_or_404(Study, slug=slug)
    try:
        scope = _scope(request, study)
    except ResultsRefused as refused:
        context = _context(study, None, request.user, refusal=str(refused))
        return render(request, "analysis/study_results.html", context, status=BAD_REQUEST)
    if request.method == "POST":
        retry_results(study, scope)
        return redirect(reverse("study_results", args=[study.slug]) + _query(scope))
    state = request_results(study, scope)
    context = _context(study, state, request.user, scope=scope, query=_query(scope))
    if request.htmx and request.htmx.target == "results":
        return render(request, "analysis/study_results.html#results", context)
    return render(request, "analysis/study_results.html", context)


def _computed_file(request: HttpRequest, slug: str, find, missing: str) -> tuple[Study, Scope, str]:
    """The study, the request's scope and a file of its computed results (`find(state)`: its name in
    the results storage); 404 where the study, the scope or the file is not there."""
    study = get_object_or_404(Study, slug=slug)
    try:
        scope = _scope(request, study)
    except ResultsRefused as refused:
        raise Http404(str(refused)) from None
    path = find(results_state(study, scope))
    if path is None:
        raise Http404(missing)
    return study, scope, path


@require_GET
@csp_override(FIGURE_CSP)
@role_required(Role.COORDINATOR, Role.DATA_MANAGER)
def results_figure(request: HttpRequest, slug: str, name: str, fmt: str) -> FileResponse:
    if (name not in FIGURES + JUDGE_FIGURES and not METRIC_FIGURE.fullmatch(name)) or fmt not in CONTENT_TYPES:
        raise Http404("No such figure.")
    _, _, path = _computed_file(
        request, slug, lambda state: state.figure(name, fmt), "These results have not been computed yet."
    )
    response = FileResponse(storages["results"].open(path, "rb"), content_type=CONTENT_TYPES[fmt])
    response["Cache-Control"] = "private, no-cache"
    return response


# The tables' files: tidy CSV with keys, and the page's tables as Markdown and LaTeX (analysis.report).
TABLE_TYPES = {"csv": "text/csv", "md": "text/markdown", "tex": "application/x-tex"}
TABLE_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.\-]{0,80}")


@require_GET
@role_required(Role.COORDINATOR, Role.DATA_MANAGER)
def results_table(request: HttpRequest, slug: str, name: str, fmt: str) -> FileResponse:
    """One table of the computed results as a file to download (CSV, Markdown or LaTeX)."""
    if not TABLE_NAME.fullmatch(name) or fmt not in TABLE_TYPES:
        raise Http404("No such table.")
    study, scope, path = _computed_file(
        request,
        slug,
        lambda state: state.table(name, fmt),
        "No such table in these results (or they have not been computed yet).",
    )
    filename = f"{study.slug}-{scope.name}-{name}.{fmt}"
    response = FileResponse(
        storages["results"].open(path, "rb"),
        as_attachment=True,
        filename=filename,
        content_type=f"{TABLE_TYPES[fmt]}; charset=utf-8",
    )
    response["Cache-Control"] = "private, no-cache"
    return response


@require_GET
@role_required(Role.COORDINATOR, Role.DATA_MANAGER)
def results_download(request: HttpRequest, slug: str) -> HttpResponse:
    study = get_object_or_404(Study, slug=slug)
    try:
        scope = _scope(request, study)
    except ResultsRefused as refused:
        raise Http404(str(refused)) from None
    name = results_state(study, scope).zip_file()
    if name is None:
        raise Http404("These results have not been computed yet. Open the Results page to compute them.")
    filename = f"{study.slug}-results-{scope.name}.zip"
    return download_response(storages["results"], name, filename=filename, content_type="application/zip")


@require_POST
@role_required(Role.COORDINATOR)
def results_metric_scores(request: HttpRequest, slug: str) -> HttpResponse:
    """Import a CSV of metric scores computed elsewhere; the results are then computed again."""
    study = get_object_or_404(Study, slug=slug)
    form = MetricScoresForm(request.POST, request.FILES)
    problems: list = []
    if form.is_valid():
        try:
            report = import_metric_scores(
                study,
                form.cleaned_data["file"].read(),
                user=request.user,
                dry_run=form.cleaned_data["dry_run"],
                replace=form.cleaned_data["replace"],
            )
        except ImportRejected as rejected:
            problems = [str(problem) for problem in rejected.problems]
        else:
            messages.success(request, report.summary())
            return redirect(reverse("study_results", args=[study.slug]) + "#metric-sensitivity")
    else:
        problems = [f"{field}: {' '.join(errors)}" for field, errors in form.errors.items()]
    state = request_results(study, Scope())
    context = _context(study, state, request.user, scope=Scope(), query="", metric_form=form, metric_problems=problems)
    return render(request, "analysis/study_results.html", context, status=BAD_REQUEST)
