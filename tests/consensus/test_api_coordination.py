"""The coordinator's API: progress, workload, unrouted, example and reader detail, and queue changes."""

import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from annotation.models import (
    Assignment,
    AssignmentStatus,
    AuditAction,
    AuditEvent,
    Example,
    ExampleState,
    MemberRole,
    RatingChoice,
    Role,
    StudyMember,
    Task,
)
from consensus.blinding import readers_needed
from consensus.services import void_annotation
from tests.factories import make_reading_study, make_token, make_user, rate_open_reads
from tests.module_data import rolled_back

pytestmark = pytest.mark.django_db

JSON = "application/json"


def _realism(study, index: int = 0) -> Example:
    return Example.objects.filter(study=study, task=Task.REALISM).order_by("pk")[index]


def _open(example) -> Assignment:
    return example.assignments.open().select_related("reader").order_by("slot").first()


def _post(client, path: str, data: dict | None = None):
    return client.post(path, data or {}, content_type=JSON)


@pytest.fixture
def api_client(client, coordinator):
    client.force_login(coordinator)
    return client


# --- Who may -----------------------------------------------------------------------------------


@dataclass(frozen=True)
class Call:
    method: str
    path: Callable[[dict], str]
    data: Callable[[dict], dict] = lambda w: {}
    status: int = 200


CALLS = {
    "progress": Call("get", lambda w: f"/api/studies/{w['slug']}/progress/"),
    "workload": Call("get", lambda w: f"/api/studies/{w['slug']}/workload/"),
    "unrouted": Call("get", lambda w: f"/api/studies/{w['slug']}/unrouted/"),
    "example": Call("get", lambda w: f"/api/studies/{w['slug']}/examples/{w['example']}/"),
    "reader": Call("get", lambda w: f"/api/studies/{w['slug']}/readers/{w['reader']}/"),
    "assign": Call("post", lambda w: f"/api/studies/{w['slug']}/assign/"),
    "members": Call(
        "post",
        lambda w: f"/api/studies/{w['slug']}/members/",
        lambda w: {"username": w["newcomer"], "role": "reader"},
        201,
    ),
    "manual": Call(
        "post",
        lambda w: f"/api/studies/{w['slug']}/assignments/",
        lambda w: {"example": w["unassigned_example"], "reader": w["task1_free_reader"]},
        201,
    ),
    "withdraw": Call("post", lambda w: f"/api/assignments/{w['assignment']}/withdraw/"),
    "reassign": Call(
        "post", lambda w: f"/api/assignments/{w['assignment']}/reassign/", lambda w: {"reader": w["free_reader"]}
    ),
    "void": Call("post", lambda w: f"/api/annotations/{w['annotation']}/void/", lambda w: {"reason": "Wrong report."}),
}


def _without_the_exam(study, readers: list) -> list:
    """The readers with no item of the study's one exam: the only ones who may be given one of it."""
    return [r for r in readers if not Assignment.objects.filter(example__study=study, reader=r).exists()]


@pytest.fixture(scope="module")
def _world_once(django_db_setup, django_db_blocker) -> Iterator[dict]:
    """Made once for the module and rolled back after it; each test runs in a savepoint of its own."""
    with rolled_back(django_db_blocker):
        yield _build_world()


@pytest.fixture
def world(_world_once, db) -> dict:
    return _world_once


def _build_world() -> dict:
    study, readers, _ = make_reading_study(pairs=1, readers_beyond_initial=1)
    rated = _realism(study, 0)
    (annotation,) = rate_open_reads(rated, RatingChoice.REALISTIC)
    equivalence = Example.objects.get(study=study, task=Task.EQUIVALENCE)
    assignment = _open(equivalence)
    unassigned = _realism(study, 1)
    Assignment.objects.filter(example=unassigned).delete()  # a slot to fill by hand
    # A reader gets at most one item of an exam: the free readers are those with none of it.
    free, task1_free, *_ = _without_the_exam(study, readers)
    newcomer = make_user(Role.READER)
    return {
        "slug": study.slug,
        "example": rated.public_id,
        "reader": annotation.reader.username,
        "annotation": annotation.public_id,
        "assignment": assignment.public_id,
        "free_reader": free.username,
        "task1_free_reader": task1_free.username,
        "unassigned_example": str(unassigned.public_id),
        "newcomer": newcomer.username,
    }


def _state() -> tuple:
    return (
        Assignment.objects.count(),
        Assignment.objects.filter(status=AssignmentStatus.VOIDED).count(),
        StudyMember.objects.count(),
        AuditEvent.objects.count(),
    )


@pytest.mark.parametrize("name", CALLS)
@pytest.mark.parametrize("role", [Role.READER, Role.ADJUDICATOR, Role.DATA_MANAGER, None])
def test_only_coordinators_may_call_it(client, world, name, role):
    call = CALLS[name]
    if role is not None:
        client.force_login(make_user(role))
    before = _state()

    response = getattr(client, call.method)(call.path(world), call.data(world), content_type=JSON)

    # Not logged in: 401 with the token challenge; logged in without the role: 403.
    assert response.status_code == (401 if role is None else 403), response.content
    assert _state() == before


@pytest.mark.parametrize("name", CALLS)
def test_a_coordinator_may_call_it(api_client, world, name):
    call = CALLS[name]

    response = getattr(api_client, call.method)(call.path(world), call.data(world), content_type=JSON)

    assert response.status_code == call.status, response.content


def test_a_coordinators_token_works(world):
    from django.test import Client

    token = make_token(make_user(Role.COORDINATOR))
    client = Client(HTTP_AUTHORIZATION=f"Token {token}")

    assert client.get(CALLS["progress"].path(world)).status_code == 200
    assert client.post(CALLS["void"].path(world), {"reason": "x"}, content_type=JSON).status_code == 200


# --- Reading ---------------------------------------------------------------------------------------


def test_progress_counts_examples_by_state_per_task_and_variation(api_client):
    study, _, _ = make_reading_study(pairs=2)
    rate_open_reads(_realism(study, 0), RatingChoice.REALISTIC, RatingChoice.REALISTIC)
    rate_open_reads(_realism(study, 1), RatingChoice.REALISTIC, RatingChoice.MINOR_ISSUES)

    data = api_client.get(f"/api/studies/{study.slug}/progress/").json()

    realism, equivalence = data["tasks"]
    assert (realism["task"], equivalence["task"]) == (Task.REALISM, Task.EQUIVALENCE)
    first = realism["variations"][0]
    assert first["variation"] == "structure--structured"
    assert {k: first[k] for k in ("waiting", "third_read", "adjudication", "consensus", "total", "unrouted")} == {
        "waiting": 0,
        "third_read": 1,
        "adjudication": 0,
        "consensus": 1,
        "total": 2,
        "unrouted": 0,
    }
    assert first["percent_done"] == 50
    assert realism["total"]["total"] == 4
    assert data["overall"]["total"] == 6
    assert data["unrouted"] == 0


def test_workload_lists_every_member(api_client):
    study, readers, adjudicators = make_reading_study(pairs=2, readers=6)
    StudyMember.objects.filter(study=study, user=readers[0]).update(max_assignments=5)

    data = api_client.get(f"/api/studies/{study.slug}/workload/").json()

    rows = {row["username"]: row for row in data}
    assert set(rows) == {u.username for u in readers + adjudicators}
    first = rows[readers[0].username]
    assert first["roles"] == [MemberRole.READER]
    assert first["max_assignments"] == 5
    assert first["subspecialty"] == "General"
    # Two exams over six readers, one item of each per reader (Task 1 or Task 2): two reads each,
    # as many as the rows of the database say.
    assert [(t["task"], t["done"]) for t in first["tasks"]] == [(Task.REALISM, 0), (Task.EQUIVALENCE, 0)]
    assert sum(t["assigned"] for t in first["tasks"]) == 2
    for row in data:
        for t in row["tasks"]:
            mine = Assignment.objects.filter(example__study=study, reader__username=row["username"], task=t["task"])
            assert t["assigned"] == mine.count(), (row["username"], t)
    assert rows[adjudicators[0].username]["subspecialty"] == "Cardiothoracic"


@pytest.mark.parametrize("endpoint", ["progress", "workload", "unrouted", "example", "reader"])
def test_its_query_count_does_not_grow_with_the_study(api_client, endpoint):
    counts = []
    # Three readers beyond the initial need or more: the three third reads of an exam find one.
    for pairs, beyond in ((2, 3), (12, 5)):
        study, reader_users, _ = make_reading_study(pairs=pairs, readers_beyond_initial=beyond, adjudicators=2)
        for example in Example.objects.filter(study=study, task=Task.REALISM).order_by("pk")[:3]:
            rate_open_reads(example, RatingChoice.REALISTIC, RatingChoice.MINOR_ISSUES, RatingChoice.MAJOR_ISSUES)
        # The reader with the most work: with more readers than reads, readers[0] might have none.
        busiest = max(reader_users, key=lambda r: (Assignment.objects.filter(reader=r).count(), -r.pk))
        path = CALLS[endpoint].path(
            {"slug": study.slug, "example": _realism(study).public_id, "reader": busiest.username}
        )
        api_client.get(path)  # warm the session and permission caches
        with CaptureQueriesContext(connection) as queries:
            response = api_client.get(path)
        assert response.status_code == 200
        counts.append(len(queries))
    assert counts[0] == counts[1], counts
    assert counts[1] <= 12, counts


def test_unrouted_says_whom_each_example_waits_for(api_client):
    study, _, _ = make_reading_study(pairs=1, readers=2, keep_versions_apart=False)
    example = _realism(study)
    rate_open_reads(example, RatingChoice.REALISTIC, RatingChoice.MINOR_ISSUES)

    (row,) = api_client.get(f"/api/studies/{study.slug}/unrouted/").json()

    assert row["id"] == str(example.public_id)
    assert (row["waiting_for"], row["ratings"], row["state"]) == ("third_reader", 2, ExampleState.THIRD_READ)
    assert (row["dataset"], row["study_id"], row["reref_variation"]) == (
        "mimic-cxr",
        example.pair.source_study_id,
        example.pair.variation.key,
    )


def test_example_detail_has_texts_ratings_and_history(api_client, coordinator):
    study, _, _ = make_reading_study(pairs=1)
    example = _realism(study)
    first, _ = rate_open_reads(example, RatingChoice.REALISTIC, RatingChoice.REALISTIC)
    void_annotation(first.public_id, actor=coordinator, reason="Wrong report.")

    data = api_client.get(f"/api/studies/{study.slug}/examples/{example.public_id}/").json()

    assert data["example"]["id"] == str(example.public_id)
    assert data["example"]["report_type"] == "original"
    assert data["context"]["indication"] == example.pair.indication
    assert data["reports"] == [
        {
            "report_type": "original",
            "findings": example.pair.original_findings,
            "impression": example.pair.original_impression,
        }
    ]
    voided = next(a for a in data["annotations"] if a["id"] == str(first.public_id))
    assert (voided["voided"], voided["voided_by"], voided["void_reason"]) == (True, "coord", "Wrong report.")
    assert voided["reader"] == first.reader.username
    assert data["consensus"] is None
    actions = [event["action"] for event in data["history"]]
    assert actions[:4] == [AuditAction.ASSIGNED, AuditAction.ASSIGNED, AuditAction.SUBMITTED, AuditAction.SUBMITTED]
    assert AuditAction.VOIDED in actions and AuditAction.CONSENSUS_WITHDRAWN in actions
    event = next(e for e in data["history"] if e["action"] == AuditAction.VOIDED)
    assert (event["actor"], event["subject"], event["after"]) == (
        "coord",
        first.reader.username,
        {"reason": "Wrong report."},
    )
    assert event["example"] == str(example.public_id)


def test_reader_detail_has_assignments_and_history(api_client):
    study, _, _ = make_reading_study(pairs=1)
    example = _realism(study)
    (annotation,) = rate_open_reads(example, RatingChoice.MINOR_ISSUES)
    reader = annotation.reader

    data = api_client.get(f"/api/studies/{study.slug}/readers/{reader.username}/").json()

    assert data["username"] == reader.username
    assert data["memberships"] == [{"role": "reader", "active": True, "max_assignments": None}]
    rated = next(a for a in data["assignments"] if a["example"]["id"] == str(example.public_id))
    assert (rated["rating"], rated["status"]) == (RatingChoice.MINOR_ISSUES, AssignmentStatus.DONE)
    assert {e["subject"] for e in data["history"]} == {reader.username}
    assert AuditAction.SUBMITTED in [e["action"] for e in data["history"]]


def test_lookups_are_confined_to_the_study_in_the_url(api_client):
    study, readers, _ = make_reading_study(pairs=1)
    other, other_readers, _ = make_reading_study(pairs=1)
    foreign = _realism(other)

    assert api_client.get(f"/api/studies/{study.slug}/examples/{foreign.public_id}/").status_code == 404
    assert api_client.get(f"/api/studies/{study.slug}/examples/{uuid.uuid4()}/").status_code == 404
    assert api_client.get(f"/api/studies/{study.slug}/readers/{other_readers[0].username}/").status_code == 404
    assert api_client.get(f"/api/studies/{study.slug}/readers/nobody/").status_code == 404
    assert api_client.get("/api/studies/nope/progress/").status_code == 404
    response = _post(
        api_client,
        f"/api/studies/{study.slug}/assignments/",
        {"example": str(foreign.public_id), "reader": readers[0].username},
    )
    assert response.status_code == 400
    assert f"in study {study.slug}" in response.json()["example"][0]
    assert not foreign.assignments.filter(reader=readers[0]).exists()


# --- Changing the queues ---------------------------------------------------------------------------


def test_assign_reports_what_it_did(api_client):
    study, _, _ = make_reading_study(pairs=2, assign=False)

    response = _post(api_client, f"/api/studies/{study.slug}/assign/", {"tasks": [Task.EQUIVALENCE]})

    assert response.status_code == 200
    assert response.json() == {
        "assigned": 4,
        "unfilled": 0,
        "summary": "Assigned 4 reads.",
        "notes": [],
        # Task 2 only: one item per exam, two readers (three for a third read); the factory enrolled 9.
        "readers": "This study needs at least 2 active readers, 3 to give every third read; it has 9. "
        + readers_needed(study, [Task.EQUIVALENCE]).explanation,
    }
    assert set(Assignment.objects.filter(study=study).values_list("example__task", flat=True)) == {Task.EQUIVALENCE}


def test_assign_refusals_are_409(api_client):
    study, _, _ = make_reading_study(pairs=1, readers=1, assign=False)

    response = _post(api_client, f"/api/studies/{study.slug}/assign/")

    assert response.status_code == 409
    assert "every example needs 2 distinct readers" in response.json()["detail"]
    assert not Assignment.objects.filter(study=study).exists()


def test_assign_validates_the_tasks(api_client):
    study, _, _ = make_reading_study(pairs=1, assign=False)

    response = _post(api_client, f"/api/studies/{study.slug}/assign/", {"tasks": ["realism", "ranking"]})

    assert response.status_code == 400
    assert "tasks" in response.json()
    assert not Assignment.objects.filter(study=study).exists()


def test_members_enrols_then_updates(api_client, coordinator):
    study, _, _ = make_reading_study(pairs=1)
    newcomer = make_user(Role.READER)
    path = f"/api/studies/{study.slug}/members/"

    created = _post(api_client, path, {"username": newcomer.username, "role": "reader", "max_assignments": 3})
    updated = _post(api_client, path, {"username": newcomer.username, "role": "reader"})

    assert created.status_code == 201
    assert created.json() == {
        "username": newcomer.username,
        "role": "reader",
        "active": True,
        "max_assignments": 3,
        "warning": "",
    }
    assert updated.status_code == 200
    assert updated.json()["max_assignments"] is None
    actions = list(AuditEvent.objects.filter(subject=newcomer).values_list("action", flat=True))
    assert actions == [AuditAction.MEMBER_ADDED, AuditAction.MEMBER_CHANGED]


def test_members_refusals_and_bad_input(api_client):
    study, _, _ = make_reading_study(pairs=1)
    adjudicator_only = make_user(Role.ADJUDICATOR)
    path = f"/api/studies/{study.slug}/members/"

    refused = _post(api_client, path, {"username": adjudicator_only.username, "role": "reader"})
    unknown = _post(api_client, path, {"username": "nobody", "role": "reader"})
    bad_role = _post(api_client, path, {"username": adjudicator_only.username, "role": "coordinator"})

    assert refused.status_code == 409
    assert "does not have the Reader role" in refused.json()["detail"]
    assert unknown.status_code == 400
    assert unknown.json()["username"] == ["No active user named 'nobody'."]
    assert bad_role.status_code == 400
    assert not StudyMember.objects.filter(user=adjudicator_only).exists()


def test_assignments_assigns_by_hand(api_client, coordinator):
    study, readers, _ = make_reading_study(pairs=1, assign=False)
    example = _realism(study)

    response = _post(
        api_client,
        f"/api/studies/{study.slug}/assignments/",
        {"example": str(example.public_id), "reader": readers[0].username},
    )

    assert response.status_code == 201
    assignment = example.assignments.get()
    body = response.json()
    assert (body["id"], body["reader"], body["slot"], body["status"]) == (
        str(assignment.public_id),
        readers[0].username,
        1,
        "open",
    )
    again = _post(
        api_client,
        f"/api/studies/{study.slug}/assignments/",
        {"example": str(example.public_id), "reader": readers[0].username},
    )
    assert again.status_code == 409
    assert "already has (or had) this example" in again.json()["detail"]
    bad = _post(api_client, f"/api/studies/{study.slug}/assignments/", {"example": "not-a-uuid"})
    assert bad.status_code == 400
    assert set(bad.json()) == {"example", "reader"}


def test_withdraw_takes_an_open_assignment_out_of_the_queue(api_client):
    study, _, _ = make_reading_study(pairs=1)
    example = _realism(study)
    assignment = _open(example)

    response = _post(api_client, f"/api/assignments/{assignment.public_id}/withdraw/")

    assert response.status_code == 200
    assert response.json()["example"]["id"] == str(example.public_id)
    assert response.json()["example"]["state"] == ExampleState.WAITING
    assert not Assignment.objects.filter(pk=assignment.pk).exists()
    assert AuditEvent.objects.filter(example=example, action=AuditAction.WITHDRAWN, subject=assignment.reader).exists()


def test_withdraw_refuses_a_rated_assignment(api_client):
    study, _, _ = make_reading_study(pairs=1)
    (annotation,) = rate_open_reads(_realism(study), RatingChoice.REALISTIC)

    response = _post(api_client, f"/api/assignments/{annotation.assignment.public_id}/withdraw/")

    assert response.status_code == 409
    assert "has a rating" in response.json()["detail"]
    assert _post(api_client, f"/api/assignments/{uuid.uuid4()}/withdraw/").status_code == 404


def test_reassign_moves_an_open_assignment(api_client):
    study, readers, _ = make_reading_study(pairs=1, readers_beyond_initial=1)
    example = Example.objects.get(study=study, task=Task.EQUIVALENCE)
    assignment = _open(example)
    (free,) = _without_the_exam(study, readers)
    taken = example.assignments.exclude(pk=assignment.pk).get().reader
    of_the_exam = _open(_realism(study)).reader  # has a Task 1 item of the same exam

    refused = _post(api_client, f"/api/assignments/{assignment.public_id}/reassign/", {"reader": taken.username})
    kept_apart = _post(
        api_client, f"/api/assignments/{assignment.public_id}/reassign/", {"reader": of_the_exam.username}
    )
    moved = _post(api_client, f"/api/assignments/{assignment.public_id}/reassign/", {"reader": free.username})

    assert refused.status_code == 409
    assert kept_apart.status_code == 409
    assert "another item of the same exam" in kept_apart.json()["detail"]
    assert moved.status_code == 200
    body = moved.json()
    assert (body["reader"], body["slot"]) == (free.username, assignment.slot)
    assert body["id"] != str(assignment.public_id)
    assert not Assignment.objects.filter(pk=assignment.pk).exists()
    missing = _post(api_client, f"/api/assignments/{assignment.public_id}/reassign/", {"reader": free.username})
    assert missing.status_code == 404


def test_void_needs_a_reason_and_voids_once(api_client):
    study, _, _ = make_reading_study(pairs=1)
    (annotation,) = rate_open_reads(_realism(study), RatingChoice.MINOR_ISSUES)
    path = f"/api/annotations/{annotation.public_id}/void/"

    blank = _post(api_client, path, {"reason": "   "})
    voided = _post(api_client, path, {"reason": "Rated the wrong report."})
    again = _post(api_client, path, {"reason": "Again."})

    assert blank.status_code == 400
    assert "reason" in blank.json()
    assert voided.status_code == 200
    assert (voided.json()["voided"], voided.json()["void_reason"]) == (True, "Rated the wrong report.")
    assert again.status_code == 409
    assert again.json() == {"detail": "This rating was already voided."}
    assert _post(api_client, f"/api/annotations/{uuid.uuid4()}/void/", {"reason": "x"}).status_code == 404


# --- What leaves the server --------------------------------------------------------------------------


def _walk(data, path: str = "$"):
    if isinstance(data, dict):
        for key, value in data.items():
            yield path, key, value
            yield from _walk(value, f"{path}.{key}")
    elif isinstance(data, list):
        for i, value in enumerate(data):
            yield from _walk(value, f"{path}[{i}]")


def test_responses_name_objects_by_public_id_never_by_primary_key(api_client, world):
    for name in ("progress", "workload", "unrouted", "example", "reader"):
        document = api_client.get(CALLS[name].path(world)).json()
        for path, key, value in _walk(document):
            assert key not in ("pk", "user_id", "reader_id", "example_id"), f"{path}.{key}"
            if key in ("id", "example", "assignment") and isinstance(value, str):
                assert uuid.UUID(value).version == 4, f"{path}.{key} = {value!r}"
            assert not (key == "id" and isinstance(value, int)), f"{path}.{key}"


def test_the_schema_documents_the_coordination_endpoints(api_client):
    paths = api_client.get("/api/schema/", {"format": "json"}).json()["paths"]

    for path, method in [
        ("/api/studies/{slug}/progress/", "get"),
        ("/api/studies/{slug}/workload/", "get"),
        ("/api/studies/{slug}/unrouted/", "get"),
        ("/api/studies/{slug}/examples/{example_id}/", "get"),
        ("/api/studies/{slug}/readers/{username}/", "get"),
        ("/api/studies/{slug}/assign/", "post"),
        ("/api/studies/{slug}/members/", "post"),
        ("/api/studies/{slug}/assignments/", "post"),
        ("/api/assignments/{assignment_id}/withdraw/", "post"),
        ("/api/assignments/{assignment_id}/reassign/", "post"),
        ("/api/annotations/{annotation_id}/void/", "post"),
    ]:
        assert method in paths[path], path
    assert "409" in paths["/api/annotations/{annotation_id}/void/"]["post"]["responses"]
