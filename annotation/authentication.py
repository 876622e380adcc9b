"""API token authentication in one hand-written statement, which also reads the user's roles.

Every request of a reader's or judge's program carries its token (annotation.models.ApiToken,
found by the digest of its key). The ORM's lookup (select_related to the user) costs about a
millisecond of Python to build and compile on every request; this is the same lookup, with DRF's
answers and errors, written once in SQL (tests/annotation/test_authentication.py holds it equal
to the ORM's). Every such request then checks the user's roles: they come with the token, so
user_roles asks nothing more. A reading token keeps only the reading roles.
"""

import functools

from django.contrib.auth import get_user_model
from django.db import connection
from django.utils.translation import gettext_lazy as _
from rest_framework import exceptions
from rest_framework.authentication import TokenAuthentication as DRFTokenAuthentication

from annotation.models import READING_ROLES, ApiToken, TokenScope
from annotation.roles import limit_roles, remember_roles, role_permissions_held
from annotation.rows import Selected, attach, instances, select_list
from annotation.tokens import note_use

# One row per role the user holds (ct.app_label, p.codename), or one row with NULLs for none.
_LOOKUP_SQL = (
    "SELECT {columns}, ct.app_label, p.codename FROM {tokens} JOIN {users} ON {user_pk} = t.user_id"
    " LEFT JOIN ({role_tables}) ON {holds_role} WHERE t.digest = %s"
)


class TokenAuthentication(DRFTokenAuthentication):
    """DRF's token authentication ("Authorization: Token <key>") of named tokens, looked up by
    hand-written SQL, with the user's roles (annotation.roles.user_roles) read along."""

    model = ApiToken

    def authenticate_credentials(self, key: str) -> tuple:
        token_part, user_part = _selected(self.get_model(), "t"), _selected(get_user_model(), "u")
        statement, role_params = _lookup(token_part, user_part)
        with connection.cursor() as cursor:
            cursor.execute(statement, [*role_params, ApiToken.digest_of(key)])
            rows = cursor.fetchall()
        if not rows:
            raise exceptions.AuthenticationFailed(_("Invalid token."))
        token, user = instances(rows[0], connection, token_part, user_part)
        attach(token, user=user)
        remember_roles(user, (row[-2:] for row in rows))
        if not user.is_active:
            raise exceptions.AuthenticationFailed(_("User inactive or deleted."))
        if token.scope != TokenScope.ALL:
            limit_roles(user, READING_ROLES)
        note_use(token)
        return user, token


@functools.cache
def _lookup(token_part: Selected, user_part: Selected) -> tuple[str, list[str]]:
    """The statement and the roles' parameters (the token's key follows them), written once."""
    user_pk = f"u.{connection.ops.quote_name(user_part.model._meta.pk.column)}"
    role_tables, holds_role, role_params = role_permissions_held(user_pk)
    statement = _LOOKUP_SQL.format(
        columns=select_list(connection, token_part, user_part),
        tokens=token_part.table(connection),
        users=user_part.table(connection),
        user_pk=user_pk,
        role_tables=role_tables,
        holds_role=holds_role,
    )
    return statement, role_params


@functools.cache
def _selected(model: type, alias: str) -> Selected:
    """A model's columns under an alias, made once (Selected keeps the model's converters)."""
    return Selected(model, alias)
