"""How the API answers what it cannot serve: JSON with a `detail`, never an HTML page or a 500.

- a JSON body nested too deep is a 400 (annotation.parsers);
- a body over DATA_UPLOAD_MAX_MEMORY_SIZE is a 413, too many form fields or files a 400;
- a URL under /api/ that matches no route is a JSON 404, and an unexpected error a JSON 500.
"""

from django.conf import settings
from django.core.exceptions import RequestDataTooBig, TooManyFieldsSent, TooManyFilesSent
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.views import defaults
from rest_framework import status
from rest_framework.exceptions import APIException, ParseError
from rest_framework.views import exception_handler as drf_exception_handler


class RequestTooLarge(APIException):
    status_code = status.HTTP_413_REQUEST_ENTITY_TOO_LARGE
    default_code = "request_too_large"


def exception_handler(exc: Exception, context: dict):
    """DRF's handler, plus Django's refusals of oversized bodies (otherwise a bare HTML 400)."""
    if isinstance(exc, RequestDataTooBig):
        exc = RequestTooLarge(
            f"The request body is larger than the limit of {settings.DATA_UPLOAD_MAX_MEMORY_SIZE:,} bytes. "
            "Send less in one request (pair files go to the imports endpoint as a multipart file upload)."
        )
    elif isinstance(exc, TooManyFieldsSent):
        exc = ParseError(
            f"The request has more than {settings.DATA_UPLOAD_MAX_NUMBER_FIELDS:,} form fields. Send fewer fields."
        )
    elif isinstance(exc, TooManyFilesSent):
        exc = ParseError(f"The request has more than {settings.DATA_UPLOAD_MAX_NUMBER_FILES:,} files. Send one file.")
    return drf_exception_handler(exc, context)


# --- Django's error views, in JSON under /api/ --------------------------------------------------


def _is_api(request: HttpRequest) -> bool:
    return request.path.startswith("/api/")


def bad_request(request: HttpRequest, exception: Exception) -> HttpResponse:
    if _is_api(request):
        if isinstance(exception, RequestDataTooBig):
            detail = f"The request body is larger than the limit of {settings.DATA_UPLOAD_MAX_MEMORY_SIZE:,} bytes."
            return JsonResponse({"detail": detail}, status=status.HTTP_413_REQUEST_ENTITY_TOO_LARGE)
        return JsonResponse({"detail": "Bad request."}, status=status.HTTP_400_BAD_REQUEST)
    return defaults.bad_request(request, exception)


def page_not_found(request: HttpRequest, exception: Exception) -> HttpResponse:
    if _is_api(request):
        return JsonResponse({"detail": "Not found."}, status=status.HTTP_404_NOT_FOUND)
    return defaults.page_not_found(request, exception)


def server_error(request: HttpRequest) -> HttpResponse:
    if _is_api(request):
        return JsonResponse({"detail": "Server error."}, status=status.HTTP_500_INTERNAL_SERVER_ERROR)
    return defaults.server_error(request)
