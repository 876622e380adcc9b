"""403, 404 and 500 are pages of the site: its layout, what happened, and the way on."""

import pytest
from django.test import Client, RequestFactory
from django.urls import reverse

from annotation.api_errors import server_error
from annotation.models import Role
from tests.factories import make_user

pytestmark = pytest.mark.django_db


def test_a_403_says_what_happened_and_where_to_go(client):
    client.force_login(make_user(Role.READER, username="rita"))

    response = client.get(reverse("study_list"))

    assert response.status_code == 403
    html = response.content.decode()
    assert '<header class="site-header">' in html  # the site's layout, with its menu
    assert "You cannot open this page" in html
    assert "(rita)" in html
    assert f'href="{reverse("home")}"' in html
    assert "Logged in as rita" in html


def test_a_404_says_what_happened_and_where_to_go(client):
    client.force_login(make_user(Role.READER))

    response = client.get("/no/such/page/")

    assert response.status_code == 404
    html = response.content.decode()
    assert '<header class="site-header">' in html
    assert "This page does not exist" in html
    assert f'href="{reverse("home")}"' in html


def test_a_404_offers_the_login_to_an_anonymous_visitor(client):
    html = client.get("/no/such/page/").content.decode()
    assert f'href="{reverse("login")}"' in html


def test_a_500_is_a_page_of_the_site_too():
    request = RequestFactory().get("/studies/")

    response = server_error(request)

    assert response.status_code == 500
    html = response.content.decode()
    assert '<header class="site-header">' in html
    assert "Something went wrong on our side" in html


def test_the_api_still_answers_json(client):
    response = client.get("/api/no-such-endpoint/")
    assert response.status_code == 404
    assert response.json() == {"detail": "Not found."}


def test_favicon_ico_leads_to_the_sites_icon(db):
    response = Client().get("/favicon.ico")
    assert response.status_code == 301
    assert response["Location"].endswith("favicon.svg")
