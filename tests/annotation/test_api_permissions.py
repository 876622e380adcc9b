"""Who may call what under /api/: the whole matrix, token authentication and default deny."""

import itertools
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from urllib.parse import quote

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.test import Client
from django.urls import URLResolver, get_resolver, resolve
from rest_framework.response import Response
from rest_framework.settings import api_settings
from rest_framework.test import APIRequestFactory, force_authenticate
from rest_framework.views import APIView

from analysis.models import MetricScore
from annotation.models import (
    CandidatePair,
    Dataset,
    GuideAcknowledgement,
    GuideVersion,
    OriginalReport,
    PracticeItem,
    Role,
    Study,
)
from annotation.permissions import DenyAll
from config.urls import router
from tests.factories import csv_bytes, csv_row, make_pair, make_study, make_token, make_user
from tests.module_data import rolled_back

USER_KINDS: dict[str, Callable] = {
    "anonymous": lambda: None,
    "reader": lambda: make_user(Role.READER),
    "adjudicator": lambda: make_user(Role.ADJUDICATOR),
    "coordinator": lambda: make_user(Role.COORDINATOR),
    "data manager": lambda: make_user(Role.DATA_MANAGER),
    "user with no role": lambda: make_user(),
    "inactive coordinator": lambda: make_user(Role.COORDINATOR, is_active=False),
    "superuser": lambda: make_user(is_superuser=True),
    "automated judge": lambda: make_user(Role.JUDGE),
}
COORDINATORS = {"coordinator", "superuser"}
DATA_MANAGERS = {"data manager", "superuser"}
READERS = {"reader", "superuser"}
ADJUDICATORS = {"adjudicator", "superuser"}
# The reader API also serves automated judges (from their own queue); nothing else does.
READERS_AND_JUDGES = READERS | {"automated judge"}
LOGGED_IN = set(USER_KINDS) - {"anonymous", "inactive coordinator"}  # an inactive user's session is anonymous
NOBODY: set[str] = set()


@dataclass(frozen=True)
class Endpoint:
    url_name: str
    method: str
    path: str
    allowed: set[str]
    status: int = 200
    data: Callable[[], dict] = field(default=dict)
    content_type: str | None = "application/json"


def _import_file() -> dict:
    return {"file": SimpleUploadedFile("pairs.csv", csv_bytes([csv_row()]), content_type="text/csv")}


_rewrite_ids = itertools.count(50_100_000)


def _rewrite_file() -> dict:
    """A rewrite of a freshly stored original report (so that an allowed call imports a pair)."""
    study_id = str(next(_rewrite_ids))
    OriginalReport.objects.create(
        dataset=Dataset.objects.get(key="mimic-cxr"),
        source_study_id=study_id,
        findings="Lungs are clear.",
        impression="Normal.",
        content_hash="0" * 32,
    )
    row = {"dataset": "mimic-cxr", "study_id": study_id, "reref_variation": "hedging", "verdict": "accepted"}
    row |= {"alternative_findings": "The lungs are probably clear.", "alternative_impression": "Likely normal."}
    data = csv_bytes([row], columns=list(row))
    return {"file": SimpleUploadedFile("rewrites.csv", data, content_type="text/csv")}


def _practice_file() -> dict:
    data = b"original_findings,original_impression,alternative_findings,alternative_impression,"
    data += b"task2_rating,task2_explanation\r\n"
    data += b"Clear.,Normal.,Lungs clear.,No acute process.,equivalent,Same content.\r\n"
    return {"file": SimpleUploadedFile("practice.csv", data, content_type="text/csv")}


def _metric_scores_file() -> dict:
    pair = CandidatePair.objects.get(study__slug="s1", sampled=True)
    data = b"dataset,study_id,reref_variation,metric,score\r\n"
    data += f"{pair.dataset.key},{pair.source_study_id},{pair.variation.key},bertscore,0.9\r\n".encode()
    return {"file": SimpleUploadedFile("scores.csv", data, content_type="text/csv")}


SOME_ID = "6f1c2a4e-0d5b-4c8e-9a7f-3b2d1e0c9a8b"


def _rating() -> dict:
    return {"rating": "realistic", "rationale": "", "form_token": "0b7e4a52-9c1d-4f3e-8a6b-2d5c7e9f1a3b"}


ENDPOINTS = [
    Endpoint("study-list", "get", "/api/studies/", COORDINATORS),
    Endpoint("study-list", "post", "/api/studies/", COORDINATORS, 201, lambda: {"slug": "new-study", "name": "New"}),
    Endpoint("study-detail", "get", "/api/studies/s1/", COORDINATORS),
    Endpoint("study-imports", "post", "/api/studies/s1/imports/", COORDINATORS, 201, _import_file, None),
    Endpoint("study-rewrites", "post", "/api/studies/s1/rewrites/", COORDINATORS, 201, _rewrite_file, None),
    Endpoint("study-sample", "post", "/api/studies/s1/sample/", COORDINATORS, 200, lambda: {"per_variation": 1}),
    Endpoint("study-summary", "get", "/api/studies/s1/summary/", COORDINATORS),
    Endpoint("study-pairs", "get", "/api/studies/s1/pairs/", COORDINATORS),
    Endpoint("dataset-list", "get", "/api/datasets/", COORDINATORS),
    Endpoint("dataset-detail", "get", "/api/datasets/mimic-cxr/", COORDINATORS),
    Endpoint("study-release-list", "get", "/api/studies/s1/releases/", DATA_MANAGERS),
    Endpoint(
        "study-release-list", "post", "/api/studies/s1/releases/", DATA_MANAGERS, 202, lambda: {"license_text": "CC0"}
    ),
    # No such release: whoever may ask learns only that (404); everyone else is refused first (403).
    Endpoint("release-detail", "get", f"/api/releases/{SOME_ID}/", DATA_MANAGERS, 404),
    Endpoint("release-download", "get", f"/api/releases/{SOME_ID}/download/", DATA_MANAGERS, 404),
    Endpoint("release-detail", "delete", f"/api/releases/{SOME_ID}/", DATA_MANAGERS, 404),
    Endpoint("release-retry", "post", f"/api/releases/{SOME_ID}/retry/", DATA_MANAGERS, 404),
    # The coordinator's consensus API on an unsampled study: nothing to show or change, so the
    # lookups of unknown ids answer 404, bad bodies 400 and an assignment without readers 409.
    Endpoint("api_study_progress", "get", "/api/studies/s1/progress/", COORDINATORS),
    Endpoint("api_study_workload", "get", "/api/studies/s1/workload/", COORDINATORS),
    Endpoint("api_study_unrouted", "get", "/api/studies/s1/unrouted/", COORDINATORS),
    Endpoint("api_example_detail", "get", f"/api/studies/s1/examples/{SOME_ID}/", COORDINATORS, 404),
    Endpoint("api_reader_detail", "get", "/api/studies/s1/readers/nobody/", COORDINATORS, 404),
    Endpoint("api_study_assign", "post", "/api/studies/s1/assign/", COORDINATORS, 409),
    Endpoint(
        "api_study_members",
        "post",
        "/api/studies/s1/members/",
        COORDINATORS,
        400,
        lambda: {"username": "nobody", "role": "reader"},
    ),
    Endpoint(
        "api_study_assignments",
        "post",
        "/api/studies/s1/assignments/",
        COORDINATORS,
        400,
        lambda: {"example": SOME_ID, "reader": "nobody"},
    ),
    Endpoint("api_assignment_withdraw", "post", f"/api/assignments/{SOME_ID}/withdraw/", COORDINATORS, 404),
    Endpoint(
        "api_assignment_reassign",
        "post",
        f"/api/assignments/{SOME_ID}/reassign/",
        COORDINATORS,
        404,
        lambda: {"reader": "nobody"},
    ),
    Endpoint(
        "api_annotation_void", "post", f"/api/annotations/{SOME_ID}/void/", COORDINATORS, 404, lambda: {"reason": "x"}
    ),
    # The study's results, computed in the background: the first request queues them (202).
    Endpoint("api_study_results", "get", "/api/studies/s1/results/", COORDINATORS | DATA_MANAGERS, 202),
    Endpoint("api_study_results", "post", "/api/studies/s1/results/", COORDINATORS | DATA_MANAGERS, 202),
    Endpoint(
        "api_study_metric_scores",
        "post",
        "/api/studies/s1/metric-scores/",
        COORDINATORS,
        201,
        _metric_scores_file,
        None,
    ),
    # The reader API. Nothing is assigned to these users: an empty queue is a 204, and an
    # assignment id is a 404 (never theirs), which a reader only gets past the permission check.
    Endpoint("reading-next", "get", "/api/reading/next/?task=realism", READERS_AND_JUDGES, 204),
    Endpoint("reading-progress", "get", "/api/reading/progress/", READERS_AND_JUDGES),
    Endpoint("reading-detail", "get", f"/api/reading/{SOME_ID}/", READERS_AND_JUDGES, 404),
    Endpoint("reading-rating", "post", f"/api/reading/{SOME_ID}/rating/", READERS_AND_JUDGES, 404, _rating),
    # Nothing rated: nothing to take back (409, with the reason); a judge's ratings are never taken back.
    Endpoint("reading-undo", "post", "/api/reading/undo/", READERS_AND_JUDGES, 409),
    # The adjudicator's API (nothing to adjudicate here: 204, and another's id is 404).
    Endpoint("adjudication-next", "get", "/api/adjudications/next/", ADJUDICATORS, 204),
    Endpoint("adjudication-detail", "get", f"/api/adjudications/{SOME_ID}/", ADJUDICATORS, 404),
    Endpoint("adjudication-decision", "post", f"/api/adjudications/{SOME_ID}/decision/", ADJUDICATORS, 404, _rating),
    # The reader guide and the practice round (a study these readers have no part in: 404).
    Endpoint("reading-guide", "get", "/api/reading/guide/?study=s1", READERS_AND_JUDGES, 404),
    Endpoint(
        "reading-guide", "post", "/api/reading/guide/", READERS_AND_JUDGES, 404, lambda: {"study": "s1", "version": 1}
    ),
    Endpoint("reading-practice", "get", "/api/reading/practice/?study=s1&task=realism", READERS_AND_JUDGES, 404),
    Endpoint(
        "reading-practice-rating", "post", f"/api/reading/practice/{SOME_ID}/rating/", READERS_AND_JUDGES, 404, _rating
    ),
    Endpoint("study-guide", "get", "/api/studies/s1/guide/", COORDINATORS),
    Endpoint("study-guide", "post", "/api/studies/s1/guide/", COORDINATORS, 201, lambda: {"text": "# Guide"}),
    Endpoint("study-practice", "get", "/api/studies/s1/practice/", COORDINATORS),
    Endpoint("study-practice", "post", "/api/studies/s1/practice/", COORDINATORS, 201, _practice_file, None),
    Endpoint(
        "study-practice-settings",
        "post",
        "/api/studies/s1/practice-settings/",
        COORDINATORS,
        200,
        lambda: {"practice_items_required": 1},
    ),
    # Enrolling automated judges: an unsampled study has nothing to read (409); a judge sees none of it.
    Endpoint("api_study_judges", "get", "/api/studies/s1/judges/", COORDINATORS),
    Endpoint("api_study_judges", "post", "/api/studies/s1/judges/", COORDINATORS, 400, lambda: {"username": "nobody"}),
    Endpoint("schema", "get", "/api/schema/", LOGGED_IN),
    Endpoint("api_docs", "get", "/api/docs/", LOGGED_IN),
    Endpoint("api_docs", "get", "/api/docs/?script=", LOGGED_IN),
    # The router's index view names no permission, so the default (deny) applies to it.
    Endpoint("api-root", "get", "/api/", NOBODY),
]


def _call(client: Client, endpoint: Endpoint):
    request = getattr(client, endpoint.method)
    if endpoint.content_type is None:
        return request(endpoint.path, endpoint.data())
    return request(endpoint.path, endpoint.data(), content_type=endpoint.content_type)


def _state() -> tuple:
    return (
        Study.objects.count(),
        CandidatePair.objects.count(),
        CandidatePair.objects.filter(sampled=True).count(),
        GuideVersion.objects.count(),
        GuideAcknowledgement.objects.count(),
        PracticeItem.objects.count(),
        MetricScore.objects.count(),
        list(Study.objects.values_list("practice_items_required", flat=True)),
    )


@pytest.fixture(scope="module")
def _api_study_once(django_db_setup, django_db_blocker) -> Iterator[int]:
    """Study s1 with two pairs, one sampled (for scores), made once for the module (about 500 tests)
    and rolled back after it; each test runs in a savepoint of its own."""
    with rolled_back(django_db_blocker):
        study = make_study("s1")
        make_pair(study)
        CandidatePair.objects.filter(pk=make_pair(study, variation="terminology").pk).update(sampled=True)
        yield study.pk


@pytest.fixture
def api_study(_api_study_once, db) -> Study:
    return Study.objects.get(pk=_api_study_once)


@pytest.mark.parametrize("kind", USER_KINDS)
@pytest.mark.parametrize("endpoint", ENDPOINTS, ids=lambda e: f"{e.method.upper()} {e.path}")
def test_the_permission_matrix_holds(client, api_study, endpoint, kind):
    user = USER_KINDS[kind]()
    if user is not None:
        client.force_login(user)
    before = _state()

    response = _call(client, endpoint)

    if kind in endpoint.allowed:
        assert response.status_code == endpoint.status, response.content
    elif kind in LOGGED_IN:
        assert response.status_code == 403, response.content
        assert _state() == before
    elif endpoint.url_name == "api_docs":
        # Not logged in, the documentation (a page for people): the log-in page, which comes back to it.
        assert response.status_code == 302, response.content
        assert response["Location"] == "/accounts/login/?next=" + quote(endpoint.path, safe="/")
        assert _state() == before
    else:
        # Not logged in: 401 with the token challenge, so a client knows to authenticate.
        assert response.status_code == 401, response.content
        assert response["WWW-Authenticate"] == "Token"
        assert "html" not in response["Content-Type"]
        assert _state() == before


def _api_route_names(resolver: URLResolver, prefix: str = "") -> set[str]:
    names = set()
    for pattern in resolver.url_patterns:
        route = prefix + str(pattern.pattern)
        if isinstance(pattern, URLResolver):
            names |= _api_route_names(pattern, route)
        elif route.lstrip("^").startswith("api/"):
            names.add(pattern.name)
    return names


def test_the_matrix_covers_every_api_route():
    routes = _api_route_names(get_resolver())

    assert {pattern.name for pattern in router.urls} <= routes
    listed = {endpoint.url_name for endpoint in ENDPOINTS}
    assert not routes - listed, f"API routes missing from ENDPOINTS: {sorted(routes - listed)}"
    assert not listed - routes, f"ENDPOINTS names routes that do not exist: {sorted(listed - routes)}"
    for endpoint in ENDPOINTS:
        assert resolve(endpoint.path.split("?")[0]).url_name == endpoint.url_name


def _token_client(user) -> Client:
    token = make_token(user)
    return Client(HTTP_AUTHORIZATION=f"Token {token}")


def test_it_accepts_a_coordinators_token(api_study):
    client = _token_client(make_user(Role.COORDINATOR))

    assert client.get("/api/studies/").status_code == 200
    response = client.post("/api/studies/", {"slug": "by-token", "name": "By token"}, content_type="application/json")
    assert response.status_code == 201
    assert Study.objects.filter(slug="by-token").exists()


def test_it_refuses_a_readers_token(api_study):
    client = _token_client(make_user(Role.READER))
    before = _state()

    assert client.get("/api/studies/").status_code == 403
    response = client.post("/api/studies/s1/sample/", {"per_variation": 1}, content_type="application/json")
    assert response.status_code == 403
    assert _state() == before


def test_it_refuses_an_inactive_coordinators_token_with_a_401(api_study):
    client = _token_client(make_user(Role.COORDINATOR, is_active=False))

    response = client.get("/api/studies/")

    assert response.status_code == 401
    assert response["WWW-Authenticate"] == "Token"


@pytest.mark.parametrize("header", ["Token " + "0" * 40, "Token", "Token a b", "Bearer xyz"])
def test_it_refuses_a_bad_token_with_a_401_and_writes_nothing(api_study, header):
    client = Client(HTTP_AUTHORIZATION=header)

    assert client.get("/api/studies/").status_code == 401
    response = client.post("/api/studies/", {"slug": "bad-token", "name": "X"}, content_type="application/json")
    assert response.status_code == 401
    assert response["WWW-Authenticate"] == "Token"
    assert "detail" in response.json()
    assert not Study.objects.filter(slug="bad-token").exists()


def test_a_session_still_works_with_a_csrf_token(api_study):
    client = Client(enforce_csrf_checks=True)
    client.force_login(make_user(Role.COORDINATOR))
    client.get("/accounts/login/")  # sets the CSRF cookie

    response = client.post(
        "/api/studies/",
        {"slug": "with-csrf", "name": "With CSRF"},
        content_type="application/json",
        HTTP_X_CSRFTOKEN=client.cookies["csrftoken"].value,
    )

    assert response.status_code == 201, response.content


def test_it_requires_a_csrf_token_for_session_posts(api_study):
    client = Client(enforce_csrf_checks=True)
    client.force_login(make_user(Role.COORDINATOR))

    response = client.post("/api/studies/", {"slug": "no-csrf", "name": "No CSRF"}, content_type="application/json")

    assert response.status_code == 403
    assert "CSRF" in response.json()["detail"]
    assert not Study.objects.filter(slug="no-csrf").exists()


def test_the_default_permission_is_deny_all():
    default = api_settings.DEFAULT_PERMISSION_CLASSES

    assert default == [DenyAll]


def test_deny_all_refuses_a_superuser(db):
    request = APIRequestFactory().get("/")
    request.user = make_user(is_superuser=True, is_staff=True)

    assert DenyAll().has_permission(request, APIView()) is False


def test_a_view_without_permission_classes_is_refused_even_to_a_superuser(db):
    class Unconfigured(APIView):
        def get(self, request):
            return Response({"secret": True})

    request = APIRequestFactory().get("/unconfigured/")
    force_authenticate(request, user=make_user(is_superuser=True, is_staff=True))

    response = Unconfigured.as_view()(request)

    assert response.status_code == 403
    assert "secret" not in response.data


@pytest.mark.parametrize(
    "request_kwargs",
    [{"data": {"format": "json"}}, {"HTTP_ACCEPT": "application/vnd.oai.openapi+json"}],
    ids=["format-parameter", "accept-header"],
)
def test_the_schema_lists_the_import_and_sample_endpoints(client, coordinator, request_kwargs):
    client.force_login(coordinator)

    response = client.get("/api/schema/", **request_kwargs)

    assert response.status_code == 200
    assert response["Content-Type"].startswith("application/vnd.oai.openapi+json")
    paths = response.json()["paths"]
    assert "post" in paths["/api/studies/{slug}/imports/"]
    assert "multipart/form-data" in paths["/api/studies/{slug}/imports/"]["post"]["requestBody"]["content"]
    assert "post" in paths["/api/studies/{slug}/sample/"]


def test_the_docs_load_every_asset_from_static(client, coordinator):
    client.force_login(coordinator)

    response = client.get("/api/docs/")

    assert response.status_code == 200
    html = response.content.decode()
    assert "cdn" not in html.lower()
    assert "//" not in re.sub(r"<!DOCTYPE[^>]*>", "", html)  # no absolute or protocol-relative URL
    assets = re.findall(r'(?:src|href)="([^"]+)"', html)
    assert assets
    for url in assets:
        assert url.startswith(("/static/", "/api/docs/")), url
        assert client.get(url).status_code == 200, url


def test_the_docs_have_no_inline_script(client, coordinator):
    # The CSP allows scripts from 'self' only: the Swagger UI set-up must come from a URL.
    client.force_login(coordinator)

    response = client.get("/api/docs/")

    scripts = re.findall(r"<script([^>]*)>", response.content.decode())
    assert scripts
    assert all("src=" in attributes for attributes in scripts)
    assert "script-src 'self'" in response["Content-Security-Policy"]


def test_the_docs_script_points_at_the_local_schema(client, coordinator):
    client.force_login(coordinator)

    response = client.get("/api/docs/", {"script": ""})

    assert response.status_code == 200
    script = response.content.decode()
    assert "/api/schema/" in script
    assert "://" not in script


def test_the_schema_describes_what_the_summary_returns(client, coordinator, api_study):
    client.force_login(coordinator)
    schema = client.get("/api/schema/", {"format": "json"}).json()

    documented = schema["paths"]["/api/studies/{slug}/summary/"]["get"]["responses"]["200"]["content"]
    rows = client.get("/api/studies/s1/summary/").json()

    assert documented["application/json"]["schema"]["type"] == "array"
    row_schema = documented["application/json"]["schema"]["items"]["$ref"].rsplit("/", 1)[1]
    assert set(schema["components"]["schemas"][row_schema]["properties"]) == set(rows[0])


@pytest.mark.parametrize(
    ("roles", "linked"),
    [
        ((Role.COORDINATOR,), True),
        ((Role.DATA_MANAGER,), True),
        ((Role.READER,), True),
        ((Role.ADJUDICATOR,), True),  # /api/adjudications/
        ((Role.JUDGE,), False),  # a program: it reads the API, it has no menu
        ((), False),
    ],
)
def test_the_menu_links_the_api_docs_for_the_roles_that_use_the_api(db, client, roles, linked):
    client.force_login(make_user(*roles))

    html = client.get("/settings/").content.decode()

    assert ('<a href="/api/docs/">API</a>' in html) is linked
