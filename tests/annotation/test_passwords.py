"""One's own password: changed on the Settings page, reset by e-mail; a wrong current password is a failed log-in."""

import re

import pytest
from axes.models import AccessAttempt
from django.contrib.auth import get_user_model
from django.core import mail
from django.test import override_settings

from annotation.models import Role
from tests.factories import make_user

pytestmark = pytest.mark.django_db

NEW = "a-new-and-long-password-77"


def _change(client, old: str):
    return client.post("/accounts/password/change/", {"old_password": old, "new_password1": NEW, "new_password2": NEW})


def test_the_settings_page_offers_to_change_the_password_and_the_change_keeps_one_logged_in(client):
    user = make_user(Role.READER, username="ada")
    client.force_login(user)
    assert 'href="/accounts/password/change/"' in client.get("/settings/").content.decode()

    response = _change(client, "pw-ada")

    assert response.status_code == 302 and response["Location"] == "/accounts/password/change/done/"
    user.refresh_from_db()
    assert user.check_password(NEW)
    assert client.get("/settings/").status_code == 200  # still logged in here
    assert "Your password is changed" in client.get("/accounts/password/change/done/").content.decode()


def test_a_wrong_current_password_is_a_failed_log_in_and_locks_the_account_like_the_log_in_page(client, settings):
    user = make_user(Role.READER, username="ada")
    client.force_login(user)

    for _ in range(settings.AXES_FAILURE_LIMIT - 1):
        response = _change(client, "not-my-password")
        assert response.status_code == 200
        assert "Your old password was entered incorrectly" in response.content.decode()
    locked = _change(client, "not-my-password")

    assert AccessAttempt.objects.get(username="ada").failures_since_start == settings.AXES_FAILURE_LIMIT
    assert locked.status_code == 429
    user.refresh_from_db()
    assert user.check_password("pw-ada")


def test_logged_out_the_change_page_is_the_log_in_page(client):
    response = client.get("/accounts/password/change/")

    assert response.status_code == 302
    assert response["Location"] == "/accounts/login/?next=/accounts/password/change/"


def test_a_password_is_reset_through_a_link_sent_by_e_mail_that_works_once(client):
    user = make_user(Role.READER, username="ada", email="ada@example.org")
    assert 'href="/accounts/password/reset/"' in client.get("/accounts/login/").content.decode()

    sent = client.post("/accounts/password/reset/", {"email": "ada@example.org"})
    client.post("/accounts/password/reset/", {"email": "nobody@example.org"})  # no account: the same answer

    assert sent.status_code == 302 and sent["Location"] == "/accounts/password/reset/sent/"
    [message] = mail.outbox
    assert message.to == ["ada@example.org"]
    assert "ada" in message.body
    link = re.search(r"https?://[^/]+(/accounts/password/reset/[^/\s]+/[^/\s]+/)", message.body).group(1)
    form = client.get(link, follow=True)
    assert "Choose a new password" in form.content.decode()
    done = client.post(form.redirect_chain[-1][0], {"new_password1": NEW, "new_password2": NEW})

    assert done.status_code == 302 and done["Location"] == "/accounts/password/reset/done/"
    assert get_user_model().objects.get(pk=user.pk).check_password(NEW)
    logged_in = client.post("/accounts/login/", {"username": "ada", "password": NEW})
    assert logged_in.status_code == 302
    client.logout()
    assert "This link no longer works" in client.get(link, follow=True).content.decode()


@override_settings(READINGROOM_PASSWORD_RESET=False)
def test_without_e_mail_the_reset_page_says_to_ask_an_administrator(client):
    make_user(Role.READER, username="ada", email="ada@example.org")

    page = client.get("/accounts/password/reset/")
    posted = client.post("/accounts/password/reset/", {"email": "ada@example.org"})

    assert page.status_code == posted.status_code == 503
    assert "ask the person who runs ReadingRoom" in page.content.decode()
    assert mail.outbox == []
