"""A person's display and keyboard preferences, as every page reads them.

The row lives in the database (`Preferences`); each session keeps a copy, written at login and
whenever the person saves the settings page, so that rendering a page costs no query. A change
made in one session reaches the person's other sessions at their next login.
"""

from typing import Any

from django.contrib.auth.models import AbstractBaseUser, AnonymousUser
from django.contrib.sessions.backends.base import SessionBase
from django.http import HttpRequest

from annotation.models import Preferences, Theme

SESSION_KEY = "readingroom.preferences"
DEFAULTS: dict[str, Any] = {"theme": Theme.SYSTEM.value, "single_key_shortcuts": True}


def preferences_of(user: AbstractBaseUser | AnonymousUser) -> dict[str, Any]:
    """The user's preferences as a plain dict (the defaults for a user who never saved any)."""
    if not user.is_authenticated:
        return dict(DEFAULTS)
    row = Preferences.objects.filter(user=user).values("theme", "single_key_shortcuts").first()
    return {**DEFAULTS, **(row or {})}


def remember_preferences(session: SessionBase, values: dict[str, Any]) -> dict[str, Any]:
    """Keep the preferences in the session, so pages read them without a query."""
    session[SESSION_KEY] = {key: values[key] for key in DEFAULTS}
    return session[SESSION_KEY]


def current_preferences(request: HttpRequest) -> dict[str, Any]:
    """The signed-in person's preferences for this request (the session's copy, or the database's)."""
    user = getattr(request, "user", None)
    if user is None or not user.is_authenticated:
        return dict(DEFAULTS)
    cached = request.session.get(SESSION_KEY)
    if isinstance(cached, dict) and cached.keys() == DEFAULTS.keys():
        return cached
    return remember_preferences(request.session, preferences_of(user))


def copy_preferences_at_login(sender: type, request: HttpRequest | None, user: AbstractBaseUser, **kwargs) -> None:
    """Signal receiver (user_logged_in): each new session starts with the person's saved preferences."""
    if request is not None and hasattr(request, "session"):
        remember_preferences(request.session, preferences_of(user))
