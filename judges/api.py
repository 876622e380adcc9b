"""The judge's side of the reader API, and the coordinator's enrolment endpoint.

reading.api's ReadingViewSet hands a judge's requests to the functions below: the same
routes, the same serializers and the same blinded payload (annotation.reading.reading_item),
built from the judge's own queue. Nothing here routes or counts for people. A judge enrolled to
practise meets the study's guide and practice round first, exactly as a reader does.
"""

import uuid

from django.db.models import QuerySet
from django.shortcuts import get_object_or_404
from drf_spectacular.utils import OpenApiResponse, extend_schema
from rest_framework import status
from rest_framework.exceptions import NotFound
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from annotation.models import Study
from annotation.permissions import IsCoordinator
from annotation.reading import api_payload, reading_item
from annotation.serializers import DetailSerializer, QueueSerializer, reading_item_data
from judges import serializers
from judges.models import JudgeRead
from judges.services import (
    EnrolmentRefused,
    JudgeAlreadyRated,
    JudgeNotShownYet,
    JudgeRatingRefused,
    JudgeReadNotFound,
    enrol_judge,
    judge_pending_step,
    judge_position,
    judge_queues,
    next_judge_read,
    own_judge_read,
    practising_studies,
    show_judge_read,
    submit_judge_rating,
)
from judges.views import enrolment_rows

# --- Reader API, for a judge ----------------------------------------------------------------


def _payload(read: JudgeRead) -> dict:
    return api_payload(
        reading_item(read.example, report_a_type=read.report_a_type),
        read.public_id,
        read.example.study,
        rating=read.rating or None,
        rationale=read.rationale if read.is_rated else None,
        position=judge_position(read),
        status="done" if read.is_rated else "open",
        form_token=None if read.is_rated else uuid.uuid4(),
    )


def _step_refusal(request: Request, read: JudgeRead) -> Response | None:
    """409 as for a reader, when the judge's enrolment says it confirms the guide and practises first."""
    if step := judge_pending_step(request.user, read):
        return Response(step.refusal(read.example.study, read.task), status=status.HTTP_409_CONFLICT)
    return None


class JudgeReads:
    """An automated judge's side of the reader API (reading.api.ReadingViewSet chooses it for a
    judge's request): its own queue of judge reads, the same blinded payloads, ratings stored and
    audited but never routed, and never taken back."""

    def __init__(self, request: Request) -> None:
        self.request = request
        self.user = request.user

    def studies_with_steps(self) -> QuerySet[Study]:
        """The studies whose guide and practice the judge goes through: those it is enrolled in to
        practise (a judge that skips them has none)."""
        return practising_studies(self.user)

    def next_item(self, task: str, study_slug: str | None) -> Response:
        read = next_judge_read(self.user, task=task, study_slug=study_slug)
        if read is None:
            return Response(status=status.HTTP_204_NO_CONTENT)
        if refusal := _step_refusal(self.request, read):
            return refusal
        show_judge_read(read)
        return Response(reading_item_data(_payload(read)))

    def retrieve_item(self, read_id: str) -> Response:
        try:
            read = own_judge_read(self.user, read_id)
        except JudgeReadNotFound:
            raise NotFound from None
        if not read.is_rated:
            if refusal := _step_refusal(self.request, read):
                return refusal
            show_judge_read(read)
        return Response(reading_item_data(_payload(read)))

    def rate_item(self, read_id: str, validated: dict) -> Response:
        try:
            read, created = submit_judge_rating(
                judge=self.user,
                read_id=read_id,
                rating=validated["rating"],
                rationale=validated["rationale"],
                form_token=validated["form_token"],
            )
        except JudgeReadNotFound:
            raise NotFound from None
        except JudgeNotShownYet:
            return _refused(f"Fetch the item first: GET /api/reading/{read_id}/.", None)
        except JudgeAlreadyRated as already:
            body = {"rating": already.read.rating, "rationale": already.read.rationale, "created": False, "next": None}
            return Response(body, status=status.HTTP_409_CONFLICT)
        except JudgeRatingRefused as refused:
            return _refused(str(refused), refused.field)
        following = next_judge_read(self.user, task=read.task, study_id=read.study_id)
        body = {
            "rating": read.rating,
            "rationale": read.rationale,
            "created": created,
            "next": following.public_id if following else None,
            "undo_seconds": 0,  # a judge's ratings are final: never taken back
        }
        return Response(body, status=status.HTTP_201_CREATED if created else status.HTTP_200_OK)

    def undo(self) -> Response:
        detail = "An automated judge's ratings are final: they cannot be taken back."
        return Response({"detail": detail}, status=status.HTTP_409_CONFLICT)

    def progress(self) -> Response:
        return Response(QueueSerializer(judge_queues(self.user), many=True).data)


def _refused(detail: str, field: str | None) -> Response:
    return Response({"detail": detail, "field": field}, status=status.HTTP_400_BAD_REQUEST)


# --- Coordinator: enrol judges ----------------------------------------------------------------


class StudyJudgesView(APIView):
    permission_classes = [IsCoordinator]

    @extend_schema(tags=["coordination"], responses=serializers.JudgeEnrolmentSerializer(many=True))
    def get(self, request: Request, slug: str) -> Response:
        """The study's automated judges with their reads per task (never counted in progress or workload)."""
        study = get_object_or_404(Study, slug=slug)
        return Response(serializers.JudgeEnrolmentSerializer(enrolment_rows(study), many=True).data)

    @extend_schema(
        tags=["coordination"],
        request=serializers.EnrolJudgeRequestSerializer,
        responses={
            201: serializers.EnrolJudgeResultSerializer,
            200: serializers.EnrolJudgeResultSerializer,
            409: OpenApiResponse(DetailSerializer, description="Refused: the message says why."),
        },
    )
    def post(self, request: Request, slug: str) -> Response:
        """Enrol an automated judge (201), or add tasks to its enrolment (200): all sampled examples or N pairs
        per variation (seeded)."""
        study = get_object_or_404(Study, slug=slug)
        form = serializers.EnrolJudgeRequestSerializer(data=request.data)
        form.is_valid(raise_exception=True)
        data = form.validated_data
        try:
            result = enrol_judge(
                study,
                judge=data["username"],
                tasks=data["tasks"],
                per_variation=data.get("per_variation"),
                seed=data.get("seed"),
                practise=data.get("practise"),
                actor=request.user,
            )
        except EnrolmentRefused as refused:
            return Response({"detail": str(refused)}, status=status.HTTP_409_CONFLICT)
        [row] = [r for r in enrolment_rows(study) if r.pk == result.enrolment.pk]
        row.added, row.detail = result.added, result.message
        code = status.HTTP_201_CREATED if result.created else status.HTTP_200_OK
        return Response(serializers.EnrolJudgeResultSerializer(row).data, status=code)
