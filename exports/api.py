"""The data manager's API: queue release builds, follow them, download, retry or delete them.

Bad options (a version already taken among them) answer 400 {"detail": ...}; a build is never
run inside the request (202 Accepted). Retrying or deleting a build in the wrong state is 409.
"""

import json
from collections.abc import Callable

from django.http import HttpResponse
from django.shortcuts import get_object_or_404
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, OpenApiResponse, extend_schema
from rest_framework import mixins, renderers, status, viewsets
from rest_framework.decorators import action
from rest_framework.request import Request
from rest_framework.response import Response

from annotation.models import Study
from annotation.permissions import IsDataManager
from annotation.serializers import DetailSerializer
from exports import serializers
from exports.building import ReleaseRefused
from exports.models import Release, ReleaseStatus
from exports.recovery import fail_stale_releases
from exports.services import ReleaseConflict, delete_release, request_release, retry_release
from exports.views import zip_response

TAGS = ["releases"]
UUID_PATTERN = "[0-9a-fA-F]{8}-?[0-9a-fA-F]{4}-?[0-9a-fA-F]{4}-?[0-9a-fA-F]{4}-?[0-9a-fA-F]{12}"
STUDY_SLUG = OpenApiParameter("slug", str, OpenApiParameter.PATH, description="The study's slug.")


class ZipRenderer(renderers.BaseRenderer):
    """Lets a client ask for Accept: application/zip; errors still come as JSON text."""

    media_type = "application/zip"
    format = "zip"
    charset = None
    render_style = "binary"

    def render(self, data, accepted_media_type=None, renderer_context=None) -> bytes:
        return data if isinstance(data, bytes) else json.dumps(data).encode()


class StudyReleaseViewSet(mixins.ListModelMixin, viewsets.GenericViewSet):
    """A study's release builds, newest first; POST queues a new one."""

    permission_classes = [IsDataManager]
    serializer_class = serializers.ReleaseSerializer

    def get_queryset(self):
        # Roles are global: a data manager sees the releases of every study.
        study = get_object_or_404(Study, slug=self.kwargs["slug"])
        return study.releases.select_related("study", "requested_by", "deleted_by")

    @extend_schema(tags=TAGS, parameters=[STUDY_SLUG])
    def list(self, request: Request, *args, **kwargs) -> Response:
        """Every build of the study: options, status, progress, row counts, the zip's SHA-256."""
        fail_stale_releases()
        return super().list(request, *args, **kwargs)

    @extend_schema(
        tags=TAGS,
        parameters=[STUDY_SLUG],
        request=serializers.ReleaseRequestSerializer,
        responses={
            202: serializers.ReleaseSerializer,
            400: OpenApiResponse(DetailSerializer, description="The options do not make a valid release."),
        },
    )
    def create(self, request: Request, slug: str) -> Response:
        """Queue a build. It runs in the background worker; follow it at the returned url."""
        study = get_object_or_404(Study, slug=slug)
        form = serializers.ReleaseRequestSerializer(data=request.data)
        form.is_valid(raise_exception=True)
        options = form.validated_data
        try:
            release = request_release(
                study,
                user=request.user,
                version=options["version"],
                datasets=options["datasets"],
                include_unfinished=options["include_unfinished"],
                include_guide=options["include_guide"],
                include_judges=options["include_judges"],
                license_text=options.get("license_text", study.license_text),
            )
        except ReleaseRefused as refused:
            return Response({"detail": str(refused)}, status=status.HTTP_400_BAD_REQUEST)
        body = serializers.ReleaseSerializer(release, context=self.get_serializer_context()).data
        return Response(body, status=status.HTTP_202_ACCEPTED, headers={"Location": body["url"]})


CONFLICT = OpenApiResponse(DetailSerializer, description="Not possible in the build's current state.")


class ReleaseViewSet(mixins.RetrieveModelMixin, mixins.DestroyModelMixin, viewsets.GenericViewSet):
    """One release build: its status and, once done, its zip; retry a failed build, delete a finished one."""

    permission_classes = [IsDataManager]
    serializer_class = serializers.ReleaseSerializer
    queryset = Release.objects.select_related("study", "requested_by", "deleted_by")
    lookup_field = "public_id"
    lookup_url_kwarg = "release_id"
    lookup_value_regex = UUID_PATTERN

    @extend_schema(tags=TAGS)
    def retrieve(self, request: Request, *args, **kwargs) -> Response:
        """Status, progress (percent), error, row counts and the zip's SHA-256."""
        fail_stale_releases()
        return super().retrieve(request, *args, **kwargs)

    @extend_schema(
        tags=TAGS,
        request=None,
        responses={200: serializers.ReleaseSerializer, 404: DetailSerializer, 409: CONFLICT},
    )
    def destroy(self, request: Request, release_id: str) -> Response:
        """Delete the zip of a finished (or failed) build. The release stays listed, marked deleted by you,
        and its version stays taken; nothing is deleted otherwise."""
        return self._act(delete_release)

    @extend_schema(
        tags=TAGS,
        request=None,
        responses={202: serializers.ReleaseSerializer, 404: DetailSerializer, 409: CONFLICT},
    )
    @action(detail=True, methods=["post"])
    def retry(self, request: Request, release_id: str) -> Response:
        """Queue a failed build again, same options and version (409 if another build took the version since)."""
        return self._act(retry_release, status.HTTP_202_ACCEPTED)

    def _act(self, service: Callable[..., Release], success: int = status.HTTP_200_OK) -> Response:
        release = self.get_object()
        try:
            release = service(release, user=self.request.user)
        except (ReleaseConflict, ReleaseRefused) as refused:
            return Response({"detail": str(refused)}, status=status.HTTP_409_CONFLICT)
        return Response(self.get_serializer(release).data, status=success)

    @extend_schema(
        tags=TAGS,
        responses={
            (200, "application/zip"): OpenApiResponse(OpenApiTypes.BINARY, description="<slug>-<version>.zip"),
            404: OpenApiResponse(DetailSerializer, description="No such release, or not built (yet)."),
        },
    )
    @action(detail=True, methods=["get"], renderer_classes=[renderers.JSONRenderer, ZipRenderer])
    def download(self, request: Request, release_id: str) -> HttpResponse:
        """The release zip (a folder <slug>-<version>/ with the PhysioNet files). 404 until the build is done."""
        release = get_object_or_404(
            self.get_queryset(), public_id=release_id, status=ReleaseStatus.DONE, deleted_at__isnull=True
        )
        return zip_response(release)
