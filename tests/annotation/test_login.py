"""The log-in page, and django-axes locking out repeated failures."""

import logging

import pytest
from axes.models import AccessAttempt, AccessFailureLog
from django.conf import settings
from django.urls import reverse

from tests.factories import make_assignment, make_example, make_pair, make_study, make_user

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


def test_it_says_how_many_attempts_are_left_from_the_third_failure_on(client, alice):
    texts = [_log_in(client, "alice", "wrong password").content.decode() for _ in range(4)]

    assert "attempt" not in texts[0] and "attempt" not in texts[1]
    assert "<strong>2 attempts left</strong> before this account is locked" in texts[2]
    assert "<strong>1 attempt left</strong> before this account is locked" in texts[3]
    # The fifth failure is the lockout page itself.
    assert LOCKED_OUT_TEXT in _log_in(client, "alice", "wrong password").content.decode()


def test_a_logged_in_user_is_told_who_they_are_and_offered_the_way_on(client, alice):
    client.force_login(alice)

    html = client.get("/accounts/login/?next=/read/").content.decode()

    assert "You are logged in as <strong>alice</strong>." in html
    assert 'href="/read/"' in html
    assert 'name="password"' not in html
    assert 'action="/accounts/logout/"' in html


def test_an_ended_session_is_explained_and_leads_back_to_the_item(client, reader):
    assignment = make_assignment(make_example(make_pair(make_study())), reader)
    path = reverse("reading_page", args=[assignment.public_id])
    client.force_login(reader)
    client.session.flush()  # the session ends on the server; the browser still sends its cookie
    client.cookies[settings.SESSION_COOKIE_NAME] = "expired-session-key"

    response = client.get(path)

    assert response.status_code == 302
    assert response["Location"].startswith(f"/accounts/login/?next={path}")
    html = client.get(response["Location"]).content.decode()
    assert "Your session ended, so you were logged out." in html
    assert "a choice and rationale you had not submitted yet are kept in this browser" in html
    assert f'name="next" value="{path}"' in html

    response = client.post(response["Location"], {"username": "reader", "password": "pw-reader", "next": path})

    assert response["Location"] == path


def test_a_first_visit_without_a_session_is_not_called_an_ended_session(client, reader):
    response = client.get("/read/")
    assert "session_ended" not in response["Location"]
    assert "Your session ended" not in client.get(response["Location"]).content.decode()
