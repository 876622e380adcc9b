"""Everyone's settings page: the colour theme and single-key shortcuts, kept in their profile."""

import pytest
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext
from django.urls import reverse

from annotation.models import Preferences, Role, Theme
from tests.factories import make_user

pytestmark = pytest.mark.django_db

URL = reverse("preferences")


def _client(user) -> Client:
    client = Client()
    client.force_login(user)
    return client


def test_it_requires_a_login() -> None:
    response = Client().get(URL)
    assert response.status_code == 302
    assert response["Location"].startswith(reverse("login"))


@pytest.mark.parametrize("roles", [(), (Role.READER,), (Role.ADJUDICATOR,), (Role.COORDINATOR,), (Role.DATA_MANAGER,)])
def test_every_person_opens_it_from_the_menu(roles: tuple) -> None:
    client = _client(make_user(*roles))
    home = client.get(reverse("home"), follow=True).content.decode()
    assert f'href="{URL}"' in home
    response = client.get(URL)
    assert response.status_code == 200
    html = response.content.decode()
    assert 'aria-current="page">Settings</a>' in html
    assert "Follow the system setting" in html


def test_it_saves_the_settings_and_every_page_applies_them_at_once() -> None:
    user = make_user(Role.READER)
    client = _client(user)
    page = client.get(reverse("reader_home")).content.decode()
    assert '<html lang="en" data-theme="system">' in page
    assert 'data-single-key-shortcuts="on"' in page

    response = client.post(URL, {"theme": Theme.DARK})  # an unticked checkbox is not sent

    assert response.status_code == 302
    assert Preferences.objects.filter(user=user).values_list("theme", "single_key_shortcuts").get() == (
        Theme.DARK,
        False,
    )
    page = client.get(reverse("reader_home")).content.decode()
    assert '<html lang="en" data-theme="dark">' in page
    assert 'data-single-key-shortcuts="off"' in page
    assert "Your settings are saved." in page
    # Another person keeps their own.
    other = _client(make_user(Role.READER)).get(reverse("reader_home")).content.decode()
    assert '<html lang="en" data-theme="system">' in other


def test_a_choice_that_does_not_exist_is_refused_and_names_its_field() -> None:
    user = make_user(Role.READER)
    Preferences.objects.create(user=user, theme=Theme.LIGHT)

    response = _client(user).post(URL, {"theme": "purple", "single_key_shortcuts": "on"})

    assert response.status_code == 422
    html = response.content.decode()
    assert "Select a valid choice. purple is not one of the available choices." in html
    assert 'aria-invalid="true"' in html
    assert Preferences.objects.get(user=user).theme == Theme.LIGHT


def test_a_new_session_starts_with_the_saved_settings() -> None:
    user = make_user(Role.COORDINATOR)
    Preferences.objects.create(user=user, theme=Theme.DARK, single_key_shortcuts=False)

    page = _client(user).get(reverse("study_list")).content.decode()

    assert '<html lang="en" data-theme="dark">' in page
    assert 'data-single-key-shortcuts="off"' in page


def test_pages_read_the_settings_from_the_session_without_a_query() -> None:
    user = make_user(Role.READER)
    Preferences.objects.create(user=user, theme=Theme.DARK)
    client = _client(user)

    with CaptureQueriesContext(connection) as queries:
        page = client.get(reverse("reader_home")).content.decode()

    assert '<html lang="en" data-theme="dark">' in page
    assert not [query["sql"] for query in queries if "annotation_preferences" in query["sql"]]


def test_a_session_without_a_copy_reads_the_database_once() -> None:
    user = make_user(Role.READER)
    Preferences.objects.create(user=user, theme=Theme.DARK)
    client = _client(user)
    session = client.session
    del session["readingroom.preferences"]
    session.save()

    first = client.get(reverse("reader_home")).content.decode()
    with CaptureQueriesContext(connection) as queries:
        client.get(reverse("reader_home"))

    assert '<html lang="en" data-theme="dark">' in first
    assert not [query["sql"] for query in queries if "annotation_preferences" in query["sql"]]
