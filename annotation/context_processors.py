from django.http import HttpRequest

from annotation.models import Role
from annotation.preferences import current_preferences
from annotation.roles import has_role


def roles(request: HttpRequest) -> dict:
    """Which navigation a user sees; the views check the same roles again."""
    user = getattr(request, "user", None)
    if user is None:
        return {}
    return {"user_roles": {role.value: has_role(user, role) for role in Role}}


def preferences(request: HttpRequest) -> dict:
    """The theme and keyboard settings every page applies (read from the session: no query)."""
    return {"preferences": current_preferences(request)}
