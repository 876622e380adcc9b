from collections.abc import Callable
from functools import wraps

from django.conf import settings
from django.contrib.auth.views import redirect_to_login
from django.core.exceptions import PermissionDenied
from django.http import HttpRequest, HttpResponse, HttpResponseRedirect
from django_htmx.http import HttpResponseClientRedirect

from annotation.roles import has_role

# Added to the login URL when a request came with a session cookie but no live session: the
# log-in page then says that the session ended and that the reader's draft was kept.
SESSION_ENDED = "session_ended"


def role_required(*roles: str) -> Callable:
    """Log in first, then 403 unless the user holds one of the roles.

    An htmx request whose session has expired gets a client-side redirect to the login page,
    which brings the reader back to the page (not the fragment) afterwards. A request that still
    carries a session cookie had a session that ended: the login page says so.
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
        if settings.SESSION_COOKIE_NAME in request.COOKIES:
            # The browser still holds a session cookie: the session ended, say so on the login page.
            login = HttpResponseRedirect(f"{login.url}&{SESSION_ENDED}=1")
        if request.htmx:
            return HttpResponseClientRedirect(login.url)
        return login
    if not any(has_role(request.user, role) for role in roles):
        raise PermissionDenied(f"needs the role {' or '.join(roles)}")
    return None
