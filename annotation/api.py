from collections.abc import Callable

from django.db.models import Count
from drf_spectacular.utils import extend_schema
from rest_framework import mixins, status, viewsets
from rest_framework.decorators import action
from rest_framework.parsers import FormParser, MultiPartParser
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.settings import api_settings

from annotation import serializers
from annotation.guide import (
    GuideRefused,
    confirmations,
    publish_guide,
    render_guide,
)
from annotation.importing import ImportRejected
from annotation.models import (
    Dataset,
    PracticeItem,
    Study,
    StudyMember,
    Task,
)
from annotation.parsers import BoundedJSONParser
from annotation.permissions import IsCoordinator
from annotation.practice import (
    PracticeRefused,
    agreement_by_reader,
    import_practice_items,
    set_practice_requirement,
    set_skip_practice,
)
from annotation.services import ImportReport, SamplingRefused, import_pairs, import_rewrites, sample_pairs


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
        return self._import_upload(request, import_pairs)

    @extend_schema(
        request={"multipart/form-data": serializers.ImportRequestSerializer},
        responses={
            201: serializers.ImportResultSerializer,
            200: serializers.ImportResultSerializer,
            400: serializers.ImportErrorSerializer,
        },
    )
    @action(detail=True, methods=["post"], parser_classes=[MultiPartParser, FormParser])
    def rewrites(self, request: Request, slug: str | None = None) -> Response:
        """Import a CSV or JSON Lines file of rewrites, each joined to its stored original report, all or nothing."""
        return self._import_upload(request, import_rewrites)

    def _import_upload(self, request: Request, importer: Callable[..., ImportReport]) -> Response:
        """Run one all-or-nothing import of the uploaded file: 201 when rows were created, 400 with every problem."""
        study = self.get_object()
        form = serializers.ImportRequestSerializer(data=request.data)
        form.is_valid(raise_exception=True)
        upload = form.validated_data["file"]
        try:
            report = importer(study, upload.read(), filename=upload.name, dry_run=form.validated_data["dry_run"])
        except ImportRejected as rejected:
            return Response({"errors": [p.as_dict() for p in rejected.problems]}, status=status.HTTP_400_BAD_REQUEST)
        code = status.HTTP_201_CREATED if report.created and not report.dry_run else status.HTTP_200_OK
        return Response(report.as_dict(), status=code)

    @extend_schema(
        request=serializers.SampleRequestSerializer,
        responses={200: serializers.SampleResultSerializer, 409: serializers.DetailSerializer},
    )
    @action(detail=True, methods=["post"], parser_classes=[BoundedJSONParser, FormParser, MultiPartParser])
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
                one_pair_per_exam=form.validated_data["one_pair_per_exam"],
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
        request=serializers.GuideRequestSerializer,
        responses={200: serializers.StudyGuideSerializer, 201: serializers.StudyGuideSerializer,
                   400: serializers.DetailSerializer},
    )  # fmt: skip
    @action(detail=True, methods=["get", "post"], parser_classes=[BoundedJSONParser, FormParser, MultiPartParser])
    def guide(self, request: Request, slug: str | None = None) -> Response:
        """The study's reader guide (Markdown): its current version, every version, who confirmed which.
        POST {"text"} saves a new version (201), or changes nothing if the text is the current one's (200)."""
        study = self.get_object()
        created = None
        if request.method == "POST":
            form = serializers.GuideRequestSerializer(data=request.data)
            if not form.is_valid():
                field, problems = next(iter(form.errors.items()))
                return Response({"detail": f"{field}: {problems[0]}"}, status=status.HTTP_400_BAD_REQUEST)
            try:
                _, created = publish_guide(study, form.validated_data["text"], author=request.user)
            except GuideRefused as refused:
                return Response({"detail": str(refused)}, status=status.HTTP_400_BAD_REQUEST)
        versions = list(study.guide_versions.select_related("author").order_by("-number"))
        current = versions[0] if versions else None
        body = {
            "version": current.number if current else None,
            "text": current.text if current else "",
            "html": str(render_guide(current.text)) if current else "",
            "versions": versions,
            "confirmations": confirmations(study),
        }
        if created is not None:
            body["created"] = created
        code = status.HTTP_201_CREATED if created else status.HTTP_200_OK
        return Response(serializers.StudyGuideSerializer(body).data, status=code)

    @extend_schema(
        request={"multipart/form-data": serializers.ImportRequestSerializer},
        responses={200: serializers.PracticeStatusSerializer, 201: serializers.PracticeImportResultSerializer,
                   400: serializers.ImportErrorSerializer},
    )  # fmt: skip
    @action(detail=True, methods=["get", "post"], parser_classes=[MultiPartParser, FormParser])
    def practice(self, request: Request, slug: str | None = None) -> Response:
        """GET: the practice round (requirement, items per task, who skips it, each reader's agreement with the
        reference). POST: import practice items from a CSV or JSON Lines file, all or nothing."""
        study = self.get_object()
        if request.method == "POST":
            form = serializers.ImportRequestSerializer(data=request.data)
            form.is_valid(raise_exception=True)
            upload = form.validated_data["file"]
            try:
                report = import_practice_items(
                    study, upload.read(), filename=upload.name, dry_run=form.validated_data["dry_run"],
                    actor=request.user,
                )  # fmt: skip
            except ImportRejected as rejected:
                return Response(
                    {"errors": [p.as_dict() for p in rejected.problems]}, status=status.HTTP_400_BAD_REQUEST
                )
            code = status.HTTP_201_CREATED if report.created and not report.dry_run else status.HTTP_200_OK
            return Response(serializers.PracticeImportResultSerializer(report.as_dict()).data, status=code)
        return Response(serializers.PracticeStatusSerializer(_practice_status(study)).data)

    @extend_schema(
        request=serializers.PracticeSettingsRequestSerializer,
        responses={200: serializers.PracticeStatusSerializer, 400: serializers.DetailSerializer},
    )
    @action(
        detail=True, methods=["post"], url_path="practice-settings",
        parser_classes=[BoundedJSONParser, FormParser, MultiPartParser],
    )  # fmt: skip
    def practice_settings(self, request: Request, slug: str | None = None) -> Response:
        """Set how many practice items per task come first ({"practice_items_required"}), and/or let a member skip
        practice ({"username", "skip_practice"}; an automated judge's enrolment says whether it practises)."""
        study = self.get_object()
        form = serializers.PracticeSettingsRequestSerializer(data=request.data)
        if not form.is_valid():
            field, problems = next(iter(form.errors.items()))
            where = "" if field == api_settings.NON_FIELD_ERRORS_KEY else f"{field}: "
            return Response({"detail": f"{where}{problems[0]}"}, status=status.HTTP_400_BAD_REQUEST)
        data = form.validated_data
        try:
            if "username" in data:
                # Checked first: a refusal changes nothing.
                set_skip_practice(study, data["username"], data["skip_practice"], actor=request.user)
            if "practice_items_required" in data:
                set_practice_requirement(study, data["practice_items_required"], actor=request.user)
        except PracticeRefused as refused:
            return Response({"detail": str(refused)}, status=status.HTTP_400_BAD_REQUEST)
        return Response(serializers.PracticeStatusSerializer(_practice_status(study)).data)


def _practice_status(study: Study) -> dict:
    items = dict(
        PracticeItem.objects.filter(study=study).values("task").annotate(n=Count("pk")).values_list("task", "n")
    )
    return {
        "practice_items_required": study.practice_items_required,
        "items": {task: items.get(task, 0) for task in Task.values},
        "skip_practice": sorted(
            set(StudyMember.objects.filter(study=study, skip_practice=True).values_list("user__username", flat=True))
        ),
        "agreement": agreement_by_reader(study),
    }
