from django.http import HttpRequest
from django.utils.crypto import salted_hmac

from annotation.models import Role
from annotation.preferences import current_preferences
from annotation.roles import has_role


def roles(request: HttpRequest) -> dict:
    """Which navigation a user sees; the views check the same roles again."""
    user = getattr(request, "user", None)
    if user is None:
        return {}
    context = {"user_roles": {role.value: has_role(user, role) for role in Role}}
    if user.is_authenticated:
        context["draft_owner"] = draft_owner(user)
    return context


def draft_owner(user) -> str:
    """An opaque key of the user for the drafts kept in the browser (never the user's id or name).

    Reading pages keep an unsubmitted choice and rationale in localStorage under this key and
    the item's public id, so drafts follow the user across tabs but never show to another user
    of the same browser; logging out clears them.
    """
    return salted_hmac("readingroom.draft-owner", str(user.pk), algorithm="sha256").hexdigest()[:24]


def preferences(request: HttpRequest) -> dict:
    """The theme and keyboard settings every page applies (read from the session: no query)."""
    return {"preferences": current_preferences(request)}
