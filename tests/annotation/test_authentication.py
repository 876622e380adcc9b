"""The API's named tokens: one statement finds the token, its user and the user's roles, with the
ORM's answers and DRF's errors; a reading token keeps the reading roles only; "last used" is
written at most once a minute; a revoked token or a deactivated user is refused at once."""

from datetime import timedelta

import pytest
from django.contrib.auth.models import Permission
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone
from rest_framework import exceptions

from annotation.authentication import TokenAuthentication
from annotation.models import ApiToken, Role, TokenScope
from annotation.roles import ROLE_PERMISSIONS, user_roles
from annotation.tokens import revoke_token
from tests.factories import make_study, make_token, make_user

pytestmark = pytest.mark.django_db


def _values(instance) -> dict:
    return {field.attname: getattr(instance, field.attname) for field in instance._meta.concrete_fields}


def _used_just_now(key: str) -> None:
    ApiToken.objects.filter(digest=ApiToken.digest_of(key)).update(last_used_at=timezone.now())


def test_a_token_gives_the_same_user_and_token_as_the_orm_in_one_query():
    user = make_user(Role.READER, first_name="Ada", email="ada@example.org")
    key = make_token(user)
    _used_just_now(key)

    with CaptureQueriesContext(connection) as captured:
        found_user, found_token = TokenAuthentication().authenticate_credentials(key)
        assert found_token.user is found_user  # read along: no second query
    expected_token = ApiToken.objects.select_related("user").get(digest=ApiToken.digest_of(key))

    assert len(captured) == 1
    assert _values(found_user) == _values(expected_token.user)
    assert _values(found_token) == _values(expected_token)
    assert found_user._state.adding is False and found_user._state.db == "default"


@pytest.mark.parametrize("inactive", [False, True])
def test_a_bad_or_inactive_token_is_refused_with_drfs_message(inactive):
    user = make_user(Role.READER, is_active=not inactive)
    key = make_token(user) if inactive else "0" * 40

    with pytest.raises(exceptions.AuthenticationFailed) as refused:
        TokenAuthentication().authenticate_credentials(key)
    assert str(refused.value.detail) == ("User inactive or deleted." if inactive else "Invalid token.")


def test_the_api_takes_a_token_and_refuses_a_bad_one(client):
    reader = make_user(Role.READER)
    key = make_token(reader)

    assert client.get("/api/reading/progress/", HTTP_AUTHORIZATION=f"Token {key}").status_code == 200
    wrong = key[:-1] + ("y" if key.endswith("x") else "x")  # one character off, never the key itself
    refused = client.get("/api/reading/progress/", HTTP_AUTHORIZATION=f"Token {wrong}")
    assert refused.status_code == 401
    assert refused["WWW-Authenticate"] == "Token"


@pytest.mark.parametrize(
    "groups, direct",
    [
        ((), ()),
        ((Role.READER,), ()),
        ((Role.READER, Role.ADJUDICATOR), ()),
        ((Role.COORDINATOR,), (Role.COORDINATOR, Role.DATA_MANAGER)),  # one role both ways: held once
        ((), (Role.READER,)),
    ],
)
def test_the_roles_come_with_the_token_and_equal_a_fresh_reading_of_them(groups, direct):
    user = make_user(*groups)
    for role in direct:
        app_label, codename = ROLE_PERMISSIONS[role].split(".")
        user.user_permissions.add(Permission.objects.get(content_type__app_label=app_label, codename=codename))
    key = make_token(user)
    _used_just_now(key)

    with CaptureQueriesContext(connection) as captured:
        found, _ = TokenAuthentication().authenticate_credentials(key)
        roles = user_roles(found)
    fresh = type(user).objects.get(pk=user.pk)

    assert len(captured) == 1
    assert roles == user_roles(fresh) == {*groups, *direct}
    assert all(fresh.has_perm(ROLE_PERMISSIONS[role]) for role in roles)


def test_a_token_stops_working_at_the_next_request_once_its_user_is_deactivated(client):
    reader = make_user(Role.READER)
    key = make_token(reader)
    assert client.get("/api/reading/progress/", HTTP_AUTHORIZATION=f"Token {key}").status_code == 200

    type(reader).objects.filter(pk=reader.pk).update(is_active=False)
    refused = client.get("/api/reading/progress/", HTTP_AUTHORIZATION=f"Token {key}")

    assert refused.status_code == 401
    assert refused.json() == {"detail": "User inactive or deleted."}


def test_a_revoked_token_is_refused_at_the_next_request(client):
    reader = make_user(Role.READER)
    key = make_token(reader)
    assert client.get("/api/reading/progress/", HTTP_AUTHORIZATION=f"Token {key}").status_code == 200

    revoke_token(ApiToken.objects.get(user=reader), actor=reader)
    refused = client.get("/api/reading/progress/", HTTP_AUTHORIZATION=f"Token {key}")

    assert refused.status_code == 401
    assert refused.json() == {"detail": "Invalid token."}


@pytest.mark.parametrize("superuser", [False, True])
def test_a_reading_token_keeps_only_the_reading_roles(client, superuser):
    person = make_user(Role.COORDINATOR, Role.READER, Role.DATA_MANAGER, is_superuser=superuser)
    reading, everything = make_token(person, scope=TokenScope.READING), make_token(person, scope=TokenScope.ALL)

    def answer(key: str, url: str) -> int:
        return client.get(url, HTTP_AUTHORIZATION=f"Token {key}").status_code

    make_study(slug="s1")

    assert answer(reading, "/api/reading/progress/") == 200
    assert answer(reading, "/api/studies/") == 403
    assert answer(reading, "/api/studies/s1/releases/") == 403
    assert answer(everything, "/api/studies/") == 200
    assert answer(everything, "/api/studies/s1/releases/") == 200
    found, _ = TokenAuthentication().authenticate_credentials(reading)
    assert user_roles(found) == ({Role.READER, Role.ADJUDICATOR} if superuser else {Role.READER})


def test_last_used_is_written_at_the_first_use_and_then_at_most_once_a_minute(monkeypatch):
    key = make_token(make_user(Role.READER))
    clock = [timezone.now()]
    monkeypatch.setattr(timezone, "now", lambda: clock[0])

    def use() -> int:
        with CaptureQueriesContext(connection) as captured:
            TokenAuthentication().authenticate_credentials(key)
        return len(captured)

    assert ApiToken.objects.get().last_used_at is None
    assert use() == 2  # the lookup, and "last used"
    first = clock[0]
    clock[0] += timedelta(seconds=59)
    assert use() == 1
    assert ApiToken.objects.get().last_used_at == first
    clock[0] += timedelta(seconds=1)
    assert use() == 2
    assert ApiToken.objects.get().last_used_at == first + timedelta(minutes=1)
