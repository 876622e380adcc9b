"""API tokens without a shell: made and revoked on one's Settings page, revoked by a coordinator,
every one audited, the key shown once and stored only as a digest."""

import importlib
import re
from types import SimpleNamespace

import pytest
from django.apps import apps
from django.contrib.admin.models import ADDITION, DELETION, LogEntry
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext

from annotation.models import ApiToken, Role, TokenScope
from annotation.tokens import issue_token
from tests.factories import make_token, make_user

pytestmark = pytest.mark.django_db


def _logged_in(user) -> Client:
    client = Client()
    client.force_login(user)
    return client


def _make(client: Client, **data) -> object:
    return client.post("/settings/tokens/", data, follow=True)


def _shown_key(response) -> str:
    match = re.search(r'id="new-token-key" class="token-key" value="([^"]+)"', response.content.decode())
    assert match, "the new key is not on the page"
    return match.group(1)


def test_a_reader_makes_a_token_sees_its_key_once_and_it_works_for_reading():
    reader = make_user(Role.READER)
    client = _logged_in(reader)

    response = _make(client, name="judge script", scope=TokenScope.READING)

    assert response.redirect_chain == [("/settings/", 302)]
    key = _shown_key(response)
    token = ApiToken.objects.get(user=reader)
    assert (token.name, token.scope, token.prefix) == ("judge script", TokenScope.READING, key[:8])
    assert token.digest == ApiToken.digest_of(key) and key not in str(list(ApiToken.objects.values_list()))
    assert "no-store" in response["Cache-Control"]  # not kept by the browser either
    assert "new-token-key" not in client.get("/settings/").content.decode()  # once, and never again
    api = Client(HTTP_AUTHORIZATION=f"Token {key}")
    assert api.get("/api/reading/progress/").status_code == 200


def test_a_readers_form_offers_no_choice_and_refuses_all_roles():
    reader = make_user(Role.READER)
    client = _logged_in(reader)

    page = client.get("/settings/").content.decode()
    response = client.post("/settings/tokens/", {"name": "sneaky", "scope": TokenScope.ALL})

    assert 'type="hidden" name="scope" value="reading"' in page
    assert "All my roles" not in page
    assert response.status_code == 422
    assert "Select a valid choice" in response.content.decode()
    assert not ApiToken.objects.exists()


def test_a_coordinators_token_may_have_all_their_roles_or_only_reading():
    coordinator = make_user(Role.COORDINATOR, Role.READER)
    client = _logged_in(coordinator)

    assert "All my roles" in client.get("/settings/").content.decode()
    everything = _shown_key(_make(client, name="sync", scope=TokenScope.ALL))
    reading = _shown_key(_make(client, name="reading only", scope=TokenScope.READING))

    assert Client(HTTP_AUTHORIZATION=f"Token {everything}").get("/api/studies/").status_code == 200
    assert Client(HTTP_AUTHORIZATION=f"Token {reading}").get("/api/studies/").status_code == 403
    assert Client(HTTP_AUTHORIZATION=f"Token {reading}").get("/api/reading/progress/").status_code == 200


@pytest.mark.parametrize(
    "name, error",
    [
        ("", "This field is required."),
        ("   ", "This field is required."),
        ("laptop", "already has a token named &quot;laptop&quot;: choose another name, or revoke that one first."),
        ("x" * 65, "Ensure this value has at most 64 characters"),
    ],
)
def test_a_bad_name_is_refused_on_the_name_field_and_nothing_is_made(name, error):
    reader = make_user(Role.READER)
    make_token(reader, name="laptop")
    client = _logged_in(reader)
    before = list(ApiToken.objects.values_list("pk", flat=True))

    response = client.post("/settings/tokens/", {"name": name, "scope": TokenScope.READING})

    assert response.status_code == 422
    body = response.content.decode()
    assert error in body
    assert 'aria-invalid="true"' in body and 'id="token-name"' in body
    assert list(ApiToken.objects.values_list("pk", flat=True)) == before


def test_the_settings_page_lists_ones_own_tokens_only_escaped_with_their_last_use():
    reader, other = make_user(Role.READER), make_user(Role.READER)
    make_token(reader, name="<script>alert(1)</script>")
    make_token(other, name="someone else's")
    used = make_token(reader, name="used")
    Client(HTTP_AUTHORIZATION=f"Token {used}").get("/api/reading/progress/")

    body = _logged_in(reader).get("/settings/").content.decode()

    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in body and "<script>alert(1)" not in body
    assert "someone else" not in body
    assert "2 tokens" in body
    assert body.count(">never<") == 1  # the first one; "used" shows its time


def test_revoking_ones_own_token_refuses_it_at_once_and_is_audited():
    reader = make_user(Role.READER)
    key = make_token(reader, name="laptop")
    token = ApiToken.objects.get()
    client = _logged_in(reader)

    response = client.post(f"/settings/tokens/{token.public_id}/revoke/", follow=True)

    assert response.redirect_chain == [("/settings/#api-tokens", 302)]
    assert "The token “laptop” is revoked" in response.content.decode()
    assert not ApiToken.objects.exists()
    assert Client(HTTP_AUTHORIZATION=f"Token {key}").get("/api/reading/progress/").status_code == 401
    entry = LogEntry.objects.get(action_flag=DELETION)
    assert (entry.user_id, entry.object_id) == (reader.pk, str(reader.pk))
    assert entry.change_message == f'Revoked API token "laptop" ({token.prefix}…)'


def test_nobody_revokes_someone_elses_token_from_their_settings():
    owner, coordinator = make_user(Role.READER), make_user(Role.COORDINATOR)
    make_token(owner)
    token = ApiToken.objects.get()

    response = _logged_in(coordinator).post(f"/settings/tokens/{token.public_id}/revoke/")

    assert response.status_code == 404
    assert ApiToken.objects.filter(pk=token.pk).exists()


def test_making_a_token_is_audited_with_who_made_it():
    reader = make_user(Role.READER)
    _make(_logged_in(reader), name="laptop", scope=TokenScope.READING)

    entry = LogEntry.objects.get(action_flag=ADDITION)
    prefix = ApiToken.objects.get().prefix
    assert (entry.user_id, entry.object_id) == (reader.pk, str(reader.pk))
    assert entry.change_message == f'Made API token "laptop" ({prefix}…, reading only)'


def test_a_coordinator_sees_everyones_tokens_and_revokes_any_audited_under_their_name():
    coordinator, reader = make_user(Role.COORDINATOR), make_user(Role.READER, is_active=False)
    key = make_token(reader, name="lost laptop")
    token = ApiToken.objects.get()
    client = _logged_in(coordinator)

    page = client.get("/people/tokens/").content.decode()
    response = client.post(f"/people/tokens/{token.public_id}/revoke/", follow=True)

    assert "lost laptop" in page and reader.username in page and "inactive" in page
    assert response.redirect_chain == [("/people/tokens/", 302)]
    assert f"The token “lost laptop” of {reader.username} is revoked." in response.content.decode()
    assert not ApiToken.objects.exists()
    assert Client(HTTP_AUTHORIZATION=f"Token {key}").get("/api/reading/progress/").status_code == 401
    entry = LogEntry.objects.get(action_flag=DELETION)
    assert (entry.user_id, entry.object_id) == (coordinator.pk, str(reader.pk))


def test_the_tokens_pages_read_a_fixed_number_of_queries():
    coordinator = make_user(Role.COORDINATOR)
    client = _logged_in(coordinator)

    def queries(url: str) -> int:
        with CaptureQueriesContext(connection) as captured:
            assert client.get(url).status_code == 200
        return len(captured)

    make_token(coordinator)
    few = (queries("/settings/"), queries("/people/tokens/"))
    for _ in range(5):
        make_token(coordinator)
        make_token(make_user(Role.READER))
    assert (queries("/settings/"), queries("/people/tokens/")) == few


def test_tokens_from_before_named_tokens_keep_working():
    """The migration turns each of Django REST framework's tokens (one per user) into a named token."""
    migration = importlib.import_module("annotation.migrations.0018_api_tokens")
    coordinator = make_user(Role.COORDINATOR)
    old_key = "a" * 40
    with connection.cursor() as cursor:
        columns = "key varchar(40) PRIMARY KEY, user_id integer, created timestamp with time zone"
        cursor.execute(f"CREATE TABLE authtoken_token ({columns})")
        cursor.execute(
            "INSERT INTO authtoken_token VALUES (%s, %s, %s)", [old_key, coordinator.pk, "2026-01-02 03:04:05+00:00"]
        )
    migration.keep_earlier_tokens(apps, SimpleNamespace(connection=connection))

    token = ApiToken.objects.get()
    assert (token.name, token.scope, token.prefix) == ("Earlier token", TokenScope.ALL, "aaaaaaaa")
    assert token.created_at.year == 2026 and (token.created_at.month, token.created_at.day) == (1, 2)
    assert Client(HTTP_AUTHORIZATION=f"Token {old_key}").get("/api/studies/").status_code == 200


def test_the_service_refuses_a_wider_token_than_its_person_may_have():
    from annotation.tokens import TokenRefused

    with pytest.raises(TokenRefused, match="reading roles only"):
        issue_token(make_user(Role.READER), name="x", scope=TokenScope.ALL)
    assert not ApiToken.objects.exists()


def test_the_service_lets_only_the_owner_or_a_coordinator_revoke():
    from annotation.tokens import TokenRefused, revoke_token

    owner, colleague, coordinator = make_user(Role.READER), make_user(Role.READER), make_user(Role.COORDINATOR)
    make_token(owner, name="laptop")
    make_token(owner, name="desktop")

    with pytest.raises(TokenRefused, match="Only the token's owner or a coordinator can revoke it"):
        revoke_token(ApiToken.objects.get(name="laptop"), actor=colleague)
    assert ApiToken.objects.count() == 2 and not LogEntry.objects.filter(action_flag=DELETION).exists()
    revoke_token(ApiToken.objects.get(name="laptop"), actor=coordinator)
    revoke_token(ApiToken.objects.get(name="desktop"), actor=owner)
    assert not ApiToken.objects.exists()
