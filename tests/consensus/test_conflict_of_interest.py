"""A coordinator who also reads in a study: every coordinator page and endpoint that can show a pair's
details hides them from them until they have rated it; enrolling such a person warns."""

import io
from collections.abc import Callable, Iterator
from dataclasses import dataclass

import pytest
from django.core.management import call_command
from django.test import override_settings
from django.urls import reverse

from annotation.models import (
    Assignment,
    AssignmentStatus,
    AuditEvent,
    CandidatePair,
    Example,
    MemberRole,
    RatingChoice,
    ReportType,
    Role,
    StudyMember,
    Task,
)
from annotation.roles import grant_role
from consensus.assignment import assign_example
from consensus.conflicts import PAIR_HIDDEN, ROW_HIDDEN
from consensus.models import Adjudication, AdjudicationStatus
from tests.factories import make_reading_study, make_user, rate
from tests.module_data import rolled_back

pytestmark = pytest.mark.django_db

JSON = "application/json"
HTMX = {"HTTP_HX_REQUEST": "true"}
SECRET = "Secret rationale of the other reader."


def _examples(pair) -> tuple[Example, Example, Example]:
    return (
        pair.examples.get(task=Task.REALISM, report_type=ReportType.ORIGINAL),
        pair.examples.get(task=Task.REALISM, report_type=ReportType.ALTERNATIVE),
        pair.examples.get(task=Task.EQUIVALENCE),
    )


@pytest.fixture(scope="module")
def world(django_db_setup, django_db_blocker) -> Iterator[dict]:
    """Built once for the module and rolled back after it; each test runs in a savepoint of its own.

    Two pairs. `both` (coordinator and reader) has the original report of pair one open; another
    reader rated it; the rest of pair one and all of pair two have ratings, an adjudication and
    unrouted examples to show."""
    with rolled_back(django_db_blocker):
        yield _build_world()


def _build_world() -> dict:
    study, readers, adjudicators = make_reading_study(pairs=2, readers=7, assign=False)
    coordinator = make_user(Role.COORDINATOR, username="coord")
    both = make_user(Role.COORDINATOR, Role.READER, username="both")
    StudyMember.objects.create(study=study, user=both, role=MemberRole.READER)
    r0, r1, r2, r3, r4, r5, _r6 = readers
    one, two = CandidatePair.objects.filter(study=study, sampled=True).order_by("source_study_id")
    original, alternative, equivalence = _examples(one)
    # An exam's items go to distinct readers (the study keeps them apart); r5 has none of pair one,
    # and r6, who has nothing, is there for a third read.
    plan = {
        original: (both, r0),
        alternative: (r1, r2),
        equivalence: (r4, r3),
        **dict(zip(_examples(two), [(r0, r1), (r2, r3), (r4, r5)], strict=True)),
    }
    for example, pair_readers in plan.items():
        for reader in pair_readers:
            assign_example(example.public_id, reader, actor=coordinator)
    other_read = rate(original.assignments.get(reader=r0), RatingChoice.MINOR_ISSUES, SECRET).annotation
    for example in (alternative, *_examples(two)[:2]):
        for assignment in example.assignments.all():
            rate(assignment, RatingChoice.REALISTIC, "")
    Adjudication.objects.create(
        example=alternative,
        adjudicator=adjudicators[0],
        task=Task.REALISM,
        status=AdjudicationStatus.DONE,
        rating=RatingChoice.MAJOR_ISSUES,
        rationale="The adjudicator's secret.",
    )
    Example.objects.filter(pk__in=[equivalence.pk, _examples(two)[2].pk]).update(unrouted=True)
    return {
        "study": study,
        "coordinator": coordinator,
        "both": both,
        "one": one,
        "two": two,
        "original": original,
        "alternative": alternative,
        "equivalence": equivalence,
        "other_reader": r0,
        "other_read": other_read,
        "open_read": equivalence.assignments.get(reader=r3),
        "free_reader": r5,
        "adjudicator": adjudicators[0],
    }


def _as(client, world: dict, viewer: str) -> None:
    """Log in as the viewer: `hidden` (both, their read open), `rated` (both, after rating it) or `plain`."""
    if viewer == "rated":
        rate(world["original"].assignments.get(reader=world["both"]), RatingChoice.REALISTIC, "")
    client.force_login(world["coordinator"] if viewer == "plain" else world["both"])


def _html(response) -> str:
    return response.content.decode()


# --- One example: refused while hidden ---------------------------------------------------------


@dataclass(frozen=True)
class Detail:
    path: Callable[[dict], str]
    # Something of pair one only the unblinded may read.
    secret: Callable[[dict], str]


def _example_page(name: str) -> Callable[[dict], str]:
    return lambda w: reverse("example_detail", args=[w["study"].slug, w[name].public_id])


def _example_api(name: str) -> Callable[[dict], str]:
    return lambda w: f"/api/studies/{w['study'].slug}/examples/{w[name].public_id}/"


DETAILS = {
    "page of the example they read": Detail(_example_page("original"), lambda w: SECRET),
    "page of the other version": Detail(_example_page("alternative"), lambda w: "The adjudicator&#x27;s secret."),
    "page of the Task 2 example": Detail(_example_page("equivalence"), lambda w: w["one"].alternative_findings),
    "API of the example they read": Detail(_example_api("original"), lambda w: SECRET),
    "API of the other version": Detail(_example_api("alternative"), lambda w: "The adjudicator's secret."),
    "API of the Task 2 example": Detail(_example_api("equivalence"), lambda w: w["one"].alternative_findings),
}


@pytest.mark.parametrize("name", DETAILS)
def test_an_example_of_a_pair_they_still_read_is_refused_with_the_reason(client, world, name):
    detail = DETAILS[name]
    _as(client, world, "hidden")

    response = client.get(detail.path(world))

    assert response.status_code == 403
    body = _html(response)
    if response["Content-Type"] == JSON:
        assert response.json() == {"detail": PAIR_HIDDEN}
    else:
        assert PAIR_HIDDEN in body
    for secret in (detail.secret(world), world["other_reader"].username, world["one"].source_study_id, "Original"):
        assert secret not in body


@pytest.mark.parametrize("viewer", ["rated", "plain"])
@pytest.mark.parametrize("name", DETAILS)
def test_an_example_is_shown_after_rating_and_to_a_plain_coordinator(client, world, name, viewer):
    detail = DETAILS[name]
    _as(client, world, viewer)

    response = client.get(detail.path(world))

    assert response.status_code == 200
    assert detail.secret(world) in _html(response)


# --- Lists: rows of the pair masked while hidden ----------------------------------------------


@dataclass(frozen=True)
class Listing:
    path: Callable[[dict], str]
    # A row of pair one (masked while hidden) and a row of pair two (always shown).
    row_of_one: Callable[[dict], str]
    row_of_two: Callable[[dict], str]


def _reader_page(name: str) -> Callable[[dict], str]:
    return lambda w: reverse("reader_detail", args=[w["study"].slug, w[name].username])


def _reader_api(name: str) -> Callable[[dict], str]:
    return lambda w: f"/api/studies/{w['study'].slug}/readers/{w[name].username}/"


def _id(example: str, pair: str = "one") -> Callable[[dict], str]:
    def public_id(w: dict) -> str:
        index = {"original": 0, "alternative": 1, "equivalence": 2}[example]
        return str(_examples(w[pair])[index].public_id)

    return public_id


LISTINGS = {
    "the other reader's page": Listing(_reader_page("other_reader"), _id("original"), _id("original", "two")),
    "their own reader page": Listing(_reader_page("both"), _id("original"), lambda w: "both"),
    "the adjudicator's page": Listing(_reader_page("adjudicator"), _id("alternative"), lambda w: "Cardiothoracic"),
    "the unrouted page": Listing(
        lambda w: reverse("study_unrouted", args=[w["study"].slug]), _id("equivalence"), _id("equivalence", "two")
    ),
    "the other reader's API": Listing(_reader_api("other_reader"), _id("original"), _id("original", "two")),
    "their own reader API": Listing(_reader_api("both"), _id("original"), lambda w: '"username":"both"'),
    "the adjudicator's API": Listing(_reader_api("adjudicator"), _id("alternative"), lambda w: "Cardiothoracic"),
    "the unrouted API": Listing(
        lambda w: f"/api/studies/{w['study'].slug}/unrouted/", _id("equivalence"), _id("equivalence", "two")
    ),
    "the pairs API": Listing(
        lambda w: f"/api/studies/{w['study'].slug}/pairs/",
        lambda w: str(w["one"].public_id),
        lambda w: str(w["two"].public_id),
    ),
}


@pytest.mark.parametrize("name", LISTINGS)
def test_a_list_masks_the_rows_of_a_pair_they_still_read(client, world, name):
    listing = LISTINGS[name]
    _as(client, world, "hidden")

    response = client.get(listing.path(world))

    assert response.status_code == 200
    body = _html(response)
    assert ROW_HIDDEN in body
    for secret in (listing.row_of_one(world), SECRET, "secret", world["one"].source_study_id):
        assert secret not in body
    assert listing.row_of_two(world) in body


@pytest.mark.parametrize("viewer", ["rated", "plain"])
@pytest.mark.parametrize("name", LISTINGS)
def test_a_list_shows_every_row_after_rating_and_to_a_plain_coordinator(client, world, name, viewer):
    listing = LISTINGS[name]
    _as(client, world, viewer)

    response = client.get(listing.path(world))

    body = _html(response)
    assert ROW_HIDDEN not in body
    assert listing.row_of_one(world) in body
    assert listing.row_of_two(world) in body


def test_the_masked_api_row_carries_nothing_but_the_reason(client, world):
    _as(client, world, "hidden")

    rows = client.get(f"/api/studies/{world['study'].slug}/unrouted/").json()

    assert {"hidden": True, "detail": ROW_HIDDEN} in rows
    assert [row["hidden"] for row in rows].count(False) == 1


@pytest.mark.parametrize(
    "path",
    [
        lambda w: reverse("study_progress", args=[w["study"].slug]),
        lambda w: reverse("study_readers", args=[w["study"].slug]),
        lambda w: reverse("study_detail", args=[w["study"].slug]),
        lambda w: f"/api/studies/{w['study'].slug}/progress/",
        lambda w: f"/api/studies/{w['study'].slug}/workload/",
        lambda w: f"/api/studies/{w['study'].slug}/summary/",
    ],
)
def test_the_pages_of_counts_name_no_pair(client, world, path):
    _as(client, world, "plain")

    body = _html(client.get(path(world)))

    for example in Example.objects.filter(study=world["study"]):
        assert str(example.public_id) not in body
    assert world["one"].source_study_id not in body


# --- Changes to a hidden pair are refused ------------------------------------------------------


@dataclass(frozen=True)
class Change:
    path: Callable[[dict], str]
    data: Callable[[dict], dict]
    api: bool = False
    # The Task 2 example has both its readers: the protocol refuses a third one (but not the blinding).
    allowed: tuple[int, ...] = (200, 201)


CHANGES = {
    "assign by hand": Change(
        lambda w: reverse("example_assign", args=[w["study"].slug, w["equivalence"].public_id]),
        lambda w: {"reader": w["free_reader"].username},
        allowed=(422,),
    ),
    "withdraw": Change(
        lambda w: reverse("assignment_withdraw", args=[w["study"].slug, w["open_read"].public_id]), lambda w: {}
    ),
    "reassign": Change(
        lambda w: reverse("assignment_reassign", args=[w["study"].slug, w["open_read"].public_id]),
        lambda w: {"reader": w["free_reader"].username},
    ),
    "void": Change(
        lambda w: reverse("annotation_void", args=[w["study"].slug, w["other_read"].public_id]),
        lambda w: {"reason": "Wrong report."},
    ),
    "API assign by hand": Change(
        lambda w: f"/api/studies/{w['study'].slug}/assignments/",
        lambda w: {"example": str(w["equivalence"].public_id), "reader": w["free_reader"].username},
        api=True,
        allowed=(409,),
    ),
    "API withdraw": Change(lambda w: f"/api/assignments/{w['open_read'].public_id}/withdraw/", lambda w: {}, api=True),
    "API reassign": Change(
        lambda w: f"/api/assignments/{w['open_read'].public_id}/reassign/",
        lambda w: {"reader": w["free_reader"].username},
        api=True,
    ),
    "API void": Change(
        lambda w: f"/api/annotations/{w['other_read'].public_id}/void/", lambda w: {"reason": "Wrong."}, api=True
    ),
}


def _post(client, change: Change, world: dict, **headers):
    if change.api:
        return client.post(change.path(world), change.data(world), content_type=JSON)
    return client.post(change.path(world), change.data(world), **headers)


def _state() -> tuple:
    return (
        sorted(Assignment.objects.values_list("pk", "reader_id", "status")),
        AuditEvent.objects.count(),
        sorted(Example.objects.values_list("pk", "state", "unrouted")),
    )


@pytest.mark.parametrize("headers", [{}, HTMX])
@pytest.mark.parametrize("name", CHANGES)
def test_a_change_to_a_pair_they_still_read_is_refused_and_changes_nothing(client, world, name, headers):
    change = CHANGES[name]
    _as(client, world, "hidden")
    before = _state()

    response = _post(client, change, world, **headers)

    assert response.status_code == 403
    assert PAIR_HIDDEN in _html(response)
    assert SECRET not in _html(response)
    assert _state() == before


@pytest.mark.parametrize("viewer", ["rated", "plain"])
@pytest.mark.parametrize("name", CHANGES)
def test_a_change_is_allowed_after_rating_and_to_a_plain_coordinator(client, world, name, viewer):

    change = CHANGES[name]
    _as(client, world, viewer)

    response = _post(client, change, world)

    assert response.status_code in change.allowed, _html(response)
    assert PAIR_HIDDEN not in _html(response)


# --- Enrolment warns -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("roles", "named"),
    [((Role.COORDINATOR,), "Coordinator role"), ((Role.DATA_MANAGER,), "Data manager role"), ((), None)],
)
def test_the_readers_page_warns_when_enrolling_a_coordinator_or_data_manager(client, world, roles, named):
    newcomer = make_user(Role.READER, *roles)
    client.force_login(world["coordinator"])

    response = client.post(
        reverse("study_add_member", args=[world["study"].slug]),
        {"user": newcomer.username, "role": MemberRole.READER},
        **HTMX,
    )

    assert response.status_code == 200
    html = _html(response)
    assert "is now an active reader" in html
    if named:
        assert f"Conflict of interest: {newcomer.username} also holds the {named}" in html
        assert 'role="alert"' in html
    else:
        assert f"Conflict of interest: {newcomer.username}" not in html


def test_enrolling_themselves_as_adjudicator_warns_too(client, world):
    grant_role(world["both"], Role.ADJUDICATOR)
    client.force_login(world["both"])

    response = client.post(
        reverse("study_add_member", args=[world["study"].slug]),
        {"user": "both", "role": MemberRole.ADJUDICATOR},
    )

    assert "Conflict of interest: both also holds the Coordinator role" in _html(response)


@pytest.mark.parametrize(("roles", "warns"), [((Role.COORDINATOR,), True), ((), False)])
def test_the_members_api_answers_the_warning(client, world, roles, warns):
    newcomer = make_user(Role.READER, *roles)
    client.force_login(world["coordinator"])

    response = client.post(
        f"/api/studies/{world['study'].slug}/members/",
        {"username": newcomer.username, "role": "reader"},
        content_type=JSON,
    )

    assert response.status_code == 201
    assert response.json()["warning"].startswith("Conflict of interest") is warns


def test_the_readers_page_and_workload_api_show_the_warning_on_the_member(client, world):
    client.force_login(world["coordinator"])
    slug = world["study"].slug

    html = _html(client.get(reverse("study_readers", args=[slug])))
    workload = {row["username"]: row["warning"] for row in client.get(f"/api/studies/{slug}/workload/").json()}

    assert html.count("Conflict of interest") == 1
    assert "Conflict of interest: both also holds the Coordinator role" in html
    assert workload["both"].startswith("Conflict of interest: both")
    assert all(warning == "" for username, warning in workload.items() if username != "both")


def test_the_reader_page_and_api_show_the_warning(client, world):
    client.force_login(world["coordinator"])
    slug = world["study"].slug

    html = _html(client.get(reverse("reader_detail", args=[slug, "both"])))
    api = client.get(f"/api/studies/{slug}/readers/both/").json()
    plain = client.get(f"/api/studies/{slug}/readers/{world['other_reader'].username}/").json()

    assert "Conflict of interest: both also holds the Coordinator role" in html
    assert api["warning"].startswith("Conflict of interest: both")
    assert plain["warning"] == ""


def test_load_demo_warns_when_a_demo_reader_also_coordinates():
    reader1 = make_user(Role.COORDINATOR, username="reader1")
    err = io.StringIO()

    with override_settings(DEBUG=True):
        call_command("load_demo", "--with-ratings", stdout=io.StringIO(), stderr=err)

    assert f"Conflict of interest: {reader1.username} also holds the Coordinator role" in err.getvalue()
    assert err.getvalue().count("Conflict of interest") == 1
    assert Assignment.objects.filter(reader=reader1, status=AssignmentStatus.DONE).exists()
