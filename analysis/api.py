"""GET /api/studies/<slug>/results/: the Results page's numbers as JSON (the document of results.json).

The analysis runs in the worker, never in the request: 200 with the document once the results
of the study's current ratings are computed; until then 202 with the computation's status
(queued or running, and its progress) and a Retry-After; 503 if it failed (POST queues it again).
"""

from django.shortcuts import get_object_or_404
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, OpenApiResponse, extend_schema
from rest_framework import serializers, status
from rest_framework.parsers import FormParser, MultiPartParser
from rest_framework.permissions import BasePermission
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from analysis.queueing import request_results, retry_results
from analysis.services import ResultsRefused, ResultsState, check_scope, import_metric_scores
from annotation.importing import ImportRejected
from annotation.models import Role, Study
from annotation.permissions import IsCoordinator
from annotation.roles import has_role
from annotation.serializers import DetailSerializer, ImportErrorSerializer

TAGS = ["results"]
RETRY_AFTER_SECONDS = 2
FILTERS = [
    OpenApiParameter("dataset", str, description="Only this dataset (a key, e.g. mimic-cxr); default all."),
    OpenApiParameter("task", str, enum=["task1", "task2"], description="Only this task; default both."),
]


class IsCoordinatorOrDataManager(BasePermission):
    def has_permission(self, request, view) -> bool:
        return has_role(request.user, Role.COORDINATOR) or has_role(request.user, Role.DATA_MANAGER)


class ComputingSerializer(serializers.Serializer):
    status = serializers.ChoiceField(choices=["queued", "running", "failed"])
    progress = serializers.IntegerField(help_text="Percent done.")
    detail = serializers.CharField()


def _computing(state: ResultsState) -> Response:
    if state.status == "failed":
        body = {"status": "failed", "progress": state.progress, "detail": state.error}
        return Response(body, status=status.HTTP_503_SERVICE_UNAVAILABLE)
    body = {
        "status": state.status or "queued",
        "progress": state.progress,
        "detail": "The results of the study's current ratings are being computed; ask again shortly.",
    }
    return Response(body, status=status.HTTP_202_ACCEPTED, headers={"Retry-After": str(RETRY_AFTER_SECONDS)})


class StudyResultsView(APIView):
    permission_classes = [IsCoordinatorOrDataManager]

    @extend_schema(
        tags=TAGS,
        parameters=FILTERS,
        responses={
            200: OpenApiResponse(OpenApiTypes.OBJECT, description="The results document (see the README's keys)."),
            202: OpenApiResponse(ComputingSerializer, description="Being computed in the background."),
            400: OpenApiResponse(DetailSerializer, description="An unknown dataset or task."),
            503: OpenApiResponse(ComputingSerializer, description="The computation failed; POST to try again."),
        },
    )
    def get(self, request: Request, slug: str) -> Response:
        """Realism, equivalence and agreement of the study's examples with a consensus, as results.json."""
        return self._answer(request, slug, retry=False)

    @extend_schema(
        tags=TAGS,
        parameters=FILTERS,
        request=None,
        responses={
            200: OpenApiResponse(OpenApiTypes.OBJECT, description="Already computed: the results document."),
            202: OpenApiResponse(ComputingSerializer, description="Queued again."),
            400: OpenApiResponse(DetailSerializer, description="An unknown dataset or task."),
        },
    )
    def post(self, request: Request, slug: str) -> Response:
        """Queue a failed computation again."""
        # It takes no body, but a malformed or too deeply nested one is refused as everywhere else.
        request.data  # noqa: B018 (parsing is the point)
        return self._answer(request, slug, retry=True)

    def _answer(self, request: Request, slug: str, *, retry: bool) -> Response:
        study = get_object_or_404(Study, slug=slug)
        try:
            scope = check_scope(
                study, dataset=request.query_params.get("dataset", ""), task=request.query_params.get("task", "")
            )
        except ResultsRefused as refused:
            return Response({"detail": str(refused)}, status=status.HTTP_400_BAD_REQUEST)
        state = retry_results(study, scope) if retry else request_results(study, scope)
        if not state.is_current:
            return _computing(state)
        return Response(state.document())


class MetricScoresRequestSerializer(serializers.Serializer):
    file = serializers.FileField(allow_empty_file=True)
    replace = serializers.BooleanField(default=False)
    dry_run = serializers.BooleanField(default=False)


class MetricScoresResultSerializer(serializers.Serializer):
    metrics = serializers.DictField(child=serializers.IntegerField(), help_text="Rows per metric in the file.")
    created = serializers.IntegerField()
    unchanged = serializers.IntegerField()
    replaced = serializers.IntegerField()
    dry_run = serializers.BooleanField()


class StudyMetricScoresView(APIView):
    permission_classes = [IsCoordinator]
    parser_classes = [MultiPartParser, FormParser]

    @extend_schema(
        tags=TAGS,
        request={"multipart/form-data": MetricScoresRequestSerializer},
        responses={
            201: MetricScoresResultSerializer,
            200: MetricScoresResultSerializer,
            400: ImportErrorSerializer,
        },
    )
    def post(self, request: Request, slug: str) -> Response:
        """Import a CSV of metric scores computed elsewhere (see the README for its columns), all or nothing."""
        study = get_object_or_404(Study, slug=slug)
        form = MetricScoresRequestSerializer(data=request.data)
        form.is_valid(raise_exception=True)
        try:
            report = import_metric_scores(
                study,
                form.validated_data["file"].read(),
                user=request.user,
                dry_run=form.validated_data["dry_run"],
                replace=form.validated_data["replace"],
            )
        except ImportRejected as rejected:
            return Response({"errors": [p.as_dict() for p in rejected.problems]}, status=status.HTTP_400_BAD_REQUEST)
        changed = (report.created or report.replaced) and not report.dry_run
        return Response(report.as_dict(), status=status.HTTP_201_CREATED if changed else status.HTTP_200_OK)
