"""Log-in lockouts (django-axes) as coordinators and the log-in page see them.

A username is locked for an address after AXES_FAILURE_LIMIT failed log-ins within the cool-off
time. Coordinators may unlock an account that is not an administrator's; administrators unlock
any account in the admin or with `manage.py axes_reset_username`.
"""

import logging
from dataclasses import dataclass
from datetime import datetime

from axes.handlers.proxy import AxesProxyHandler
from axes.helpers import get_cool_off
from axes.models import AccessAttempt
from django.conf import settings
from django.contrib.admin.models import CHANGE, LogEntry
from django.contrib.auth import authenticate, get_user_model
from django.contrib.auth import views as auth_views
from django.contrib.auth.forms import PasswordChangeForm
from django.contrib.auth.models import AbstractBaseUser
from django.contrib.contenttypes.models import ContentType
from django.core.exceptions import ValidationError
from django.db import transaction
from django.db.models import Count, Max
from django.http import HttpRequest
from django.template.response import TemplateResponse
from django.utils import timezone

logger = logging.getLogger("readingroom")

# From this many failures on, the log-in page says how many attempts are left.
WARN_FROM_FAILURE = 3


class UnlockRefused(Exception):
    """The account cannot be unlocked by this person."""


@dataclass(frozen=True)
class LockedAccount:
    username: str
    addresses: int
    last_failure: datetime
    locked_until: datetime
    is_administrator: bool


def attempts_left(request: HttpRequest, username: str) -> int | None:
    """After a failed log-in: how many attempts remain before the lockout, from the third failure on.

    None before that (and when nothing is left: the lockout page says so itself).
    """
    failures = AxesProxyHandler.get_failures(request, {"username": username})
    left = settings.AXES_FAILURE_LIMIT - failures
    if failures < WARN_FROM_FAILURE or left <= 0:
        return None
    return left


def cool_off_text() -> str:
    """How long a lockout lasts, in words ("1 hour", "30 minutes")."""
    minutes = round(get_cool_off().total_seconds() / 60)
    if minutes % 60 == 0:
        hours = minutes // 60
        return f"{hours} hour{'s' if hours != 1 else ''}"
    return f"{minutes} minute{'s' if minutes != 1 else ''}"


def locked_accounts() -> list[LockedAccount]:
    """Usernames locked out now, from any address, with when the lockout ends by itself (two queries)."""
    cool_off = get_cool_off()
    rows = list(
        AccessAttempt.objects.filter(
            failures_since_start__gte=settings.AXES_FAILURE_LIMIT, attempt_time__gte=timezone.now() - cool_off
        )
        .exclude(username=None)
        .values("username")
        .annotate(last=Max("attempt_time"), addresses=Count("ip_address", distinct=True))
        .order_by("username")
    )
    User = get_user_model()
    administrators = set(
        User.objects.filter(is_staff=True)
        .filter(**{f"{User.USERNAME_FIELD}__in": [row["username"] for row in rows]})
        .values_list(User.USERNAME_FIELD, flat=True)
    )
    return [
        LockedAccount(
            username=row["username"],
            addresses=row["addresses"],
            last_failure=row["last"],
            locked_until=row["last"] + cool_off,
            is_administrator=row["username"] in administrators,
        )
        for row in rows
    ]


@transaction.atomic
def unlock_account(username: str, *, actor: AbstractBaseUser) -> int:
    """Clear a username's failed log-ins from every address, and record who did it.

    The record is an entry of the admin's log on the user (the admin shows it in the user's
    history) and a line in the "readingroom" log. An administrator's account can be unlocked
    only by another administrator. Returns the number of lockout records cleared.
    """
    User = get_user_model()
    user = User.objects.filter(**{User.USERNAME_FIELD: username}).first()
    if user is not None and user.is_staff and not actor.is_staff:
        raise UnlockRefused(
            f"{username} is an administrator; only another administrator can unlock the account "
            f"(in the admin, or with: bin/manage axes_reset_username {username})."
        )
    cleared = AxesProxyHandler.reset_attempts(username=username)
    LogEntry.objects.create(
        user_id=actor.pk,
        content_type=ContentType.objects.get_for_model(User) if user is not None else None,
        object_id=str(user.pk) if user is not None else None,
        object_repr=username[:200],
        action_flag=CHANGE,
        change_message=f"Unlocked after repeated failed log-ins ({cleared} lockout record(s) cleared).",
    )
    logger.info("%s unlocked the log-in of %s (%d lockout records cleared)", actor.get_username(), username, cleared)
    return cleared


# --- Changing and resetting one's own password -----------------------------------------------------


class AxesPasswordChangeForm(PasswordChangeForm):
    """Django's password change, its old password checked by a log-in (authenticate): a wrong one
    counts as a failed log-in, and django-axes locks the account as it would at the log-in page."""

    def __init__(self, user: AbstractBaseUser, *args, request: HttpRequest, **kwargs) -> None:
        self.request = request
        super().__init__(user, *args, **kwargs)

    def clean_old_password(self) -> str:
        old_password = self.cleaned_data["old_password"]
        checked = authenticate(self.request, username=self.user.get_username(), password=old_password)
        if checked is None or checked.pk != self.user.pk:
            raise ValidationError(self.error_messages["password_incorrect"], code="password_incorrect")
        return old_password


class PasswordChangeView(auth_views.PasswordChangeView):
    form_class = AxesPasswordChangeForm

    def get_form_kwargs(self) -> dict:
        return {**super().get_form_kwargs(), "request": self.request}


class PasswordResetView(auth_views.PasswordResetView):
    """Django's reset by e-mail, where the server can send e-mail (READINGROOM_PASSWORD_RESET); else
    the page says to ask an administrator. It never says whether an address belongs to an account."""

    def dispatch(self, request: HttpRequest, *args, **kwargs):
        if not settings.READINGROOM_PASSWORD_RESET:
            return TemplateResponse(request, "registration/password_reset_unavailable.html", status=503)
        return super().dispatch(request, *args, **kwargs)
