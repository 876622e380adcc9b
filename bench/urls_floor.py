"""The application's URLs plus the benchmark's floor: a bare view doing one indexed SELECT.

Served only by the benchmark (DJANGO_SETTINGS_MODULE=bench.settings); the application itself
has no such endpoint.
"""

import uuid

from django.http import HttpRequest, JsonResponse
from django.urls import include, path

from annotation.models import Assignment


def floor(request: HttpRequest, assignment_id: uuid.UUID) -> JsonResponse:
    found = Assignment.objects.filter(public_id=assignment_id).values_list("pk", "status").first()
    if found is None:
        return JsonResponse({"found": False}, status=404)
    return JsonResponse({"found": True, "status": found[1]})


urlpatterns = [
    path("bench/floor/<uuid:assignment_id>/", floor, name="bench_floor"),
    path("", include("config.urls")),
]
