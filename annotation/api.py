from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework import mixins, status, viewsets
from rest_framework.decorators import action
from rest_framework.parsers import FormParser, JSONParser, MultiPartParser
from rest_framework.request import Request
from rest_framework.response import Response

from annotation import serializers
from annotation.importing import ImportRejected
from annotation.models import CandidatePair, Dataset, Study, Verdict
from annotation.permissions import IsCoordinator
from annotation.services import SamplingRefused, import_pairs, sample_pairs


class DatasetViewSet(viewsets.ReadOnlyModelViewSet):
    """Source datasets that import files may name."""

    permission_classes = [IsCoordinator]
    serializer_class = serializers.DatasetSerializer
    queryset = Dataset.objects.all()
    lookup_field = "key"
    pagination_class = None


class StudyViewSet(mixins.CreateModelMixin, viewsets.ReadOnlyModelViewSet):
    """Studies: create one (with the default ReRef taxonomy), import pairs, draw the sample."""

    permission_classes = [IsCoordinator]
    serializer_class = serializers.StudySerializer
    queryset = Study.objects.prefetch_related("variations").order_by("name")
    lookup_field = "slug"

    @extend_schema(
        request={"multipart/form-data": serializers.ImportRequestSerializer},
        responses={
            201: serializers.ImportResultSerializer,
            200: serializers.ImportResultSerializer,
            400: serializers.ImportErrorSerializer,
        },
    )
    @action(detail=True, methods=["post"], parser_classes=[MultiPartParser, FormParser])
    def imports(self, request: Request, slug: str | None = None) -> Response:
        """Import a CSV or JSON Lines file of candidate pairs, all or nothing."""
        study = self.get_object()
        form = serializers.ImportRequestSerializer(data=request.data)
        form.is_valid(raise_exception=True)
        upload = form.validated_data["file"]
        try:
            report = import_pairs(study, upload.read(), filename=upload.name, dry_run=form.validated_data["dry_run"])
        except ImportRejected as rejected:
            return Response({"errors": [p.as_dict() for p in rejected.problems]}, status=status.HTTP_400_BAD_REQUEST)
        code = status.HTTP_201_CREATED if report.created and not report.dry_run else status.HTTP_200_OK
        return Response(report.as_dict(), status=code)

    @extend_schema(
        request=serializers.SampleRequestSerializer,
        responses={200: serializers.SampleResultSerializer, 409: serializers.DetailSerializer},
    )
    @action(detail=True, methods=["post"], parser_classes=[JSONParser, FormParser, MultiPartParser])
    def sample(self, request: Request, slug: str | None = None) -> Response:
        """Draw the study sample: N accepted pairs per (dataset, variation), reproducible from the seed."""
        study = self.get_object()
        form = serializers.SampleRequestSerializer(data=request.data)
        form.is_valid(raise_exception=True)
        try:
            report = sample_pairs(
                study,
                per_variation=form.validated_data["per_variation"],
                seed=form.validated_data.get("seed"),
                datasets=form.validated_data.get("datasets") or None,
            )
        except SamplingRefused as refused:
            return Response({"detail": str(refused)}, status=status.HTTP_409_CONFLICT)
        return Response(report.as_dict())

    @extend_schema(responses={200: serializers.SummaryRowSerializer(many=True)})
    @action(detail=True, methods=["get"], pagination_class=None)
    def summary(self, request: Request, slug: str | None = None) -> Response:
        """Candidates by verdict and sampled pairs, per (dataset, variation)."""
        return Response(self.get_object().candidate_summary())

    @extend_schema(
        parameters=[
            OpenApiParameter("verdict", str, enum=Verdict.values),
            OpenApiParameter("sampled", bool),
        ],
        responses={200: serializers.CandidatePairSerializer(many=True)},
    )
    @action(detail=True, methods=["get"])
    def pairs(self, request: Request, slug: str | None = None) -> Response:
        """The study's candidate pairs, paginated."""
        study = self.get_object()
        pairs = CandidatePair.objects.filter(study=study).select_related("dataset", "variation")
        if verdict := request.query_params.get("verdict"):
            pairs = pairs.filter(verdict=verdict)
        if (sampled := request.query_params.get("sampled")) is not None:
            pairs = pairs.filter(sampled=sampled.lower() in ("1", "true", "yes"))
        page = self.paginate_queryset(pairs)
        return self.get_paginated_response(serializers.CandidatePairSerializer(page, many=True).data)
