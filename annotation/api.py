import uuid
from collections.abc import Callable

from django.db.models import Count, QuerySet
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework import mixins, status, viewsets
from rest_framework.decorators import action
from rest_framework.exceptions import NotFound, ValidationError
from rest_framework.parsers import FormParser, MultiPartParser
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.settings import api_settings

from annotation import serializers
from annotation.guide import (
    GuideRefused,
    confirm_guide,
    confirmations,
    guide_changes,
    guide_status,
    publish_guide,
    render_guide,
)
from annotation.importing import ImportRejected
from annotation.models import (
    Assignment,
    AssignmentStatus,
    CandidatePair,
    Dataset,
    PracticeAttempt,
    PracticeItem,
    Study,
    StudyMember,
    Task,
    Verdict,
)
from annotation.parsers import BoundedJSONParser
from annotation.permissions import IsCoordinator, IsReaderOrJudge
from annotation.practice import (
    PendingStep,
    PracticeRefused,
    agreement_by_reader,
    import_practice_items,
    next_practice,
    pending_step,
    practice_reading_item,
    practice_required,
    set_practice_requirement,
    set_skip_practice,
    show_practice,
    submit_practice,
)
from annotation.reading import api_payload, queue_position, reading_item, undo_seconds_left
from annotation.services import ImportReport, SamplingRefused, import_pairs, import_rewrites, sample_pairs
from consensus import reserve
from consensus.conflicts import hidden_pair_ids, mark_hidden
from consensus.services import (
    AlreadySubmitted,
    NoSuchWork,
    NotShownYet,
    SubmissionRefused,
    UndoRefused,
    show_assignment,
    submit_annotation,
    undo_last_rating,
)
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


# --- Reader API -------------------------------------------------------------------------------


def _reading_payload(assignment: Assignment) -> dict:
    stored = getattr(assignment, "annotation", None) if assignment.status != AssignmentStatus.OPEN else None
    return api_payload(
        reading_item(assignment.example, report_a_type=assignment.report_a_type),
        assignment.public_id,
        rating=stored.rating if stored else None,
        rationale=stored.rationale if stored else None,
        position=queue_position(assignment),
        status=assignment.status,
        form_token=uuid.uuid4() if assignment.status == AssignmentStatus.OPEN else None,
    )


def _own_assignment(request: Request, assignment_id: uuid.UUID | str) -> Assignment:
    try:
        return Assignment.objects.visible_to(request.user).get(public_id=assignment_id)
    except Assignment.DoesNotExist:
        raise NotFound from None


def _step_refusal(step: PendingStep, study: Study, task: str) -> Response:
    """409: what comes before the reader's next real item (the guide, or practice), and where."""
    return Response(step.refusal(study, task), status=status.HTTP_409_CONFLICT)


def _reader_study(request: Request, reads: "RadiologistReads | judge_api.JudgeReads") -> Study:
    slug = request.query_params.get("study")
    if not slug:
        raise ValidationError({"study": "Give the study's slug: study=<slug>."})
    study = reads.studies_with_steps().filter(slug=str(slug)).first()
    if study is None:
        raise NotFound("No such study of yours.")
    return study


def _practice_payload(attempt: PracticeAttempt) -> dict:
    return api_payload(
        practice_reading_item(attempt),
        attempt.public_id,
        practice=True,
        remaining=practice_required(attempt.reader, attempt.study, attempt.task),
        form_token=uuid.uuid4(),
    )


def _rating_refused(detail: str, field: str | None) -> Response:
    return Response({"detail": detail, "field": field}, status=status.HTTP_400_BAD_REQUEST)


def _task_parameter(request: Request) -> str:
    task = request.query_params.get("task")
    if task not in Task.values:
        raise ValidationError({"task": f"Give task={' or task='.join(Task.values)}."})
    return task


class RadiologistReads:
    """A radiologist's side of the reader API: their queues, routed by consensus. An automated judge's
    is judges.api.JudgeReads, with the same methods; ReadingViewSet chooses one per request."""

    def __init__(self, request: Request) -> None:
        self.request = request
        self.user = request.user

    def studies_with_steps(self) -> QuerySet[Study]:
        """The studies whose guide and practice the reader goes through."""
        return Study.objects.of_reader(self.user)

    def next_item(self, task: str, study_slug: str | None) -> Response:
        assignment = reserve.next_assignment(self.user, task=task, study_slug=study_slug)
        if assignment is None:
            return Response(status=status.HTTP_204_NO_CONTENT)
        if step := pending_step(self.user, assignment.example.study, task):
            return _step_refusal(step, assignment.example.study, task)
        show_assignment(assignment)
        return Response(serializers.ReadingItemSerializer(_reading_payload(assignment)).data)

    def retrieve_item(self, assignment_id: str) -> Response:
        assignment = _own_assignment(self.request, assignment_id)
        if assignment.status == AssignmentStatus.OPEN:
            if step := pending_step(self.user, assignment.example.study, assignment.task):
                return _step_refusal(step, assignment.example.study, assignment.task)
            show_assignment(assignment)
        return Response(serializers.ReadingItemSerializer(_reading_payload(assignment)).data)

    def rate_item(self, assignment_id: str, validated: dict) -> Response:
        try:
            result = submit_annotation(
                reader=self.user,
                assignment_id=assignment_id,
                rating=validated["rating"],
                rationale=validated["rationale"],
                form_token=validated["form_token"],
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
        except NoSuchWork:
            raise NotFound from None
        example = result.annotation.example
        following = reserve.next_assignment(self.user, task=example.task, study_id=example.study_id)
        body = {
            "rating": result.annotation.rating,
            "rationale": result.annotation.rationale,
            "created": result.created,
            "next": following.public_id if following else None,
            "undo_seconds": undo_seconds_left(result.annotation),
        }
        return Response(body, status=status.HTTP_201_CREATED if result.created else status.HTTP_200_OK)

    def undo(self) -> Response:
        try:
            result = undo_last_rating(self.user)
        except UndoRefused as refused:
            return Response({"detail": str(refused)}, status=status.HTTP_409_CONFLICT)
        body = {
            "id": result.assignment.public_id,
            "rating": result.rating,
            "rationale": result.rationale,
            "detail": "Your rating was taken back. Rate the item again (GET /api/reading/<id>/), or later.",
        }
        return Response(serializers.UndoResultSerializer(body).data)

    def progress(self) -> Response:
        return Response(serializers.QueueSerializer(reserve.reader_queues(self.user), many=True).data)


ASSIGNMENT_ID = OpenApiParameter(
    "assignment_id", OpenApiTypes.UUID, OpenApiParameter.PATH, description="The assignment's id."
)


class ReadingViewSet(viewsets.ViewSet):
    """The reader's side: fetch the next blinded assignment, rate it, see your progress.

    An automated judge uses exactly these endpoints and gets the same payloads, under the same
    blinding, from its own queue: initial() chooses, once per request, whose queues answer (a
    radiologist's, RadiologistReads, or a judge's, judges.api.JudgeReads); a judge's rating is stored
    and audited but never routed.
    """

    permission_classes = [IsReaderOrJudge]
    # The router builds regex routes (its converter setting is ignored): only a UUID-shaped id
    # resolves, anything else is a plain 404 rather than a server error in the lookup.
    lookup_field = "assignment_id"
    lookup_value_regex = "[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}"

    def initial(self, request: Request, *args, **kwargs) -> None:
        super().initial(request, *args, **kwargs)  # authenticated and permitted: a reader or a judge
        self.reads = judge_api.JudgeReads(request) if is_judge(request.user) else RadiologistReads(request)

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
        return self.reads.next_item(_task_parameter(request), request.query_params.get("study"))

    @extend_schema(parameters=[ASSIGNMENT_ID], responses={200: serializers.ReadingItemSerializer})
    def retrieve(self, request: Request, assignment_id: str | None = None) -> Response:
        """One of your assignments (another reader's is 404)."""
        return self.reads.retrieve_item(assignment_id)

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
        return self.reads.rate_item(assignment_id, form.validated_data)

    @extend_schema(
        request=None,
        responses={200: serializers.UndoResultSerializer, 409: serializers.DetailSerializer},
    )
    @action(detail=False, methods=["post"])
    def undo(self, request: Request) -> Response:
        """Take back your last rating while its undo window is open (until your next rating, or the study's
        window, 2 minutes by default). The item is open again, first in its queue; the answer holds what you
        had sent. Once the rating has settled: 409 with the reason (a coordinator can void it)."""
        # It takes no body, but a malformed or too deeply nested one is refused as everywhere else.
        request.data  # noqa: B018 (parsing is the point)
        return self.reads.undo()

    @extend_schema(responses={200: serializers.QueueSerializer(many=True)})
    @action(detail=False, methods=["get"])
    def progress(self, request: Request) -> Response:
        """Your queues: done / assigned per study and task. Nothing about other readers."""
        return self.reads.progress()

    @extend_schema(
        parameters=[OpenApiParameter("study", str, required=True, description="Study slug.")],
        request=serializers.ConfirmGuideRequestSerializer,
        responses={200: serializers.ReaderGuideSerializer, 201: serializers.ConfirmGuideResultSerializer,
                   404: serializers.DetailSerializer, 409: serializers.DetailSerializer},
    )  # fmt: skip
    @action(detail=False, methods=["get", "post"], parser_classes=[BoundedJSONParser, FormParser, MultiPartParser])
    def guide(self, request: Request) -> Response:
        """GET ?study=<slug>: the study's guide, the version you confirmed and what changed since. POST
        {"study", "version"}: confirm you read that version (it must be the current one; 409 otherwise)."""
        if request.method == "POST":
            form = serializers.ConfirmGuideRequestSerializer(data=request.data)
            form.is_valid(raise_exception=True)
            study = self.reads.studies_with_steps().filter(slug=form.validated_data["study"]).first()
            if study is None or not study.guide_number:
                raise NotFound("No guide of a study of yours.")
            try:
                ack, created = confirm_guide(request.user, study, form.validated_data["version"])
            except GuideRefused as refused:
                return Response({"detail": str(refused)}, status=status.HTTP_409_CONFLICT)
            body = {"study": study.slug, "version": ack.version.number, "confirmed_at": ack.created_at,
                    "created": created}  # fmt: skip
            code = status.HTTP_201_CREATED if created else status.HTTP_200_OK
            return Response(serializers.ConfirmGuideResultSerializer(body).data, status=code)
        study = _reader_study(request, self.reads)
        state = guide_status(request.user, study)
        if state.current is None:
            raise NotFound("This study has no guide.")
        changes = None
        if state.needs_confirmation and state.confirmed is not None:
            changes = guide_changes(state.confirmed.text, state.current.text)
        body = {
            "study": study.slug,
            "version": state.current.number,
            "text": state.current.text,
            "html": str(render_guide(state.current.text)),
            "confirmed_version": state.confirmed.number if state.confirmed else None,
            "needs_confirmation": state.needs_confirmation,
            "changes": changes,
        }
        return Response(serializers.ReaderGuideSerializer(body).data)

    @extend_schema(
        parameters=[
            OpenApiParameter("study", str, required=True, description="Study slug."),
            OpenApiParameter("task", str, enum=Task.values, required=True),
        ],
        responses={200: serializers.PracticeItemSerializer, 204: None, 409: serializers.PendingStepSerializer},
    )
    @action(detail=False, methods=["get"], url_path="practice")
    def practice(self, request: Request) -> Response:
        """Your next practice item of a study and task, shown exactly as a real item (204 when none is due)."""
        task = _task_parameter(request)
        study = _reader_study(request, self.reads)
        step = pending_step(request.user, study, task)
        if step is not None and step.kind == "guide":
            return _step_refusal(step, study, task)
        attempt = next_practice(request.user, study, task)
        if attempt is None:
            return Response(status=status.HTTP_204_NO_CONTENT)
        show_practice(attempt)
        return Response(serializers.PracticeItemSerializer(_practice_payload(attempt)).data)

    @extend_schema(
        parameters=[OpenApiParameter("attempt_id", OpenApiTypes.UUID, OpenApiParameter.PATH)],
        request=serializers.RatingRequestSerializer,
        responses={201: serializers.PracticeResultSerializer, 200: serializers.PracticeResultSerializer,
                   400: serializers.RatingErrorSerializer},
    )  # fmt: skip
    @action(
        detail=False, methods=["post"],
        url_path=r"practice/(?P<attempt_id>[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12})/rating",
    )  # fmt: skip
    def practice_rating(self, request: Request, attempt_id: str) -> Response:
        """Rate your practice item: the answer holds the reference rating and its explanation. Practice ratings
        are never study data."""
        form = serializers.RatingRequestSerializer(data=request.data)
        if not form.is_valid():
            field, problems = next(iter(form.errors.items()))
            return _rating_refused(str(problems[0]), None if field == api_settings.NON_FIELD_ERRORS_KEY else field)
        try:
            attempt, created = submit_practice(
                reader=request.user,
                attempt_id=attempt_id,
                rating=form.validated_data["rating"],
                rationale=form.validated_data["rationale"],
                form_token=form.validated_data["form_token"],
            )
        except PracticeAttempt.DoesNotExist:
            raise NotFound from None
        except PracticeRefused as refused:
            return _rating_refused(str(refused), refused.field)
        body = {
            "rating": attempt.rating,
            "rationale": attempt.rationale,
            "reference_rating": attempt.item.reference_rating,
            "explanation": attempt.item.explanation,
            "agrees": attempt.agrees,
            "created": created,
            "remaining": practice_required(request.user, attempt.study, attempt.task),
        }
        code = status.HTTP_201_CREATED if created else status.HTTP_200_OK
        return Response(serializers.PracticeResultSerializer(body).data, status=code)
