"""The coordinator's API: the same questions and changes as the coordinator's pages.

Refusals by the protocol or the study's settings answer 409 {"detail": ...}; bad input 400.
A coordinator who still has to rate a pair is answered 403 {"detail": ...} about it, and gets its
rows masked in lists (consensus.conflicts).
"""

import uuid

from django.contrib.auth import get_user_model
from django.shortcuts import get_object_or_404
from drf_spectacular.utils import OpenApiParameter, OpenApiResponse, extend_schema
from rest_framework import status
from rest_framework.exceptions import PermissionDenied
from rest_framework.generics import GenericAPIView
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from annotation.models import Annotation, Assignment, CandidatePair, Example, Study, StudyMember, Verdict
from annotation.permissions import IsCoordinator
from annotation.roles import enrolment_warning, user_roles
from annotation.serializers import DetailSerializer
from consensus import progress, serializers
from consensus.assignment import (
    QueueRefused,
    add_study_member,
    assign_example,
    assign_readers,
    reassign_assignment,
    withdraw_assignment,
)
from consensus.conflicts import PAIR_HIDDEN, hidden_pair_ids, is_hidden_from, mark_hidden
from consensus.services import NoSuchWork, SubmissionRefused, void_annotation

REFUSED = OpenApiResponse(DetailSerializer, description="Refused by the protocol or the study's settings.")
HIDDEN = OpenApiResponse(DetailSerializer, description="You still have to rate this pair: its details are hidden.")
TAGS = ["coordination"]


def _conflict(refused: Exception) -> Response:
    return Response({"detail": str(refused)}, status=status.HTTP_409_CONFLICT)


class CoordinatorView(APIView):
    permission_classes = [IsCoordinator]

    def check_not_hidden(self, request: Request, example: Example) -> None:
        """403 if the example's pair is hidden from the caller: they still have to rate it."""
        if is_hidden_from(request.user, example.pair_id):
            raise PermissionDenied(PAIR_HIDDEN)


class StudyPairsView(CoordinatorView, GenericAPIView):
    @extend_schema(
        tags=["studies"],
        parameters=[
            OpenApiParameter("verdict", str, enum=Verdict.values),
            OpenApiParameter("sampled", bool),
        ],
        responses={200: serializers.CandidatePairSerializer(many=True)},
    )
    def get(self, request: Request, slug: str) -> Response:
        """The study's candidate pairs, paginated. A pair you still have to rate is masked: {"hidden": true, ...}."""
        study = get_object_or_404(Study, slug=slug)
        pairs = CandidatePair.objects.filter(study=study).select_related("dataset", "variation")
        if verdict := request.query_params.get("verdict"):
            pairs = pairs.filter(verdict=verdict)
        if (sampled := request.query_params.get("sampled")) is not None:
            pairs = pairs.filter(sampled=sampled.lower() in ("1", "true", "yes"))
        page = mark_hidden(self.paginate_queryset(pairs), hidden_pair_ids(request.user, study), "pk")
        return self.get_paginated_response(serializers.CandidatePairSerializer(page, many=True).data)


class StudyProgressView(CoordinatorView):
    @extend_schema(tags=TAGS, responses=serializers.StudyProgressSerializer)
    def get(self, request: Request, slug: str) -> Response:
        """Examples by state (waiting for reads, third read, adjudication, consensus) per task and variation."""
        study = get_object_or_404(Study, slug=slug)
        return Response(serializers.StudyProgressSerializer(progress.study_progress(study)).data)


class StudyWorkloadView(CoordinatorView):
    @extend_schema(tags=TAGS, responses=serializers.MemberWorkloadSerializer(many=True))
    def get(self, request: Request, slug: str) -> Response:
        """Every member of the study: open and rated reads per task, voided ratings, adjudications, cap."""
        study = get_object_or_404(Study, slug=slug)
        return Response(serializers.MemberWorkloadSerializer(progress.study_workload(study), many=True).data)


class StudyUnroutedView(CoordinatorView):
    @extend_schema(tags=TAGS, responses=serializers.UnroutedExampleSerializer(many=True))
    def get(self, request: Request, slug: str) -> Response:
        """Examples that need a reader, a third reader or an adjudicator, and found nobody eligible."""
        study = get_object_or_404(Study, slug=slug)
        examples = progress.unrouted_examples(study, request.user)
        return Response(serializers.UnroutedExampleSerializer(examples, many=True).data)


class ExampleDetailView(CoordinatorView):
    @extend_schema(tags=TAGS, responses={200: serializers.ExampleDetailSerializer, 403: HIDDEN})
    def get(self, request: Request, slug: str, example_id: uuid.UUID) -> Response:
        """One example: texts, assignments, every rating (voided included), adjudication, consensus, audit trail."""
        study = get_object_or_404(Study, slug=slug)
        example = get_object_or_404(progress.study_examples(study), public_id=example_id)
        self.check_not_hidden(request, example)
        return Response(serializers.ExampleDetailSerializer(progress.example_detail(example)).data)


class ReaderDetailView(CoordinatorView):
    @extend_schema(tags=TAGS, responses=serializers.ReaderDetailSerializer)
    def get(self, request: Request, slug: str, username: str) -> Response:
        """One member of the study: assignments, adjudications and the audit events that concern them."""
        study = get_object_or_404(Study, slug=slug)
        user = get_object_or_404(progress.study_members(study), **{get_user_model().USERNAME_FIELD: username})
        return Response(serializers.ReaderDetailSerializer(progress.reader_detail(study, user, request.user)).data)


class StudyAssignView(CoordinatorView):
    @extend_schema(
        tags=TAGS,
        request=serializers.AutoAssignRequestSerializer,
        responses={200: serializers.AssignResultSerializer, 409: REFUSED},
    )
    def post(self, request: Request, slug: str) -> Response:
        """Assign automatically: two distinct readers for every example still waiting, within each reader's cap."""
        study = get_object_or_404(Study, slug=slug)
        form = serializers.AutoAssignRequestSerializer(data=request.data)
        form.is_valid(raise_exception=True)
        try:
            report = assign_readers(study, actor=request.user, tasks=form.validated_data.get("tasks") or None)
        except QueueRefused as refused:
            return _conflict(refused)
        return Response(report.as_dict())


class StudyMembersView(CoordinatorView):
    @extend_schema(
        tags=TAGS,
        request=serializers.AddMemberRequestSerializer,
        responses={201: serializers.MemberSerializer, 200: serializers.MemberSerializer, 409: REFUSED},
    )
    def post(self, request: Request, slug: str) -> Response:
        """Enrol a reader or adjudicator (201), or re-activate and update one (200); routes waiting examples."""
        study = get_object_or_404(Study, slug=slug)
        form = serializers.AddMemberRequestSerializer(data=request.data)
        form.is_valid(raise_exception=True)
        user, role = form.validated_data["username"], form.validated_data["role"]
        existed = StudyMember.objects.filter(study=study, user=user, role=role).exists()
        try:
            member = add_study_member(
                study, user, role, actor=request.user, max_assignments=form.validated_data.get("max_assignments")
            )
        except QueueRefused as refused:
            return _conflict(refused)
        code = status.HTTP_200_OK if existed else status.HTTP_201_CREATED
        member.warning = enrolment_warning(user.get_username(), user_roles(user))
        return Response(serializers.MemberSerializer(member).data, status=code)


class StudyAssignmentsView(CoordinatorView):
    @extend_schema(
        tags=TAGS,
        request=serializers.ManualAssignRequestSerializer,
        responses={201: serializers.AssignmentRecordSerializer, 403: HIDDEN, 409: REFUSED},
    )
    def post(self, request: Request, slug: str) -> Response:
        """Assign one example of the study to one of its readers by hand."""
        study = get_object_or_404(Study, slug=slug)
        form = serializers.ManualAssignRequestSerializer(data=request.data, context={"study": study})
        form.is_valid(raise_exception=True)
        self.check_not_hidden(request, form.validated_data["example"])
        try:
            assignment = assign_example(
                form.validated_data["example"].public_id, form.validated_data["reader"], actor=request.user
            )
        except QueueRefused as refused:
            return _conflict(refused)
        return Response(serializers.AssignmentRecordSerializer(assignment).data, status=status.HTTP_201_CREATED)


def _get_assignment(assignment_id: uuid.UUID) -> Assignment:
    return get_object_or_404(Assignment.objects.select_related("example"), public_id=assignment_id)


class AssignmentWithdrawView(CoordinatorView):
    @extend_schema(
        tags=TAGS, request=None, responses={200: serializers.WithdrawResultSerializer, 403: HIDDEN, 409: REFUSED}
    )
    def post(self, request: Request, assignment_id: uuid.UUID) -> Response:
        """Take an unrated assignment out of its reader's queue (the audit trail keeps it)."""
        assignment = _get_assignment(assignment_id)
        self.check_not_hidden(request, assignment.example)
        try:
            example = withdraw_assignment(assignment.public_id, actor=request.user)
        except QueueRefused as refused:
            return _conflict(refused)
        example = progress.study_examples(example.study).get(pk=example.pk)
        return Response(serializers.WithdrawResultSerializer({"example": example}).data)


class AssignmentReassignView(CoordinatorView):
    @extend_schema(
        tags=TAGS,
        request=serializers.ReaderRequestSerializer,
        responses={200: serializers.AssignmentRecordSerializer, 403: HIDDEN, 409: REFUSED},
    )
    def post(self, request: Request, assignment_id: uuid.UUID) -> Response:
        """Move an unrated assignment to another reader; answers the new assignment."""
        assignment = _get_assignment(assignment_id)
        self.check_not_hidden(request, assignment.example)
        form = serializers.ReaderRequestSerializer(data=request.data)
        form.is_valid(raise_exception=True)
        try:
            moved = reassign_assignment(assignment.public_id, form.validated_data["reader"], actor=request.user)
        except QueueRefused as refused:
            return _conflict(refused)
        return Response(serializers.AssignmentRecordSerializer(moved).data)


class AnnotationVoidView(CoordinatorView):
    @extend_schema(
        tags=TAGS,
        request=serializers.VoidRequestSerializer,
        responses={200: serializers.AnnotationRecordSerializer, 403: HIDDEN, 409: REFUSED},
    )
    def post(self, request: Request, annotation_id: uuid.UUID) -> Response:
        """Void a rating with a reason: the example re-opens and is routed again."""
        annotation = get_object_or_404(Annotation.objects.select_related("example"), public_id=annotation_id)
        self.check_not_hidden(request, annotation.example)
        form = serializers.VoidRequestSerializer(data=request.data)
        form.is_valid(raise_exception=True)
        try:
            voided = void_annotation(annotation.public_id, actor=request.user, reason=form.validated_data["reason"])
        except NoSuchWork:
            return Response({"detail": "No such rating."}, status=status.HTTP_404_NOT_FOUND)
        except SubmissionRefused as refused:
            return _conflict(refused)
        return Response(serializers.AnnotationRecordSerializer(voided).data)
