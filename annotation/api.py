import uuid

from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework import mixins, status, viewsets
from rest_framework.decorators import action
from rest_framework.exceptions import NotFound as NotFoundError
from rest_framework.exceptions import ValidationError
from rest_framework.parsers import FormParser, MultiPartParser
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.settings import api_settings

from annotation import serializers
from annotation.importing import ImportRejected
from annotation.models import Assignment, AssignmentStatus, CandidatePair, Dataset, Study, Task, Verdict
from annotation.parsers import BoundedJSONParser
from annotation.permissions import IsCoordinator, IsReaderOrJudge
from annotation.reading import next_assignment, queue_position, reader_queues, reading_item
from annotation.services import SamplingRefused, import_pairs, sample_pairs
from consensus.conflicts import hidden_pair_ids, mark_hidden
from consensus.services import (
    AlreadySubmitted,
    NotShownYet,
    SubmissionRefused,
    show_assignment,
    submit_annotation,
)
from consensus.services import NotFound as ConsensusNotFound
from judges import api as judge_api
from judges.services import is_judge


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
        """The study's candidate pairs, paginated. A pair you still have to rate is masked: {"hidden": true, ...}."""
        study = self.get_object()
        pairs = CandidatePair.objects.filter(study=study).select_related("dataset", "variation")
        if verdict := request.query_params.get("verdict"):
            pairs = pairs.filter(verdict=verdict)
        if (sampled := request.query_params.get("sampled")) is not None:
            pairs = pairs.filter(sampled=sampled.lower() in ("1", "true", "yes"))
        page = mark_hidden(self.paginate_queryset(pairs), hidden_pair_ids(request.user, study), "pk")
        return self.get_paginated_response(serializers.CandidatePairSerializer(page, many=True).data)


# --- Reader API -------------------------------------------------------------------------------


def _reading_payload(assignment: Assignment) -> dict:
    item = reading_item(assignment.example, report_a_type=assignment.report_a_type)
    position = queue_position(assignment)
    stored = getattr(assignment, "annotation", None) if assignment.status != AssignmentStatus.OPEN else None
    return {
        "id": assignment.public_id,
        "task": item.task,
        "question": item.question,
        "position": position,
        "context": {name.lower(): text for name, text in item.context},
        "reports": item.reports,
        "labels": item.labels,
        "status": assignment.status,
        "form_token": uuid.uuid4() if assignment.status == AssignmentStatus.OPEN else None,
        "rating": stored.rating if stored else None,
        "rationale": stored.rationale if stored else None,
    }


def _own_assignment(request: Request, assignment_id: uuid.UUID | str) -> Assignment:
    try:
        return (
            Assignment.objects.select_related("example__pair", "example__study", "annotation")
            .exclude(status=AssignmentStatus.WITHDRAWN)
            .get(public_id=assignment_id, reader=request.user)
        )
    except Assignment.DoesNotExist:
        raise NotFoundError from None


def _rating_refused(detail: str, field: str | None) -> Response:
    return Response({"detail": detail, "field": field}, status=status.HTTP_400_BAD_REQUEST)


ASSIGNMENT_ID = OpenApiParameter(
    "assignment_id", OpenApiTypes.UUID, OpenApiParameter.PATH, description="The assignment's id."
)


class ReadingViewSet(viewsets.ViewSet):
    """The reader's side: fetch the next blinded assignment, rate it, see your progress.

    An automated judge uses exactly these endpoints and gets the same payloads, under the same
    blinding, from its own queue: each action hands a judge's request to judges.api, and a
    judge's rating is stored and audited but never routed.
    """

    permission_classes = [IsReaderOrJudge]
    # The router builds regex routes (its converter setting is ignored): only a UUID-shaped id
    # resolves, anything else is a plain 404 rather than a server error in the lookup.
    lookup_field = "assignment_id"
    lookup_value_regex = "[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}"

    @extend_schema(
        parameters=[
            OpenApiParameter("task", str, enum=Task.values, required=True),
            OpenApiParameter("study", str, description="Study slug; default: any study with open work."),
        ],
        responses={200: serializers.ReadingItemSerializer, 204: None},
    )
    @action(detail=False, methods=["get"])
    def next(self, request: Request) -> Response:
        """The next open assignment of a queue (204 when the queue is done). Starts its time on task."""
        task = request.query_params.get("task")
        if task not in Task.values:
            raise ValidationError({"task": f"Give task={' or task='.join(Task.values)}."})
        if is_judge(request.user):
            return judge_api.next_item(request, task, request.query_params.get("study"))
        assignment = next_assignment(request.user, task=task, study_slug=request.query_params.get("study"))
        if assignment is None:
            return Response(status=status.HTTP_204_NO_CONTENT)
        show_assignment(assignment)
        return Response(serializers.ReadingItemSerializer(_reading_payload(assignment)).data)

    @extend_schema(parameters=[ASSIGNMENT_ID], responses={200: serializers.ReadingItemSerializer})
    def retrieve(self, request: Request, assignment_id: str | None = None) -> Response:
        """One of your assignments (another reader's is 404)."""
        if is_judge(request.user):
            return judge_api.retrieve_item(request, assignment_id)
        assignment = _own_assignment(request, assignment_id)
        if assignment.status == AssignmentStatus.OPEN:
            show_assignment(assignment)
        return Response(serializers.ReadingItemSerializer(_reading_payload(assignment)).data)

    @extend_schema(
        parameters=[ASSIGNMENT_ID],
        request=serializers.RatingRequestSerializer,
        responses={
            201: serializers.RatingResultSerializer,
            200: serializers.RatingResultSerializer,
            400: serializers.RatingErrorSerializer,
            409: serializers.RatingResultSerializer,
        },
    )
    @action(detail=True, methods=["post"])
    def rating(self, request: Request, assignment_id: str | None = None) -> Response:
        """Rate your assignment, after fetching it. Sending the same form_token again is harmless: it answers
        with the stored rating. A refused rating is a 400 naming the field at fault (null if none)."""
        form = serializers.RatingRequestSerializer(data=request.data)
        if not form.is_valid():
            field, problems = next(iter(form.errors.items()))
            return _rating_refused(str(problems[0]), None if field == api_settings.NON_FIELD_ERRORS_KEY else field)
        if is_judge(request.user):
            # An automated judge: stored and audited, never routed (judges.services).
            return judge_api.rate_item(request, assignment_id, form.validated_data)
        try:
            result = submit_annotation(
                reader=request.user,
                assignment_id=assignment_id,
                rating=form.validated_data["rating"],
                rationale=form.validated_data["rationale"],
                form_token=form.validated_data["form_token"],
                # Never shown, never read: and a Task 2 rating would have no Report A to record.
                require_shown=True,
            )
        except NotShownYet:
            return _rating_refused(f"Fetch the item first: GET /api/reading/{assignment_id}/.", None)
        except AlreadySubmitted as already:
            stored = already.annotation
            body = {"rating": stored.rating, "rationale": stored.rationale, "created": False, "next": None}
            return Response(body, status=status.HTTP_409_CONFLICT)
        except SubmissionRefused as refused:
            return _rating_refused(str(refused), refused.field)
        except ConsensusNotFound:
            raise NotFoundError from None
        example = result.annotation.example
        following = next_assignment(request.user, task=example.task, study_id=example.study_id)
        body = {
            "rating": result.annotation.rating,
            "rationale": result.annotation.rationale,
            "created": result.created,
            "next": following.public_id if following else None,
        }
        return Response(body, status=status.HTTP_201_CREATED if result.created else status.HTTP_200_OK)

    @extend_schema(responses={200: serializers.QueueSerializer(many=True)})
    @action(detail=False, methods=["get"])
    def progress(self, request: Request) -> Response:
        """Your queues: done / assigned per study and task. Nothing about other readers."""
        if is_judge(request.user):
            return judge_api.progress(request)
        return Response(serializers.QueueSerializer(reader_queues(request.user), many=True).data)
