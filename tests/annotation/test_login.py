"""The log-in page, and django-axes locking out repeated failures."""

import logging

import pytest
from axes.models import AccessAttempt, AccessFailureLog
from django.conf import settings

from tests.factories import make_user

LOCKED_OUT_TEXT = "Too many failed log-ins"


@pytest.fixture
def alice(db):
    return make_user(username="alice")


@pytest.fixture
def axes_log(caplog):
    # The "axes" logger does not propagate (settings.LOGGING), so listen to it directly.
    logger = logging.getLogger("axes")
    logger.addHandler(caplog.handler)
    caplog.set_level(logging.WARNING, logger="axes")
    yield caplog
    logger.removeHandler(caplog.handler)


def _log_in(client, username: str, password: str, **extra):
    return client.post("/accounts/login/", {"username": username, "password": password}, **extra)


def _fail(client, username: str, times: int, **extra) -> list[int]:
    return [_log_in(client, username, "wrong password", **extra).status_code for _ in range(times)]


def test_it_shows_the_login_page(client, db):
    response = client.get("/accounts/login/")

    assert response.status_code == 200
    assert b'name="username"' in response.content
    assert b'name="password"' in response.content


def test_it_logs_in_with_good_credentials(client, alice):
    response = _log_in(client, "alice", "pw-alice")

    assert response.status_code == 302
    assert response.url == "/"
    assert client.session["_auth_user_id"] == str(alice.pk)


def test_it_redirects_to_next_after_login(client, alice):
    response = client.post("/accounts/login/", {"username": "alice", "password": "pw-alice", "next": "/studies/"})

    assert response.status_code == 302
    assert response.url == "/studies/"


def test_it_refuses_a_wrong_password(client, alice):
    response = _log_in(client, "alice", "wrong password")

    assert response.status_code == 200
    assert b"did not match" in response.content
    assert "_auth_user_id" not in client.session


def test_it_locks_out_after_the_failure_limit_even_with_the_right_password(client, alice):
    assert settings.AXES_FAILURE_LIMIT == 5

    # The first four failures show the form again; the fifth already answers with the lockout.
    assert _fail(client, "alice", 5) == [200, 200, 200, 200, 429]
    response = _log_in(client, "alice", "pw-alice")

    assert response.status_code == 429
    assert LOCKED_OUT_TEXT in response.content.decode()
    assert "_auth_user_id" not in client.session


def test_it_records_failures_and_the_lockout_in_the_database(client, alice):
    _fail(client, "alice", 5)
    _log_in(client, "alice", "pw-alice")

    attempt = AccessAttempt.objects.get(username="alice")
    assert attempt.ip_address == "127.0.0.1"
    assert attempt.failures_since_start == 6
    assert AccessFailureLog.objects.filter(username="alice").count() == 6
    assert AccessFailureLog.objects.filter(username="alice", locked_out=True).exists()


def test_it_logs_failures_and_the_lockout(client, alice, axes_log):
    _fail(client, "alice", 5)

    messages = [r.getMessage() for r in axes_log.records if r.name.startswith("axes")]
    assert all(r.levelno == logging.WARNING for r in axes_log.records if r.name.startswith("axes"))
    assert sum(m.startswith(("AXES: New login failure", "AXES: Repeated login failure")) for m in messages) == 5
    assert sum(m.startswith("AXES: Locking out") for m in messages) == 1


def test_it_does_not_lock_out_another_username(client, alice):
    make_user(username="bob")
    _fail(client, "alice", 5)

    response = _log_in(client, "bob", "pw-bob")

    assert response.status_code == 302
    assert not AccessAttempt.objects.filter(username="bob").exists()


def test_it_does_not_lock_the_username_from_another_address(client, alice):
    _fail(client, "alice", 5)

    response = _log_in(client, "alice", "pw-alice", REMOTE_ADDR="10.0.0.2")

    assert response.status_code == 302


def test_a_successful_login_resets_the_failure_count(client, alice):
    _fail(client, "alice", 4)
    assert _log_in(client, "alice", "pw-alice").status_code == 302
    client.logout()

    assert _fail(client, "alice", 4) == [200, 200, 200, 200]
    assert _log_in(client, "alice", "pw-alice").status_code == 302
