"""Odd requests to the API get a clear JSON answer: never a 500, never Django's HTML error page."""

import json

import pytest
from django.test import Client, RequestFactory, override_settings

from annotation.api_errors import server_error
from annotation.models import Annotation, AuditEvent, CandidatePair, Role, Study, StudyMember
from annotation.parsers import MAX_JSON_DEPTH, json_depth
from tests.annotation.test_api_permissions import ENDPOINTS
from tests.factories import make_pair, make_study, make_token, make_user

POSTS = [e for e in ENDPOINTS if e.method == "post"]


def _paths_with_suffix(suffix: str) -> list[str]:
    paths = {e.path.split("?")[0] for e in ENDPOINTS if e.path.split("?")[0] != "/api/"}
    return sorted(path.rstrip("/") + suffix for path in paths)


@pytest.fixture
def superuser_client(db) -> Client:
    make_pair(make_study("s1"))
    client = Client()
    client.force_login(make_user(is_superuser=True))
    return client


def _state() -> tuple:
    return (
        Study.objects.count(),
        CandidatePair.objects.filter(sampled=True).count(),
        Annotation.objects.count(),
        AuditEvent.objects.count(),
    )


def _assert_json_detail(response, status: int) -> dict:
    assert response.status_code == status, response.content[:300]
    assert response["Content-Type"].startswith("application/json"), response["Content-Type"]
    body = response.json()
    assert body["detail"]
    return body


@pytest.mark.parametrize("suffix", [".json", ".zip", ".api", ".json/", ".zip/"])
def test_it_answers_a_json_404_to_a_format_suffix_on_every_route(superuser_client, suffix):
    for path in _paths_with_suffix(suffix):
        response = superuser_client.get(path, follow=True)  # APPEND_SLASH may redirect first

        assert response.status_code == 404, (path, response.status_code)
        assert response.json()["detail"], path


def test_the_format_query_parameter_still_picks_the_renderer(superuser_client):
    response = superuser_client.get("/api/studies/", {"format": "json"})

    assert response.status_code == 200
    assert response["Content-Type"].startswith("application/json")


def test_it_answers_a_json_404_to_an_unknown_api_url(superuser_client):
    _assert_json_detail(superuser_client.get("/api/no-such-thing/"), 404)


def test_an_unknown_page_outside_the_api_is_still_an_html_404(superuser_client):
    response = superuser_client.get("/no-such-page/")

    assert response.status_code == 404
    assert response["Content-Type"].startswith("text/html")


def test_a_request_django_refuses_before_the_api_is_a_json_400(db):
    response = Client(HTTP_HOST="not-allowed.example").get("/api/studies/")

    _assert_json_detail(response, 400)


def test_a_server_error_under_the_api_is_json():
    response = server_error(RequestFactory().get("/api/studies/"))

    assert response.status_code == 500
    assert json.loads(response.content) == {"detail": "Server error."}


def _nested(depth: int) -> str:
    return "[" * depth + "]" * depth


# The endpoints that read the body: the others look up an object that does not exist first (404)
# or take a multipart file upload only (415).
READ_BODY = [
    e
    for e in POSTS
    if e.content_type
    and (
        e.status != 404
        or e.url_name in ("reading-rating", "reading-guide", "reading-practice-rating", "adjudication-decision")
    )
]


@pytest.mark.parametrize("depth", [50_000, MAX_JSON_DEPTH + 1, 900])
@pytest.mark.parametrize("endpoint", READ_BODY, ids=lambda e: e.path)
def test_it_refuses_json_nested_too_deep_with_a_400(superuser_client, endpoint, depth):
    before = _state()

    response = superuser_client.post(endpoint.path, _nested(depth), content_type="application/json")

    assert "nested more than" in _assert_json_detail(response, 400)["detail"]
    assert _state() == before


@pytest.mark.parametrize("endpoint", [e for e in POSTS if e not in READ_BODY], ids=lambda e: e.path)
def test_it_never_fails_on_json_nested_too_deep_where_it_reads_no_body(superuser_client, endpoint):
    response = superuser_client.post(endpoint.path, _nested(50_000), content_type="application/json")

    _assert_json_detail(response, 415 if endpoint.content_type is None else 404)


def test_it_refuses_an_object_nested_too_deep_inside_a_field(superuser_client):
    body = '{"slug": "deep", "name": ' + '{"a": ' * 40 + "1" + "}" * 40 + "}"

    response = superuser_client.post("/api/studies/", body, content_type="application/json")

    assert "nested more than" in _assert_json_detail(response, 400)["detail"]
    assert not Study.objects.filter(slug="deep").exists()


def test_it_accepts_json_nested_as_deep_as_the_limit(superuser_client):
    body = {"per_variation": 1, "datasets": ["mimic-cxr"]}

    response = superuser_client.post("/api/studies/s1/sample/", body, content_type="application/json")

    assert response.status_code == 200, response.content


def test_json_depth_counts_lists_and_objects_without_recursion():
    assert json_depth("text") == 0
    assert json_depth({"a": [1, {"b": []}]}) == 4
    deep: list = []
    for _ in range(100_000):
        deep = [deep]
    assert json_depth(deep) > MAX_JSON_DEPTH


@override_settings(DATA_UPLOAD_MAX_MEMORY_SIZE=1000)
@pytest.mark.parametrize(
    ("content_type", "body"),
    [
        ("application/json", json.dumps({"slug": "big", "name": "x" * 2000})),
        ("application/x-www-form-urlencoded", "slug=big&name=" + "x" * 2000),
    ],
    ids=["json", "form"],
)
def test_it_answers_a_body_over_the_limit_with_a_json_413(superuser_client, content_type, body):
    response = superuser_client.post("/api/studies/", body, content_type=content_type)

    assert "1,000 bytes" in _assert_json_detail(response, 413)["detail"]
    assert not Study.objects.filter(slug="big").exists()


@override_settings(DATA_UPLOAD_MAX_NUMBER_FIELDS=5)
def test_it_answers_too_many_form_fields_with_a_json_400(superuser_client):
    body = "&".join(f"f{i}=1" for i in range(10))

    response = superuser_client.post("/api/studies/", body, content_type="application/x-www-form-urlencoded")

    assert "form fields" in _assert_json_detail(response, 400)["detail"]


@override_settings(DATA_UPLOAD_MAX_MEMORY_SIZE=1000)
def test_a_token_client_gets_the_json_413_too(db):
    make_study("s1")
    token = make_token(make_user(Role.COORDINATOR))
    client = Client(HTTP_AUTHORIZATION=f"Token {token}")

    response = client.post("/api/studies/s1/sample/", {"per_variation": 1, "x": "y" * 2000}, "application/json")

    _assert_json_detail(response, 413)


@pytest.mark.parametrize("role", [Role.READER, Role.COORDINATOR])
def test_a_session_post_nested_too_deep_is_a_400_before_the_csrf_and_role_checks(db, role):
    # The CSRF check reads the body, for any logged-in session, before the role is checked.
    make_study("s1")
    client = Client(enforce_csrf_checks=True)
    client.force_login(make_user(role))
    client.get("/accounts/login/")  # the CSRF cookie; the check then looks for the token in the body

    response = client.post("/api/studies/s1/members/", _nested(50_000), content_type="application/json")

    assert "nested more than" in _assert_json_detail(response, 400)["detail"]
    assert not StudyMember.objects.exists()
