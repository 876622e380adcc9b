"""API tokens: made, listed and revoked by their person on the Settings page, revoked by a coordinator.

Each token is a row of ApiToken holding the digest of a random key; the key itself is returned
once, by issue_token, for the page to show. Every token made or revoked is recorded in the
admin's log of its person (the admin shows it in the user's history) and in the "readingroom"
log, with who did it, as unlocking a log-in is (annotation/accounts.py).
"""

import logging
import secrets
from datetime import timedelta

from django.contrib.admin.models import ADDITION, DELETION, LogEntry
from django.contrib.auth import get_user_model
from django.contrib.auth.base_user import AbstractBaseUser
from django.contrib.contenttypes.models import ContentType
from django.db import IntegrityError, transaction
from django.utils import timezone

from annotation.models import READING_ROLES, ApiToken, Role, TokenScope
from annotation.roles import user_roles

logger = logging.getLogger("readingroom")

# A token's "last used" is written at most this often: a program reading all day costs one write
# a minute, not one per request.
LAST_USED_RESOLUTION = timedelta(minutes=1)


class TokenRefused(Exception):
    """A token that cannot be made or revoked; the message says why and what to do."""


def scopes_for(user: AbstractBaseUser) -> list[TokenScope]:
    """The scopes a person may give a token: reading only, and all their roles if they hold a role
    beyond reading (a reader's token is always a reading token)."""
    if user_roles(user) - READING_ROLES:
        return [TokenScope.READING, TokenScope.ALL]
    return [TokenScope.READING]


@transaction.atomic
def issue_token(
    user: AbstractBaseUser, *, name: str, scope: str = TokenScope.READING, actor: AbstractBaseUser | None = None
) -> tuple[ApiToken, str]:
    """Make a token for user and return it with its key (the only time the key exists in clear).

    actor is who asked: the person, a coordinator, or None for a command (create_user --token, the
    demo's judge).
    """
    name = name.strip()
    if not name:
        raise TokenRefused("Give the token a name: what program or computer will use it.")
    if scope not in scopes_for(user):
        raise TokenRefused(
            f"{user.get_username()} holds reading roles only, so a token can only be for reading "
            f'(scope "{TokenScope.READING}").'
        )
    key = secrets.token_urlsafe(30)
    try:
        with transaction.atomic():
            token = ApiToken.objects.create(
                user=user, name=name, scope=scope, digest=ApiToken.digest_of(key), prefix=key[:8]
            )
    except IntegrityError:
        raise TokenRefused(
            f'{user.get_username()} already has a token named "{name}": choose another name, or revoke that one first.'
        ) from None
    _record(token, ADDITION, actor, "made", f"{token.get_scope_display().lower()}")
    return token, key


@transaction.atomic
def revoke_token(token: ApiToken, *, actor: AbstractBaseUser | None) -> None:
    """Delete a token: the next request with its key is refused (401). actor is its person or a
    coordinator, or None for a command (the in-process judge client replacing its own token)."""
    if actor is not None and actor.pk != token.user_id and Role.COORDINATOR not in user_roles(actor):
        raise TokenRefused("Only the token's owner or a coordinator can revoke it.")
    _record(token, DELETION, actor, "revoked")
    token.delete()


def note_use(token: ApiToken) -> None:
    """Record that a token was just used, at most once per LAST_USED_RESOLUTION."""
    now = timezone.now()
    if token.last_used_at is None or now - token.last_used_at >= LAST_USED_RESOLUTION:
        ApiToken.objects.filter(pk=token.pk).update(last_used_at=now)
        token.last_used_at = now


def _record(token: ApiToken, flag: int, actor: AbstractBaseUser | None, verb: str, detail: str = "") -> None:
    by = actor if actor is not None else token.user
    what = f'API token "{token.name}" ({token.prefix}…{", " + detail if detail else ""})'
    LogEntry.objects.create(
        user_id=by.pk,
        content_type=ContentType.objects.get_for_model(get_user_model()),
        object_id=str(token.user_id),
        object_repr=token.user.get_username()[:200],
        action_flag=flag,
        change_message=f"{verb.capitalize()} {what}{'' if actor is not None else ' by a command'}",
    )
    logger.info(
        "%s %s %s of %s", by.get_username() if actor is not None else "A command", verb, what, token.user.get_username()
    )
