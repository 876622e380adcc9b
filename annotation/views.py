from django.conf import settings
from django.contrib import messages
from django.contrib.auth import views as auth_views
from django.contrib.auth.decorators import login_required
from django.http import FileResponse, HttpRequest, HttpResponse, HttpResponsePermanentRedirect
from django.shortcuts import get_object_or_404, redirect, render
from django.templatetags.static import static
from django.urls import reverse
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_POST

from annotation.accounts import UnlockRefused, attempts_left, cool_off_text, locked_accounts, unlock_account
from annotation.decorators import SESSION_ENDED, role_required
from annotation.forms import (
    ApiTokenForm,
    GuideForm,
    ImportForm,
    LicenseForm,
    MarginsForm,
    PracticeImportForm,
    PracticeSettingsForm,
    PreferencesForm,
    RewriteImportForm,
    SampleForm,
    SkipPracticeForm,
    StudyForm,
    UndoWindowForm,
)
from annotation.guide import (
    GuideRefused,
    confirmations,
    publish_guide,
    render_guide,
)
from annotation.importing import COLUMN_HELP, EXAMPLE_PAIRS, ImportRejected
from annotation.models import (
    CREATED_SETTINGS,
    ApiToken,
    GuideVersion,
    Role,
    Study,
)
from annotation.practice import (
    PracticeRefused,
    agreement_by_reader,
    import_practice_items,
    set_practice_requirement,
    set_skip_practice,
)
from annotation.preferences import current_preferences, remember_preferences
from annotation.roles import has_role
from annotation.services import SamplingRefused, import_pairs, import_rewrites, sample_pairs, save_preferences
from annotation.tokens import TokenRefused, issue_token, revoke_token, scopes_for

# The session key of an API token's key, between its making and the one page that shows it.
NEW_TOKEN_KEY = "new_api_token"  # noqa: S105 (a name, not a secret)

# htmx swaps 422 responses in place (see the htmx-config meta tag in base.html).
UNPROCESSABLE = 422


def favicon(request: HttpRequest) -> HttpResponse:
    """/favicon.ico, which browsers ask for on pages without our icon link (the admin's): the site's icon.

    Resolved per request: the static files' manifest may not exist yet when the URLconf loads.
    """
    return HttpResponsePermanentRedirect(static("favicon.svg"))


class LoginView(auth_views.LoginView):
    """Django's log-in page, saying why one is here and how many attempts are left.

    A logged-in user is told who they are and offered the way on instead of the form.
    """

    def get_context_data(self, **kwargs) -> dict:
        context = super().get_context_data(**kwargs)
        context["session_ended"] = self.request.GET.get(SESSION_ENDED) is not None
        return context

    def form_invalid(self, form) -> HttpResponse:
        left = attempts_left(self.request, form.data.get("username", ""))
        return self.render_to_response(self.get_context_data(form=form, attempts_left=left))


@role_required(Role.COORDINATOR)
def locked_logins(request: HttpRequest) -> HttpResponse:
    """Accounts locked out after repeated failed log-ins, with an Unlock button each."""
    if request.method == "POST":
        username = request.POST.get("username", "")
        try:
            unlock_account(username, actor=request.user)
        except UnlockRefused as refused:
            messages.error(request, str(refused))
        else:
            messages.success(request, f"{username} can log in again.")
        return redirect("locked_logins")
    context = {
        "accounts": locked_accounts(),
        "failure_limit": settings.AXES_FAILURE_LIMIT,
        "cool_off": cool_off_text(),
    }
    return render(request, "registration/locked_logins.html", context)


@login_required
def home(request: HttpRequest) -> HttpResponse:
    if has_role(request.user, Role.COORDINATOR):
        return redirect("study_list")
    if has_role(request.user, Role.READER) or has_role(request.user, Role.ADJUDICATOR):
        return redirect("reader_home")
    if has_role(request.user, Role.DATA_MANAGER):
        # The data manager's start page: the studies, their state and last release.
        return redirect("release_index")
    return render(request, "annotation/home.html")


@login_required
@never_cache  # it may show a new API token's key: kept in no cache, not even the browser's
def preferences(request: HttpRequest) -> HttpResponse:
    """Everyone's own settings: the colour theme and the single-key shortcuts; the password; API tokens."""
    form = PreferencesForm(request.POST or None, initial=current_preferences(request))
    if request.method == "POST" and form.is_valid():
        saved = save_preferences(request.user, **form.cleaned_data)
        remember_preferences(request.session, {field: getattr(saved, field) for field in form.cleaned_data})
        messages.success(request, "Your settings are saved.")
        return redirect("preferences")
    return _settings_page(request, form=form)


def _settings_page(request: HttpRequest, *, form=None, token_form=None) -> HttpResponse:
    form = form or PreferencesForm(initial=current_preferences(request))
    token_form = token_form or ApiTokenForm(scopes=scopes_for(request.user))
    context = {
        "form": form,
        "token_form": token_form,
        "tokens": ApiToken.objects.filter(user=request.user).order_by("created_at", "id"),
        # A key just made, shown on this one page and never again (kept in the session until then).
        "new_token": request.session.pop(NEW_TOKEN_KEY, None),
    }
    status = UNPROCESSABLE if form.errors or token_form.errors else 200
    return render(request, "annotation/preferences.html", context, status=status)


@login_required
@require_POST
def token_create(request: HttpRequest) -> HttpResponse:
    """Make one of one's own API tokens; its key is shown once, on the Settings page that follows."""
    token_form = ApiTokenForm(request.POST, scopes=scopes_for(request.user))
    if token_form.is_valid():
        try:
            token, key = issue_token(request.user, actor=request.user, **token_form.cleaned_data)
        except TokenRefused as refused:
            token_form.add_error("name", str(refused))
        else:
            request.session[NEW_TOKEN_KEY] = {"name": token.name, "key": key}
            return redirect("preferences")  # the key field takes focus (autofocus; a #fragment would stop it)
    return _settings_page(request, token_form=token_form)


@login_required
@require_POST
def token_revoke(request: HttpRequest, token_id: str) -> HttpResponse:
    """Revoke one of one's own API tokens (a coordinator revokes anyone's on the API tokens page)."""
    token = get_object_or_404(ApiToken, public_id=token_id, user=request.user)
    revoke_token(token, actor=request.user)
    messages.success(request, f"The token “{token.name}” is revoked: programs using it are refused from now on.")
    return redirect(reverse("preferences") + "#api-tokens")


@role_required(Role.COORDINATOR)
def api_tokens(request: HttpRequest) -> HttpResponse:
    """Everyone's API tokens, for a coordinator to revoke one (a lost laptop, a person who left)."""
    tokens = ApiToken.objects.select_related("user").order_by("user__username", "created_at", "id")
    return render(request, "annotation/api_tokens.html", {"tokens": tokens})


@role_required(Role.COORDINATOR)
@require_POST
def api_token_revoke(request: HttpRequest, token_id: str) -> HttpResponse:
    token = get_object_or_404(ApiToken.objects.select_related("user"), public_id=token_id)
    revoke_token(token, actor=request.user)
    messages.success(request, f"The token “{token.name}” of {token.user.get_username()} is revoked.")
    return redirect("api_tokens")


@role_required(Role.COORDINATOR)
def study_list(request: HttpRequest) -> HttpResponse:
    form = StudyForm(request.POST or None)
    if request.method == "POST" and form.is_valid():
        data = form.cleaned_data
        study = Study.objects.create_study(
            slug=data["slug"], name=data["name"], actor=request.user, **{f: data[f] for f in CREATED_SETTINGS}
        )
        return redirect(study)
    studies = Study.objects.order_by("name")
    return render(request, "annotation/study_list.html", {"studies": studies, "form": form})


def _study_context(study: Study, **extra) -> dict:
    return {
        "study": study,
        "summary": study.candidate_summary(),
        "columns": COLUMN_HELP,
        "import_form": ImportForm(),
        "rewrites_form": RewriteImportForm(),
        "sample_form": SampleForm(initial={"per_variation": study.sample_per_variation or 10}),
        "undo_form": UndoWindowForm(instance=study),
        "margins_form": MarginsForm(instance=study),
        "license_form": LicenseForm(instance=study),
        **extra,
    }


@role_required(Role.COORDINATOR)
def study_detail(request: HttpRequest, slug: str) -> HttpResponse:
    study = get_object_or_404(Study, slug=slug)
    return render(request, "annotation/study_detail.html", _study_context(study))


@role_required(Role.COORDINATOR)
def example_pairs_file(request: HttpRequest) -> FileResponse:
    """The small example import file of the README, to download from the import form."""
    return FileResponse(
        EXAMPLE_PAIRS.open("rb"), as_attachment=True, filename=EXAMPLE_PAIRS.name, content_type="text/csv"
    )


@role_required(Role.COORDINATOR)
def study_import(request: HttpRequest, slug: str) -> HttpResponse:
    study = get_object_or_404(Study, slug=slug)
    if request.method != "POST":
        # The form posts here; an address typed or bookmarked goes to the form itself.
        return redirect(reverse("study_detail", args=[study.slug]) + "#import-heading")
    form = ImportForm(request.POST, request.FILES)
    context = {"study": study, "import_form": form}
    status = 200
    if not form.is_valid():
        status = UNPROCESSABLE
    else:
        upload = form.cleaned_data["file"]
        # "Import this file now" after a dry run sends the same form again, for real.
        dry_run = form.cleaned_data["dry_run"] and "import_now" not in request.POST
        try:
            report = import_pairs(study, upload.read(), filename=upload.name, dry_run=dry_run)
        except ImportRejected as rejected:
            context["problems"] = rejected.problems
            status = UNPROCESSABLE
        else:
            context["report"] = report
            context["summary"] = study.candidate_summary()
    return _render_partial(request, "import-result", context, status=status)


@role_required(Role.COORDINATOR)
def study_import_rewrites(request: HttpRequest, slug: str) -> HttpResponse:
    study = get_object_or_404(Study, slug=slug)
    if request.method != "POST":
        return redirect(reverse("study_detail", args=[study.slug]) + "#rewrites-heading")
    form = RewriteImportForm(request.POST, request.FILES)
    context = {"study": study, "rewrites_form": form}
    status = 200
    if not form.is_valid():
        status = UNPROCESSABLE
    else:
        upload = form.cleaned_data["file"]
        try:
            report = import_rewrites(study, upload.read(), filename=upload.name, dry_run=form.cleaned_data["dry_run"])
        except ImportRejected as rejected:
            context["rewrite_problems"] = rejected.problems
            status = UNPROCESSABLE
        else:
            context["rewrite_report"] = report
            context["summary"] = study.candidate_summary()
    return _render_partial(request, "rewrites-result", context, status=status)


@role_required(Role.COORDINATOR)
def study_sample(request: HttpRequest, slug: str) -> HttpResponse:
    study = get_object_or_404(Study, slug=slug)
    if request.method != "POST":
        return redirect(reverse("study_detail", args=[study.slug]) + "#sample-heading")
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
                one_pair_per_exam=form.cleaned_data["one_pair_per_exam"],
            )
        except SamplingRefused as refused:
            context["refusal"] = str(refused)
            status = UNPROCESSABLE
        else:
            context["sample_report"] = report
            context["summary"] = study.candidate_summary()
            study.refresh_from_db()
    return _render_partial(request, "sample-result", context, status=status)


@require_POST
@role_required(Role.COORDINATOR)
def study_undo_window(request: HttpRequest, slug: str) -> HttpResponse:
    """Set how long readers may take back a rating; ratings stored before keep their own window."""
    study = get_object_or_404(Study, slug=slug)
    form = UndoWindowForm(request.POST, instance=study)
    if not form.is_valid():
        return _render_partial(request, "undo-window", {"study": study, "undo_form": form}, status=UNPROCESSABLE)
    study.set_undo_window(form.cleaned_data["undo_window_seconds"], actor=request.user)
    context = {"study": study, "undo_form": UndoWindowForm(instance=study), "undo_saved": True}
    return _render_partial(request, "undo-window", context, status=200)


@require_POST
@role_required(Role.COORDINATOR)
def study_margins(request: HttpRequest, slug: str) -> HttpResponse:
    """Set the non-inferiority and equivalence margins the Results page judges each variation by (audited)."""
    study = get_object_or_404(Study, slug=slug)
    form = MarginsForm(request.POST, instance=Study.objects.get(pk=study.pk))
    if not form.is_valid():
        return _render_partial(request, "margins", {"study": study, "margins_form": form}, status=UNPROCESSABLE)
    study.set_margins(
        noninferiority=form.cleaned_data["noninferiority_margin"],
        equivalence=form.cleaned_data["equivalence_margin"],
        actor=request.user,
    )
    study.refresh_from_db()
    context = {"study": study, "margins_form": MarginsForm(instance=study), "margins_saved": True}
    return _render_partial(request, "margins", context, status=200)


@require_POST
@role_required(Role.COORDINATOR)
def study_license(request: HttpRequest, slug: str) -> HttpResponse:
    """Set the licence the study's releases ship (audited)."""
    study = get_object_or_404(Study, slug=slug)
    form = LicenseForm(request.POST, instance=Study.objects.get(pk=study.pk))
    if not form.is_valid():
        return _render_partial(request, "license", {"study": study, "license_form": form}, status=UNPROCESSABLE)
    study.set_license(form.cleaned_data["license_text"], actor=request.user)
    context = {"study": study, "license_form": LicenseForm(instance=study), "license_saved": True}
    return _render_partial(request, "license", context, status=200)


def _render_partial(request: HttpRequest, partial: str, context: dict, *, status: int) -> HttpResponse:
    if request.htmx:
        return render(request, f"annotation/study_detail.html#{partial}", context, status=status)
    # Without JavaScript: the whole page, with the result in place.
    full = _study_context(**context)
    return render(request, "annotation/study_detail.html", full, status=status)


# --- The coordinator's guide and practice page ----------------------------------------------------


def _guide_page_context(study: Study, **extra) -> dict:
    versions = list(study.guide_versions.select_related("author").order_by("-number"))
    current = versions[0] if versions else None
    return {
        "study": study,
        "versions": versions,
        "current": current,
        "guide_html": render_guide(current.text) if current else None,
        "guide_form": GuideForm(initial={"text": current.text if current else ""}),
        "confirmations": confirmations(study),
        "practice_form": PracticeSettingsForm(instance=study),
        "practice_import_form": PracticeImportForm(),
        "practice_items": list(study.practice_items.order_by("task", "position", "pk")),
        "agreement": agreement_by_reader(study),
        "members": list(study.members.select_related("user").order_by("user__username", "role")),
        **extra,
    }


@role_required(Role.COORDINATOR)
def study_guide(request: HttpRequest, slug: str) -> HttpResponse:
    """The coordinator's page for the reader guide (write, versions, who confirmed) and the practice round."""
    study = get_object_or_404(Study, slug=slug)
    shown = request.GET.get("version")
    if request.method == "POST":
        form = GuideForm(request.POST)
        if form.is_valid():
            try:
                version, created = publish_guide(study, form.cleaned_data["text"], author=request.user)
            except GuideRefused as refused:
                form.add_error("text", str(refused))
            else:
                if created:
                    messages.success(
                        request, f"Saved as version {version.number}. Readers confirm it before their next item."
                    )
                else:
                    messages.info(request, f"No change: version {version.number} already has this text.")
                return redirect("study_guide", study.slug)
        return render(
            request, "annotation/study_guide.html", _guide_page_context(study, guide_form=form), status=UNPROCESSABLE
        )
    extra = {}
    if shown and shown.isdigit():
        old = get_object_or_404(GuideVersion, study=study, number=int(shown))
        extra = {"old_version": old, "old_html": render_guide(old.text)}
    return render(request, "annotation/study_guide.html", _guide_page_context(study, **extra))


@require_POST
@role_required(Role.COORDINATOR)
def study_practice_import(request: HttpRequest, slug: str) -> HttpResponse:
    study = get_object_or_404(Study, slug=slug)
    form = PracticeImportForm(request.POST, request.FILES)
    extra: dict = {"practice_import_form": form}
    if form.is_valid():
        upload = form.cleaned_data["file"]
        try:
            report = import_practice_items(
                study, upload.read(), filename=upload.name, dry_run=form.cleaned_data["dry_run"], actor=request.user
            )
        except ImportRejected as rejected:
            extra["practice_problems"] = rejected.problems
        else:
            extra["practice_report"] = report
            extra["practice_import_form"] = PracticeImportForm()
    status = 200 if "practice_report" in extra else UNPROCESSABLE
    return render(request, "annotation/study_guide.html", _guide_page_context(study, **extra), status=status)


@require_POST
@role_required(Role.COORDINATOR)
def study_practice_settings(request: HttpRequest, slug: str) -> HttpResponse:
    study = get_object_or_404(Study, slug=slug)
    form = PracticeSettingsForm(request.POST, instance=Study.objects.get(pk=study.pk))
    if form.is_valid():
        set_practice_requirement(study, form.cleaned_data["practice_items_required"], actor=request.user)
        messages.success(request, "Practice requirement saved.")
        return redirect("study_guide", study.slug)
    return render(
        request, "annotation/study_guide.html", _guide_page_context(study, practice_form=form), status=UNPROCESSABLE
    )


@require_POST
@role_required(Role.COORDINATOR)
def study_practice_skip(request: HttpRequest, slug: str) -> HttpResponse:
    study = get_object_or_404(Study, slug=slug)
    form = SkipPracticeForm(request.POST)
    if not form.is_valid():
        return render(request, "annotation/study_guide.html", _guide_page_context(study), status=UNPROCESSABLE)
    try:
        set_skip_practice(study, form.cleaned_data["username"], form.cleaned_data["skip"], actor=request.user)
    except PracticeRefused as refused:
        return render(
            request, "annotation/study_guide.html", _guide_page_context(study, skip_problem=str(refused)), status=409
        )
    return redirect("study_guide", study.slug)
