"""The API's token authentication answers exactly as DRF's, in one statement that also reads the roles."""

import pytest
from django.contrib.auth.models import Permission
from django.db import connection
from django.test.utils import CaptureQueriesContext
from rest_framework import exceptions
from rest_framework.authentication import TokenAuthentication as DRFTokenAuthentication
from rest_framework.authtoken.models import Token

from annotation.authentication import TokenAuthentication
from annotation.models import Role
from annotation.roles import ROLE_PERMISSIONS, user_roles
from tests.factories import make_user

pytestmark = pytest.mark.django_db


def _values(instance) -> dict:
    return {field.attname: getattr(instance, field.attname) for field in instance._meta.concrete_fields}


def test_a_token_gives_the_same_user_and_token_as_drf_in_one_query():
    user = make_user(Role.READER, first_name="Ada", email="ada@example.org")
    token = Token.objects.create(user=user)

    with CaptureQueriesContext(connection) as captured:
        found_user, found_token = TokenAuthentication().authenticate_credentials(token.key)
        assert found_token.user is found_user  # read along: no second query
    expected_user, expected_token = DRFTokenAuthentication().authenticate_credentials(token.key)

    assert len(captured) == 1
    assert _values(found_user) == _values(expected_user)
    assert _values(found_token) == _values(expected_token)
    assert found_user._state.adding is False and found_user._state.db == "default"


@pytest.mark.parametrize("inactive", [False, True])
def test_a_bad_or_inactive_token_is_refused_with_drfs_message(inactive):
    user = make_user(Role.READER, is_active=not inactive)
    key = Token.objects.create(user=user).key if inactive else "0" * 40

    with pytest.raises(exceptions.AuthenticationFailed) as ours:
        TokenAuthentication().authenticate_credentials(key)
    with pytest.raises(exceptions.AuthenticationFailed) as drf:
        DRFTokenAuthentication().authenticate_credentials(key)
    assert str(ours.value.detail) == str(drf.value.detail)


def test_the_api_takes_a_token_and_refuses_a_bad_one(client):
    reader = make_user(Role.READER)
    key = Token.objects.create(user=reader).key

    assert client.get("/api/reading/progress/", HTTP_AUTHORIZATION=f"Token {key}").status_code == 200
    refused = client.get("/api/reading/progress/", HTTP_AUTHORIZATION=f"Token {key[:-1]}x")
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
    key = Token.objects.create(user=user).key

    with CaptureQueriesContext(connection) as captured:
        found, _ = TokenAuthentication().authenticate_credentials(key)
        roles = user_roles(found)
    fresh = type(user).objects.get(pk=user.pk)

    assert len(captured) == 1
    assert roles == user_roles(fresh) == {*groups, *direct}
    assert all(fresh.has_perm(ROLE_PERMISSIONS[role]) for role in roles)


def test_a_token_stops_working_at_the_next_request_once_its_user_is_deactivated(client):
    reader = make_user(Role.READER)
    key = Token.objects.create(user=reader).key
    assert client.get("/api/reading/progress/", HTTP_AUTHORIZATION=f"Token {key}").status_code == 200

    type(reader).objects.filter(pk=reader.pk).update(is_active=False)
    refused = client.get("/api/reading/progress/", HTTP_AUTHORIZATION=f"Token {key}")

    assert refused.status_code == 401
    assert refused.json() == {"detail": "User inactive or deleted."}
