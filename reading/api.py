"""The reader API (/api/reading/): the next item, an item, a rating, undo, progress, the guide and
practice, for radiologists (RadiologistReads) and automated judges (judges.api.JudgeReads), chosen
once per request."""

import dataclasses
import uuid

from django.db.models import QuerySet
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework import status, viewsets
from rest_framework.decorators import action
from rest_framework.exceptions import NotFound, ValidationError
from rest_framework.parsers import FormParser, MultiPartParser
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.settings import api_settings

from annotation.guide import (
    GuideRefused,
    confirm_guide,
    guide_changes,
    guide_status,
    render_guide,
)
from annotation.models import (
    Assignment,
    AssignmentStatus,
    PracticeAttempt,
    Study,
    Task,
)
from annotation.parsers import BoundedJSONParser
from annotation.permissions import IsAdjudicator, IsReaderOrJudge
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
from annotation.reading import api_payload, queue_position, reading_item, undo_seconds_left
from annotation.serializers import DetailSerializer, QueueSerializer, ReadingItemSerializer, reading_item_data
from consensus import reserve
from consensus.adjudication import adjudication_queue, prior_ratings
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
from judges import api as judge_api
from judges.services import is_judge
from reading import serializers


def _reading_payload(assignment: Assignment) -> dict:
    stored = getattr(assignment, "annotation", None) if assignment.status != AssignmentStatus.OPEN else None
    return api_payload(
        reading_item(assignment.example, report_a_type=assignment.report_a_type),
        assignment.public_id,
        assignment.example.study,
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
        attempt.study,
        practice=True,
        remaining=practice_required(attempt.reader, attempt.study, attempt.task),
        form_token=uuid.uuid4(),
    )


def _rating_refused(detail: str, field: str | None) -> Response:
    return Response({"detail": detail, "field": field}, status=status.HTTP_400_BAD_REQUEST)


def _form_refused(form) -> Response:
    """400 naming the first field at fault (null for an error of the whole form)."""
    field, problems = next(iter(form.errors.items()))
    return _rating_refused(str(problems[0]), None if field == api_settings.NON_FIELD_ERRORS_KEY else field)


def _submission_refused(refused: SubmissionRefused, fetch: str) -> Response:
    """A rating or decision the services refused, as the API answers it: 400 naming the field (or what
    to fetch first, for one never shown), or 409 with the stored one when it was already given."""
    if isinstance(refused, NotShownYet):
        return _rating_refused(f"Fetch {fetch}.", None)
    if isinstance(refused, AlreadySubmitted):
        stored = refused.annotation
        body = {"rating": stored.rating, "rationale": stored.rationale, "created": False, "next": None}
        return Response(body, status=status.HTTP_409_CONFLICT)
    return _rating_refused(str(refused), refused.field)


def _task_parameter(request: Request) -> str:
    task = request.query_params.get("task")
    if task not in Task.values:
        # As every error of the API: {"detail"}, here with the field it is about.
        raise ValidationError({"detail": f"task: give task={' or task='.join(Task.values)}.", "field": "task"})
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
        return Response(reading_item_data(_reading_payload(assignment)))

    def retrieve_item(self, assignment_id: str) -> Response:
        assignment = _own_assignment(self.request, assignment_id)
        if assignment.status == AssignmentStatus.OPEN:
            if step := pending_step(self.user, assignment.example.study, assignment.task):
                return _step_refusal(step, assignment.example.study, assignment.task)
            show_assignment(assignment)
        return Response(reading_item_data(_reading_payload(assignment)))

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
        except SubmissionRefused as refused:
            return _submission_refused(refused, f"the item first: GET /api/reading/{assignment_id}/")
        except NoSuchWork:
            raise NotFound from None
        example = result.annotation.example
        body = {
            "rating": result.annotation.rating,
            "rationale": result.annotation.rationale,
            "created": result.created,
            "next": reserve.next_assignment_id(self.user, task=example.task, study_id=example.study_id),
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
        return Response(QueueSerializer(reserve.reader_queues(self.user), many=True).data)


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
        responses={200: ReadingItemSerializer, 204: None, 400: serializers.RatingErrorSerializer},
    )
    @action(detail=False, methods=["get"])
    def next(self, request: Request) -> Response:
        """The next open assignment of a queue (204 when the queue is done). Starts its time on task."""
        return self.reads.next_item(_task_parameter(request), request.query_params.get("study"))

    @extend_schema(parameters=[ASSIGNMENT_ID], responses={200: ReadingItemSerializer})
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
            return _form_refused(form)
        return self.reads.rate_item(assignment_id, form.validated_data)

    @extend_schema(
        request=None,
        responses={200: serializers.UndoResultSerializer, 409: DetailSerializer},
    )
    @action(detail=False, methods=["post"])
    def undo(self, request: Request) -> Response:
        """Take back your last rating while its undo window is open (until your next rating, or the study's
        window, 2 minutes by default). The item is open again, first in its queue; the answer holds what you
        had sent. Once the rating has settled: 409 with the reason (a coordinator can void it)."""
        # It takes no body, but a malformed or too deeply nested one is refused as everywhere else.
        request.data  # noqa: B018 (parsing is the point)
        return self.reads.undo()

    @extend_schema(responses={200: QueueSerializer(many=True)})
    @action(detail=False, methods=["get"])
    def progress(self, request: Request) -> Response:
        """Your queues: done / assigned per study and task. Nothing about other readers."""
        return self.reads.progress()

    @extend_schema(
        parameters=[OpenApiParameter("study", str, required=True, description="Study slug.")],
        request=serializers.ConfirmGuideRequestSerializer,
        responses={200: serializers.ReaderGuideSerializer, 201: serializers.ConfirmGuideResultSerializer,
                   404: DetailSerializer, 409: DetailSerializer},
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
            return _form_refused(form)
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


# --- The adjudicator's API ------------------------------------------------------------------------


def _adjudication_payload(adjudication: Adjudication) -> dict:
    """The page's adjudication as the API sends it, built by the one payload builder."""
    queue = adjudication_queue(adjudication.adjudicator, study_id=adjudication.example.study_id)
    is_open = adjudication.status == AdjudicationStatus.OPEN
    return api_payload(
        reading_item(adjudication.example, report_a_type=adjudication.report_a_type),
        adjudication.public_id,
        adjudication.example.study,
        rating=None if is_open else adjudication.rating,
        rationale=None if is_open else adjudication.rationale,
        priors=[dataclasses.asdict(prior) for prior in prior_ratings(adjudication)],
        position=queue["done"] + (1 if is_open else 0),
        total=queue["total"],
        status="open" if is_open else "done",
        form_token=uuid.uuid4() if is_open else None,
    )


def _own_adjudication(request: Request, adjudication_id: uuid.UUID | str) -> Adjudication:
    """The caller's adjudication, open or decided (a voided one, or another adjudicator's, is 404)."""
    found = (
        Adjudication.objects.filter(adjudicator=request.user, public_id=adjudication_id)
        .exclude(status=AdjudicationStatus.VOIDED)
        .select_related("adjudicator", "example__pair", "example__study")
        .first()
    )
    if found is None:
        raise NotFound
    return found


ADJUDICATION_ID = OpenApiParameter(
    "adjudication_id", OpenApiTypes.UUID, OpenApiParameter.PATH, description="The adjudication's id."
)


class AdjudicationViewSet(viewsets.ViewSet):
    """The adjudicator's side: the next three-way split to decide, one of yours, and the decision,
    with the page's blinding (the three ratings shuffled, without names) and its exactly-once rule."""

    permission_classes = [IsAdjudicator]
    parser_classes = [BoundedJSONParser, FormParser, MultiPartParser]
    lookup_field = "adjudication_id"
    lookup_value_regex = ReadingViewSet.lookup_value_regex

    @extend_schema(
        parameters=[OpenApiParameter("study", str, description="Study slug; default: any study.")],
        responses={200: serializers.AdjudicationItemSerializer, 204: None},
    )
    @action(detail=False, methods=["get"])
    def next(self, request: Request) -> Response:
        """Your next open adjudication, shown (204 when none waits)."""
        study = None
        if slug := request.query_params.get("study"):
            study = Study.objects.filter(slug=slug).values_list("pk", flat=True).first()
            if study is None:
                return Response(status=status.HTTP_204_NO_CONTENT)
        following = adjudication_queue(request.user, study_id=study)["next"]
        if following is None:
            return Response(status=status.HTTP_204_NO_CONTENT)
        return self._shown(_own_adjudication(request, following.public_id))

    @extend_schema(parameters=[ADJUDICATION_ID], responses={200: serializers.AdjudicationItemSerializer})
    def retrieve(self, request: Request, adjudication_id: str | None = None) -> Response:
        """One of your adjudications (another adjudicator's is 404). An open one is shown by this."""
        return self._shown(_own_adjudication(request, adjudication_id))

    @extend_schema(
        parameters=[ADJUDICATION_ID],
        request=serializers.RatingRequestSerializer,
        responses={
            201: serializers.DecisionResultSerializer,
            200: serializers.DecisionResultSerializer,
            400: serializers.RatingErrorSerializer,
            409: serializers.DecisionResultSerializer,
        },
    )
    @action(detail=True, methods=["post"])
    def decision(self, request: Request, adjudication_id: str | None = None) -> Response:
        """Decide, after fetching it: your rating becomes the consensus; a rationale is always required.
        The same form_token again answers with the stored decision."""
        form = serializers.RatingRequestSerializer(data=request.data)
        if not form.is_valid():
            return _form_refused(form)
        adjudication = _own_adjudication(request, adjudication_id)
        token = form.validated_data["form_token"]
        created = adjudication.form_token != token
        try:
            decided = submit_adjudication(
                adjudicator=request.user,
                adjudication_id=adjudication.public_id,
                rating=form.validated_data["rating"],
                rationale=form.validated_data["rationale"],
                form_token=token,
                require_shown=True,
            )
        except SubmissionRefused as refused:
            return _submission_refused(refused, f"the adjudication first: GET /api/adjudications/{adjudication_id}/")
        except NoSuchWork:
            raise NotFound from None
        following = adjudication_queue(request.user, study_id=adjudication.example.study_id)["next"]
        body = {
            "rating": decided.rating,
            "rationale": decided.rationale,
            "created": created,
            "next": following.public_id if following else None,
        }
        return Response(body, status=status.HTTP_201_CREATED if created else status.HTTP_200_OK)

    def _shown(self, adjudication: Adjudication) -> Response:
        if adjudication.status == AdjudicationStatus.OPEN:
            adjudication = show_adjudication(adjudication)
        return Response(serializers.AdjudicationItemSerializer(_adjudication_payload(adjudication)).data)
