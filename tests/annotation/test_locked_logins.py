"""Coordinators unlock accounts locked out after repeated failed log-ins; the unlock is recorded."""

import pytest
from axes.models import AccessAttempt
from django.contrib.admin.models import LogEntry
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.urls import reverse

from annotation.models import Role
from tests.factories import make_user

pytestmark = pytest.mark.django_db

URL = reverse("locked_logins")


def _lock_out(client, username: str, address: str = "127.0.0.1") -> None:
    for _ in range(5):
        client.post("/accounts/login/", {"username": username, "password": "wrong"}, REMOTE_ADDR=address)


def test_a_coordinator_sees_locked_accounts_and_unlocks_one(client, coordinator):
    alice = make_user(Role.READER, username="alice")
    _lock_out(client, "alice")
    _lock_out(client, "alice", "10.0.0.9")
    client.force_login(coordinator)

    html = client.get(URL).content.decode()

    assert "alice" in html and "Unlock alice" in html
    assert '<td class="num">2</td>' in html  # two computers

    response = client.post(URL, {"username": "alice"}, follow=True)

    assert "alice can log in again." in response.content.decode()
    assert not AccessAttempt.objects.filter(username="alice").exists()
    entry = LogEntry.objects.get()
    assert entry.user_id == coordinator.pk
    assert entry.object_id == str(alice.pk)
    assert entry.change_message.startswith("Unlocked after repeated failed log-ins")
    client.logout()
    assert client.post("/accounts/login/", {"username": "alice", "password": "pw-alice"}).status_code == 302


def test_an_account_that_is_not_locked_is_not_listed(client, coordinator):
    make_user(username="bob")
    client.post("/accounts/login/", {"username": "bob", "password": "wrong"})
    client.force_login(coordinator)

    assert "No account is locked now." in client.get(URL).content.decode()


def test_a_coordinator_cannot_unlock_an_administrator(client, coordinator):
    make_user(username="root", is_staff=True)
    _lock_out(client, "root")
    client.force_login(coordinator)

    assert "ask an administrator" in client.get(URL).content.decode()
    response = client.post(URL, {"username": "root"}, follow=True)

    assert "only another administrator can unlock" in response.content.decode()
    assert "bin/manage axes_reset_username root" in response.content.decode()
    assert AccessAttempt.objects.filter(username="root").exists()
    assert not LogEntry.objects.exists()


def test_an_administrator_with_the_coordinator_role_can(client):
    admin = make_user(Role.COORDINATOR, username="admin", is_staff=True)
    make_user(username="root", is_staff=True)
    _lock_out(client, "root")
    client.force_login(admin)

    client.post(URL, {"username": "root"})

    assert not AccessAttempt.objects.filter(username="root").exists()


@pytest.mark.parametrize("role", [Role.READER, Role.ADJUDICATOR, Role.DATA_MANAGER])
def test_it_is_for_coordinators_only(client, role):
    make_user(username="alice")
    _lock_out(client, "alice")
    client.force_login(make_user(role))

    assert client.get(URL).status_code == 403
    assert client.post(URL, {"username": "alice"}).status_code == 403
    assert AccessAttempt.objects.filter(username="alice").exists()


def test_its_query_count_does_not_grow_with_the_locked_accounts(client, coordinator):
    def queries() -> int:
        client.force_login(coordinator)
        with CaptureQueriesContext(connection) as captured:
            assert client.get(URL).status_code == 200
        return len(captured)

    make_user(username="u0")
    _lock_out(client, "u0")
    one = queries()
    for n in range(1, 5):
        make_user(username=f"u{n}", is_staff=n % 2 == 0)
        _lock_out(client, f"u{n}")
    assert queries() == one
    assert one <= 8
