import functools
from collections.abc import Callable

from django.contrib import admin
from django.contrib.auth import views as auth_views
from django.urls import include, path
from django.views.decorators.csrf import csrf_exempt
from rest_framework.routers import DefaultRouter

from analysis import api as analysis_api
from annotation import accounts
from annotation import api as annotation_api
from annotation import views as annotation_views
from consensus import api as consensus_api
from exports import api as exports_api
from judges import api as judges_api
from reading import api as reading_api


def built_on_first_request(build: Callable[[], Callable]) -> Callable:
    """A view that build() makes when it is first requested, not when the URLconf is loaded.

    For the API's schema and docs: drf-spectacular's views import its schema generator (and, with
    it, Django's test client), which no other request needs and every process would load at start-up.
    """
    build = functools.cache(build)

    @csrf_exempt  # as DRF's views are: they check CSRF themselves, for session log-ins
    def view(request, *args, **kwargs):
        return build()(request, *args, **kwargs)

    return view


@built_on_first_request
def schema_view():
    from drf_spectacular.views import SpectacularAPIView

    return SpectacularAPIView.as_view()


@built_on_first_request
def _swagger_view():
    from drf_spectacular.views import SpectacularSwaggerSplitView

    return SpectacularSwaggerSplitView.as_view(url_name="schema")


def docs_view(request, *args, **kwargs):
    """The API's browsable documentation, a page for people: logged out, the log-in page, which
    comes back here."""
    if not request.user.is_authenticated:
        return auth_views.redirect_to_login(request.get_full_path())
    return _swagger_view(request, *args, **kwargs)


# No format suffixes (/api/studies.json): every route answers JSON, and a suffixed URL is a 404
# like any other unknown one. ?format=json still picks the renderer.
router = DefaultRouter()
router.include_format_suffixes = False
# The reader's endpoints first: see urlpatterns.
router.register("reading", reading_api.ReadingViewSet, basename="reading")
router.register("adjudications", reading_api.AdjudicationViewSet, basename="adjudication")
router.register("studies", annotation_api.StudyViewSet, basename="study")
router.register("datasets", annotation_api.DatasetViewSet, basename="dataset")
# The data manager's API: queue release builds, follow them, download the zip.
router.register(r"studies/(?P<slug>[^/.]+)/releases", exports_api.StudyReleaseViewSet, basename="study-release")
router.register("releases", exports_api.ReleaseViewSet, basename="release")

# The coordinator's API (consensus routing): plain views, named api_<what>.
coordination_api = [
    path("studies/<slug:slug>/pairs/", consensus_api.StudyPairsView.as_view(), name="study-pairs"),
    path("studies/<slug:slug>/progress/", consensus_api.StudyProgressView.as_view(), name="api_study_progress"),
    path("studies/<slug:slug>/workload/", consensus_api.StudyWorkloadView.as_view(), name="api_study_workload"),
    path("studies/<slug:slug>/unrouted/", consensus_api.StudyUnroutedView.as_view(), name="api_study_unrouted"),
    path(
        "studies/<slug:slug>/examples/<uuid:example_id>/",
        consensus_api.ExampleDetailView.as_view(),
        name="api_example_detail",
    ),
    path(
        "studies/<slug:slug>/readers/<str:username>/",
        consensus_api.ReaderDetailView.as_view(),
        name="api_reader_detail",
    ),
    path("studies/<slug:slug>/assign/", consensus_api.StudyAssignView.as_view(), name="api_study_assign"),
    path("studies/<slug:slug>/members/", consensus_api.StudyMembersView.as_view(), name="api_study_members"),
    path(
        "studies/<slug:slug>/assignments/",
        consensus_api.StudyAssignmentsView.as_view(),
        name="api_study_assignments",
    ),
    path(
        "assignments/<uuid:assignment_id>/withdraw/",
        consensus_api.AssignmentWithdrawView.as_view(),
        name="api_assignment_withdraw",
    ),
    path(
        "assignments/<uuid:assignment_id>/reassign/",
        consensus_api.AssignmentReassignView.as_view(),
        name="api_assignment_reassign",
    ),
    path(
        "annotations/<uuid:annotation_id>/void/",
        consensus_api.AnnotationVoidView.as_view(),
        name="api_annotation_void",
    ),
    # Coordinators and data managers: the study's results (analysis).
    path("studies/<slug:slug>/results/", analysis_api.StudyResultsView.as_view(), name="api_study_results"),
    path(
        "studies/<slug:slug>/metric-scores/",
        analysis_api.StudyMetricScoresView.as_view(),
        name="api_study_metric_scores",
    ),
    # Coordinators: enrol automated judges (shadow readers) and list them.
    path("studies/<slug:slug>/judges/", judges_api.StudyJudgesView.as_view(), name="api_study_judges"),
]

urlpatterns = [
    # The reading loop first: the API's router (the reader's endpoints are its first routes), then the
    # reading pages. Django tries the patterns in order; a reader's request had tried every other
    # pattern, all of the coordinators' API included, before its own (about a twentieth of its CPU in
    # a sampling profile). No pattern of these two matches a path that another pattern here serves,
    # so the order changes no answer (tests/config/test_permission_matrix.py requests every route).
    path("api/", include(router.urls)),
    path("", include("reading.urls")),
    # Browsers and the admin's pages ask for /favicon.ico: the site's own icon, not a 404.
    path("favicon.ico", annotation_views.favicon, name="favicon"),
    path("accounts/login/", annotation_views.LoginView.as_view(), name="login"),
    path("accounts/logout/", auth_views.LogoutView.as_view(), name="logout"),
    path("accounts/password/change/", accounts.PasswordChangeView.as_view(), name="password_change"),
    path("accounts/password/change/done/", auth_views.PasswordChangeDoneView.as_view(), name="password_change_done"),
    path("accounts/password/reset/", accounts.PasswordResetView.as_view(), name="password_reset"),
    path("accounts/password/reset/sent/", auth_views.PasswordResetDoneView.as_view(), name="password_reset_done"),
    path(
        "accounts/password/reset/<uidb64>/<token>/",
        auth_views.PasswordResetConfirmView.as_view(),
        name="password_reset_confirm",
    ),
    path(
        "accounts/password/reset/done/", auth_views.PasswordResetCompleteView.as_view(), name="password_reset_complete"
    ),
    path("admin/", admin.site.urls),
    path("api/schema/", schema_view, name="schema"),
    path("api/docs/", docs_view, name="api_docs"),
    path("api/", include(coordination_api)),
    path("", include("consensus.urls")),
    path("", include("exports.urls")),
    path("", include("analysis.urls")),
    path("", include("judges.urls")),
    path("", include("annotation.urls")),
]

# Under /api/ Django's own error pages answer JSON too (an unknown URL, a refused body, a crash).
handler400 = "annotation.api_errors.bad_request"
handler404 = "annotation.api_errors.page_not_found"
handler500 = "annotation.api_errors.server_error"
