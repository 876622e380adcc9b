"""The reader API: the next blinded item, rating it, progress; usable by an automated judge with a token."""

import uuid
from functools import partial

import pytest
from django.test import Client
from django.utils import timezone

from annotation.models import Annotation, ApiToken, Assignment, AssignmentStatus, RatingChoice, ReportType, Role, Task
from annotation.reading import RATING_DEFINITIONS
from tests.factories import (
    make_assignment,
    make_example,
    make_pair,
    make_reading_study,
    make_study,
    make_token,
    make_user,
    rate,
)

pytestmark = pytest.mark.django_db

JSON = "application/json"
PAYLOAD_FIELDS = {
    "id",
    "study",
    "task",
    "question",
    "position",
    "context",
    "reports",
    "labels",
    "status",
    "form_token",
    "rating",
    "rationale",
}


def _queue(reader, n: int = 3, *, task: str = Task.REALISM, study=None) -> list[Assignment]:
    """n open assignments in queue order (which runs against the primary keys)."""
    study = study or make_study()
    queue = []
    for position in reversed(range(n)):
        pair = make_pair(study, original_findings=f"Findings {position}.", indication=f"Indication {position}.")
        if task == Task.REALISM:
            example = make_example(pair, task=task, report_type=ReportType.ORIGINAL)
        else:
            example = make_example(pair)
        queue.append(make_assignment(example, reader, queue_order=position))
    return queue[::-1]


def _next(client, task: str = Task.REALISM, **params):
    return client.get("/api/reading/next/", {"task": task, **params})


def _rate(client, assignment: Assignment, rating: str = RatingChoice.REALISTIC, rationale: str = "", token=None):
    body = {"rating": rating, "rationale": rationale, "form_token": str(token or uuid.uuid4())}
    return client.post(f"/api/reading/{assignment.public_id}/rating/", body, content_type=JSON)


@pytest.fixture
def queue(client, reader) -> list[Assignment]:
    client.force_login(reader)
    return _queue(reader)


@pytest.fixture
def shown(client, queue) -> Assignment:
    """The first item, fetched (a rating needs the item to have been shown)."""
    assert client.get(f"/api/reading/{queue[0].public_id}/").status_code == 200
    return queue[0]


def test_next_returns_the_readers_next_open_assignment_blinded(client, queue):
    response = _next(client)

    assert response.status_code == 200
    data = response.json()
    assert set(data) == PAYLOAD_FIELDS
    assert data["id"] == str(queue[0].public_id)
    study = queue[0].example.study
    assert data["study"] == {"slug": study.slug, "name": study.name}
    assert data["task"] == Task.REALISM
    assert data["question"].startswith("Is this report realistic?")
    assert data["position"] == 1
    assert data["context"] == {"indication": "Indication 0.", "comparison": "None.", "technique": "PA and lateral."}
    assert data["reports"] == [{"heading": "Report", "findings": "Findings 0.", "impression": "No acute process."}]
    assert data["labels"] == [
        {
            "value": value,
            "label": RatingChoice(value).label,
            "definition": RATING_DEFINITIONS[value],
            "rationale_required": value != RatingChoice.REALISTIC,
        }
        for value in (RatingChoice.REALISTIC, RatingChoice.MINOR_ISSUES, RatingChoice.MAJOR_ISSUES)
    ]
    assert data["status"] == AssignmentStatus.OPEN
    assert uuid.UUID(data["form_token"])
    assert data["rating"] is None and data["rationale"] is None


def test_next_starts_the_time_on_task(client, queue):
    _next(client)

    queue[0].refresh_from_db()
    assert queue[0].first_shown_at is not None
    assert not Assignment.objects.filter(pk__in=[a.pk for a in queue[1:]], first_shown_at__isnull=False).exists()


def test_next_gives_a_new_form_token_on_every_fetch(client, queue):
    assert _next(client).json()["form_token"] != _next(client).json()["form_token"]


def test_next_skips_rated_assignments(client, queue):
    rate(queue[0], RatingChoice.REALISTIC, "")

    data = _next(client).json()

    assert data["id"] == str(queue[1].public_id)
    assert data["position"] == 2


def test_next_is_204_when_the_queue_is_done(client, queue):
    for assignment in queue:
        rate(assignment, RatingChoice.REALISTIC, "")

    response = _next(client)

    assert response.status_code == 204
    assert response.content == b""
    assert _next(client, Task.EQUIVALENCE).status_code == 204


@pytest.mark.parametrize("params", [{}, {"task": ""}, {"task": "ranking"}, {"task": "REALISM"}])
def test_next_needs_a_valid_task(client, queue, params):
    response = client.get("/api/reading/next/", params)

    assert response.status_code == 400
    assert response.json() == {"detail": "task: give task=realism or task=equivalence.", "field": "task"}


def test_next_can_be_limited_to_one_study(client, reader, queue):
    other_study = make_study("other-study")
    elsewhere = _queue(reader, 1, study=other_study)[0]

    assert _next(client, study="other-study").json()["id"] == str(elsewhere.public_id)
    assert _next(client, study="no-such-study").status_code == 204


def test_task_2_shows_report_a_and_b_and_records_the_order(client, reader):
    client.force_login(reader)
    assignment = _queue(reader, 1, task=Task.EQUIVALENCE)[0]

    data = _next(client, Task.EQUIVALENCE).json()

    assignment.refresh_from_db()
    assert [report["heading"] for report in data["reports"]] == ["Report A", "Report B"]
    assert assignment.report_a_type in ReportType.values
    shown_a = assignment.example.pair.report(assignment.report_a_type)
    assert (data["reports"][0]["findings"], data["reports"][0]["impression"]) == shown_a
    again = client.get(f"/api/reading/{assignment.public_id}/").json()
    assert again["reports"] == data["reports"]


def test_rating_creates_the_annotation(client, queue, shown):
    response = _rate(client, shown, RatingChoice.MINOR_ISSUES, "  Odd word order.  ")

    assert response.status_code == 201
    assert response.json() == {
        "rating": RatingChoice.MINOR_ISSUES,
        "rationale": "Odd word order.",
        "created": True,
        "next": str(queue[1].public_id),
        "undo_seconds": 0,
    }
    annotation = Annotation.objects.get()
    assert (annotation.assignment, annotation.rating, annotation.rationale) == (
        shown,
        RatingChoice.MINOR_ISSUES,
        "Odd word order.",
    )
    assert annotation.duration_ms is not None
    shown.refresh_from_db()
    assert shown.status == AssignmentStatus.DONE


def test_the_last_rating_says_there_is_no_next(client, queue):
    for assignment in queue[:2]:
        rate(assignment, RatingChoice.REALISTIC, "")
    client.get(f"/api/reading/{queue[2].public_id}/")

    assert _rate(client, queue[2]).json()["next"] is None


def test_the_same_token_again_answers_with_the_stored_rating(client, shown):
    token = uuid.uuid4()
    _rate(client, shown, RatingChoice.REALISTIC, token=token)

    response = _rate(client, shown, RatingChoice.MAJOR_ISSUES, "Changed my mind.", token=token)

    assert response.status_code == 200
    assert response.json()["created"] is False
    assert response.json()["rating"] == RatingChoice.REALISTIC
    assert Annotation.objects.count() == 1


def test_another_token_on_a_rated_item_is_a_409(client, shown):
    _rate(client, shown, RatingChoice.REALISTIC)

    response = _rate(client, shown, RatingChoice.MAJOR_ISSUES, "Changed my mind.")

    assert response.status_code == 409
    assert response.json()["rating"] == RatingChoice.REALISTIC
    assert response.json()["created"] is False
    assert Annotation.objects.get().rating == RatingChoice.REALISTIC


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"rating": "excellent", "rationale": "", "form_token": str(uuid.uuid4())}, "rating"),
        ({"rationale": "", "form_token": str(uuid.uuid4())}, "rating"),
        ({"rating": RatingChoice.EQUIVALENT, "rationale": "", "form_token": str(uuid.uuid4())}, "rating"),
        ({"rating": RatingChoice.MINOR_ISSUES, "rationale": " ", "form_token": str(uuid.uuid4())}, "rationale"),
        ({"rating": RatingChoice.MAJOR_ISSUES, "form_token": str(uuid.uuid4())}, "rationale"),
        ({"rating": RatingChoice.REALISTIC, "rationale": ""}, "form_token"),
        ({"rating": RatingChoice.REALISTIC, "rationale": "", "form_token": "not-a-uuid"}, "form_token"),
    ],
    ids=["unknown label", "no label", "other task's label", "blank rationale", "no rationale", "no token", "bad token"],
)
def test_a_refused_rating_is_a_400_naming_the_field(client, shown, body, field):
    response = client.post(f"/api/reading/{shown.public_id}/rating/", body, content_type=JSON)

    assert response.status_code == 400
    assert response.json()["field"] == field
    assert response.json()["detail"]
    assert not Annotation.objects.exists()


def test_an_item_never_fetched_cannot_be_rated(client, queue):
    response = _rate(client, queue[1])

    assert response.status_code == 400
    assert response.json() == {
        "detail": f"Fetch the item first: GET /api/reading/{queue[1].public_id}/.",
        "field": None,
    }
    assert not Annotation.objects.exists()


def test_another_readers_assignment_is_a_404(client, shown):
    theirs = _queue(make_user(Role.READER), 1)[0]
    client.force_login(make_user(Role.READER))

    assert client.get(f"/api/reading/{shown.public_id}/").status_code == 404
    assert _rate(client, shown).status_code == 404
    assert _rate(client, theirs).status_code == 404
    assert not Annotation.objects.exists()
    theirs.refresh_from_db()
    assert theirs.first_shown_at is None


def test_a_rated_item_shows_the_own_rating_and_no_token(client, shown):
    _rate(client, shown, RatingChoice.MINOR_ISSUES, "Odd word order.")

    data = client.get(f"/api/reading/{shown.public_id}/").json()

    assert data["status"] == AssignmentStatus.DONE
    assert (data["rating"], data["rationale"], data["form_token"]) == (
        RatingChoice.MINOR_ISSUES,
        "Odd word order.",
        None,
    )


def test_progress_lists_the_readers_own_queues(client, reader, queue):
    _queue(reader, 2, task=Task.EQUIVALENCE, study=queue[0].example.study)
    rate(queue[0], RatingChoice.REALISTIC, "")
    _queue(make_user(Role.READER), 4)  # someone else's

    response = client.get("/api/reading/progress/")

    assert response.status_code == 200
    study = queue[0].example.study
    assert response.json() == [
        {"study": study.slug, "study_name": study.name, "task": Task.EQUIVALENCE, "done": 0, "waiting": True},
        {"study": study.slug, "study_name": study.name, "task": Task.REALISM, "done": 1, "waiting": True},
    ]


def test_an_automated_judge_runs_its_whole_queue_with_a_token():
    # Three exams, six readers: each reader has one item of each exam, two Task 1 and one Task 2.
    _, readers, _ = make_reading_study(pairs=3, readers=6)
    judge = readers[0]
    mine = Assignment.objects.filter(reader=judge)
    assert mine.count() > 2
    client = Client(HTTP_AUTHORIZATION=f"Token {make_token(judge)}")

    rated = 0
    for task in (Task.REALISM, Task.EQUIVALENCE):
        for _ in range(mine.count() + 1):
            response = _next(client, task)
            if response.status_code == 204:
                break
            item = response.json()
            label = item["labels"][1]
            body = {"rating": label["value"], "rationale": "Automated judgement.", "form_token": item["form_token"]}
            result = client.post(f"/api/reading/{item['id']}/rating/", body, content_type=JSON)
            assert result.status_code == 201, result.content
            rated += 1
        else:
            pytest.fail(f"the {task} queue never ran dry")

    assert rated == mine.count()
    assert not mine.open().exists()
    assert Annotation.objects.filter(reader=judge).count() == rated
    progress = client.get("/api/reading/progress/").json()
    assert sum(queue["done"] for queue in progress) == rated
    assert not any(queue["waiting"] for queue in progress)


@pytest.mark.parametrize("kind", ["anonymous", "coordinator", "adjudicator", "data manager", "no role"])
def test_only_readers_may_call_it(client, reader, kind):
    assignment = _queue(reader, 1)[0]
    roles = {"coordinator": [Role.COORDINATOR], "adjudicator": [Role.ADJUDICATOR], "data manager": [Role.DATA_MANAGER]}
    if kind != "anonymous":
        client.force_login(make_user(*roles.get(kind, [])))

    calls = [
        _next(client),
        client.get(f"/api/reading/{assignment.public_id}/"),
        _rate(client, assignment),
        client.get("/api/reading/progress/"),
    ]

    assert [response.status_code for response in calls] == [401 if kind == "anonymous" else 403] * 4
    assignment.refresh_from_db()
    assert assignment.first_shown_at is None
    assert not Annotation.objects.exists()


def test_a_coordinators_token_is_refused(reader):
    assignment = _queue(reader, 1)[0]
    client = Client(HTTP_AUTHORIZATION=f"Token {make_token(make_user(Role.COORDINATOR))}")

    assert _next(client).status_code == 403
    assert client.get(f"/api/reading/{assignment.public_id}/").status_code == 403


def test_the_schema_documents_the_reading_endpoints(client, reader):
    client.force_login(reader)

    schema = client.get("/api/schema/", {"format": "json"}).json()

    paths = schema["paths"]
    next_params = {p["name"]: p for p in paths["/api/reading/next/"]["get"]["parameters"]}
    assert next_params["task"]["required"] is True
    assert set(next_params["task"]["schema"]["enum"]) == set(Task.values)
    assert {"200", "204"} <= set(paths["/api/reading/next/"]["get"]["responses"])
    assert "get" in paths["/api/reading/{assignment_id}/"]
    rating = paths["/api/reading/{assignment_id}/rating/"]["post"]
    assert {"200", "201", "400", "409"} <= set(rating["responses"])
    assert "application/json" in rating["requestBody"]["content"]
    for path in ("/api/reading/{assignment_id}/", "/api/reading/{assignment_id}/rating/"):
        (id_param,) = [p for p in next(iter(paths[path].values()))["parameters"] if p["name"] == "assignment_id"]
        assert id_param["schema"] == {"type": "string", "format": "uuid"}
    assert "get" in paths["/api/reading/progress/"]
    components = schema["components"]["schemas"]
    assert set(components["ReadingItem"]["properties"]) == PAYLOAD_FIELDS
    assert set(components["RatingRequest"]["properties"]) == {"rating", "rationale", "form_token"}
    assert set(components["RatingError"]["properties"]) == {"detail", "field"}


@pytest.mark.parametrize("bad_id", ["not-a-uuid", "12", "6F1C2A4E-0D5B-4C8E-9A7F-3B2D1E0C9A8B"])
def test_an_id_that_is_not_a_uuid_is_a_404(client, queue, bad_id):
    assert client.get(f"/api/reading/{bad_id}/").status_code == 404
    assert client.post(f"/api/reading/{bad_id}/rating/", {}, content_type=JSON).status_code == 404


def _api_budget(pairs: int) -> dict[str, int]:
    """Queries of each reader call with a token (as an automated judge or the benchmark sends them)."""
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    _, readers, _ = make_reading_study(pairs=pairs, readers=2, keep_versions_apart=False)
    # A reader with at least two items in each task (which reader has how many depends on the seed).
    reader = max(
        readers, key=lambda r: min(Assignment.objects.filter(reader=r, task=task).count() for task in Task.values)
    )
    assert min(Assignment.objects.filter(reader=reader, task=task).count() for task in Task.values) >= 2
    client = Client(HTTP_AUTHORIZATION=f"Token {make_token(reader)}")
    # Used within the minute, as by a program reading: "last used" is written once a minute, not here.
    ApiToken.objects.filter(user=reader).update(last_used_at=timezone.now())
    counts = {}

    def measure(name: str, call):
        with CaptureQueriesContext(connection) as captured:
            response = call()
        counts[name] = len(captured)
        return response

    for task in (Task.REALISM, Task.EQUIVALENCE):
        item = measure(f"next {task}", partial(_next, client, task)).json()
        body = {"rating": item["labels"][0]["value"], "rationale": "", "form_token": item["form_token"]}
        rate = partial(client.post, f"/api/reading/{item['id']}/rating/", body, content_type=JSON)
        assert measure(f"first read {task}", rate).status_code == 201
        measure(f"same token again {task}", rate)
        measure(f"fetch again {task}", partial(client.get, f"/api/reading/{item['id']}/"))
    measure("progress", lambda: client.get("/api/reading/progress/"))
    return counts


def test_the_reader_api_query_count_is_small_and_does_not_grow_with_the_study():
    # Three pairs at least: every queue still holds an item after the measured calls, as in the larger
    # study (a queue found empty costs one more query, which looks at the reader's reserve).
    small, large = _api_budget(3), _api_budget(12)

    assert small == large
    # Token, user and roles in one query, then the work itself: next is one query to find and load the
    # item with its queue's counter, and one to mark it shown; a first read stores, audits,
    # counts and routes. A rated item has no position to read. A submit reads the reader's rating still
    # in its undo window (to settle it) along with the lock, and again with the item once locked.
    assert large == {
        "next realism": 3,
        "first read realism": 11,
        "same token again realism": 7,
        "fetch again realism": 2,
        "next equivalence": 3,
        "first read equivalence": 11,
        "same token again equivalence": 7,
        "fetch again equivalence": 2,
        "progress": 2,
    }
