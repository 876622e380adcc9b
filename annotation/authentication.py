"""API token authentication in one hand-written statement.

Every request of a reader's or judge's program carries its token. DRF's TokenAuthentication finds
it with the ORM (select_related to the user), whose query costs about a millisecond of Python to
build and compile on every request; this is the same lookup, the same answers and errors, written
once in SQL (tests/annotation/test_authentication.py holds it equal to DRF's).
"""

import functools

from django.contrib.auth import get_user_model
from django.db import connection
from django.utils.translation import gettext_lazy as _
from rest_framework import exceptions
from rest_framework.authentication import TokenAuthentication as DRFTokenAuthentication

from annotation.rows import Selected, attach, instances, select_list

_LOOKUP_SQL = "SELECT {columns} FROM {tokens} JOIN {users} ON u.{user_pk} = t.user_id WHERE t.key = %s"


class TokenAuthentication(DRFTokenAuthentication):
    """DRF's token authentication ("Authorization: Token <key>"), its lookup by hand-written SQL."""

    def authenticate_credentials(self, key: str) -> tuple:
        token_part, user_part = _selected(self.get_model(), "t"), _selected(get_user_model(), "u")
        quote = connection.ops.quote_name
        statement = _LOOKUP_SQL.format(
            columns=select_list(connection, token_part, user_part),
            tokens=token_part.table(connection),
            users=user_part.table(connection),
            user_pk=quote(user_part.model._meta.pk.column),
        )
        with connection.cursor() as cursor:
            cursor.execute(statement, [key])
            row = cursor.fetchone()
        if row is None:
            raise exceptions.AuthenticationFailed(_("Invalid token."))
        token, user = instances(row, connection, token_part, user_part)
        attach(token, user=user)
        if not user.is_active:
            raise exceptions.AuthenticationFailed(_("User inactive or deleted."))
        return user, token


@functools.cache
def _selected(model: type, alias: str) -> Selected:
    """A model's columns under an alias, made once (Selected keeps the model's converters)."""
    return Selected(model, alias)
