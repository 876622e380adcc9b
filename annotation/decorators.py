from collections.abc import Callable
from functools import wraps

from django.contrib.auth.views import redirect_to_login
from django.core.exceptions import PermissionDenied
from django.http import HttpRequest, HttpResponse
from django_htmx.http import HttpResponseClientRedirect

from annotation.roles import has_role


def role_required(*roles: str) -> Callable:
    """Log in first, then 403 unless the user holds one of the roles.

    An htmx request whose session has expired gets a client-side redirect to the login page,
    which brings the reader back to the page (not the fragment) afterwards.
    """

    def decorator(view: Callable[..., HttpResponse]) -> Callable[..., HttpResponse]:
        @wraps(view)
        def wrapper(request: HttpRequest, *args, **kwargs) -> HttpResponse:
            refused = refuse_without_role(request, roles)
            if refused is not None:
                return refused
            return view(request, *args, **kwargs)

        return wrapper

    return decorator


def refuse_without_role(request: HttpRequest, roles: tuple[str, ...]) -> HttpResponse | None:
    """The answer to a request that may not reach the view (a login redirect), PermissionDenied, or None.

    A function of its own, called on every request, so that mutation testing sees which tests guard it.
    """
    if not request.user.is_authenticated:
        login = redirect_to_login(request.get_full_path())
        if request.htmx:
            return HttpResponseClientRedirect(login.url)
        return login
    if not any(has_role(request.user, role) for role in roles):
        raise PermissionDenied
    return None
