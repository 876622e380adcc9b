"""Taking back a slip in the reading room and through the API: the notice, Undo, the item back with
its form filled in, the refusal once the rating has settled, and the study's undo window."""

import uuid
from datetime import timedelta

import pytest
from django.test import Client
from django.urls import reverse
from django.utils import timezone

from annotation.models import (
    Annotation,
    Assignment,
    AssignmentStatus,
    AuditAction,
    AuditEvent,
    RatingChoice,
    ReportType,
    Role,
    Study,
    Task,
)
from consensus.services import settle_due_ratings
from tests.factories import make_assignment, make_example, make_pair, make_study, make_token, make_user

pytestmark = pytest.mark.django_db

HTMX = {"HTTP_HX_REQUEST": "true"}


@pytest.fixture
def queue(client, reader) -> list[Assignment]:
    """Three Task 1 items in the reader's queue, in a study with a two-minute undo window."""
    client.force_login(reader)
    study = make_study(undo_window_seconds=120)
    assignments = []
    for position in range(3):
        pair = make_pair(study, original_findings=f"Findings of item {position}.")
        example = make_example(pair, task=Task.REALISM, report_type=ReportType.ORIGINAL)
        assignments.append(make_assignment(example, reader, queue_order=10 + position))
    return assignments


def _url(assignment: Assignment) -> str:
    return reverse("reading_page", args=[assignment.public_id])


def _submit(client, assignment, rating=RatingChoice.MINOR_ISSUES, rationale="Odd word order.", **headers):
    client.get(_url(assignment))
    data = {"rating": rating, "rationale": rationale, "form_token": uuid.uuid4()}
    return client.post(_url(assignment), data, **headers)


def _notice(html: str) -> str:
    start = html.index('id="saved-notice"')
    return html[start : html.index("</div>", start)]


def test_the_next_item_shows_the_saved_notice_with_undo(client, queue):
    response = _submit(client, queue[0], **HTMX)

    notice = _notice(response.content.decode())
    assert "Saved: Item 1, Minor Issues." in notice
    assert f'hx-post="{reverse("reading_undo")}"' in notice
    assert 'aria-keyshortcuts="U"' in notice and "<kbd>U</kbd>" in notice
    assert 119 <= int(notice.split('data-undo-seconds="')[1].split('"')[0]) <= 120
    assert "can no longer be taken back; a coordinator can void it" in notice  # shown when the window closes


def test_undo_returns_the_reader_to_the_item_with_their_label_and_rationale(client, queue):
    _submit(client, queue[0], **HTMX)

    response = client.post(reverse("reading_undo"), **HTMX)

    assert response.status_code == 200
    assert response["HX-Retarget"] == "#reading"
    assert response["HX-Push-Url"] == _url(queue[0])
    html = response.content.decode()
    assert "Findings of item 0." in html and "Item 1" in html
    assert 'value="minor_issues" id="rating-2"' in html.replace("\n", " ")
    assert 'checked aria-describedby="rating-2-definition"' in " ".join(html.split())
    assert ">Odd word order.</textarea>" in html
    assert "data-taken-back" in html
    assert not Annotation.objects.exists()


def test_a_taken_back_item_stays_first_in_the_queue_and_keeps_its_filled_form(client, queue):
    _submit(client, queue[0])
    client.post(reverse("reading_undo"))

    response = client.get(reverse("reading_next", args=[queue[0].study.slug, Task.REALISM]))

    assert response.url == _url(queue[0])
    html = client.get(response.url).content.decode()
    assert ">Odd word order.</textarea>" in html
    corrected = _submit(client, queue[0], RatingChoice.REALISTIC, "")
    assert corrected.status_code == 302
    assert Annotation.objects.get().rating == RatingChoice.REALISTIC


def test_undo_without_htmx_redirects_to_the_item(client, queue):
    _submit(client, queue[0])

    response = client.post(reverse("reading_undo"))

    assert response.status_code == 302 and response.url == _url(queue[0])


def test_undo_is_refused_with_the_reason_once_the_rating_has_settled(client, queue):
    _submit(client, queue[0], **HTMX)
    settle_due_ratings(now=timezone.now() + timedelta(minutes=3))

    response = client.post(reverse("reading_undo"), **HTMX)

    assert response.status_code == 409
    html = response.content.decode()
    assert 'id="saved-notice"' in html and 'role="alert"' in html
    assert "can no longer be taken back" in html and "coordinator can void it" in html
    assert Annotation.objects.get().settled_at is not None
    page = client.post(reverse("reading_undo"))
    assert page.url == reverse("reader_home")
    assert "can no longer be taken back" in client.get(page.url).content.decode()


def test_submitting_the_next_item_ends_the_undo_of_the_previous_one(client, queue):
    _submit(client, queue[0], **HTMX)
    response = _submit(client, queue[1], RatingChoice.REALISTIC, "", **HTMX)

    assert "Saved: Item 2, Realistic." in _notice(response.content.decode())
    client.post(reverse("reading_undo"), **HTMX)  # takes back item 2
    refused = client.post(reverse("reading_undo"), **HTMX)
    assert refused.status_code == 409
    assert Annotation.objects.get(assignment=queue[0]).settled_at is not None


def test_the_last_item_and_the_home_page_offer_undo_too(client, queue, reader):
    for assignment in queue[:2]:
        Assignment.objects.filter(pk=assignment.pk).update(status=AssignmentStatus.WITHDRAWN)
    done = _submit(client, queue[2], **HTMX)

    assert "Nothing is waiting for you" in done.content.decode()
    assert "Saved: Item 1, Minor Issues." in _notice(done.content.decode())
    home = client.get(reverse("reader_home")).content.decode()
    assert "Saved: Item 1 (Task 1: Realism), Minor Issues." in _notice(home)
    assert 'id="undo-button"' in home


def test_with_undo_off_the_notice_says_ratings_are_final(client, queue):
    Study.objects.filter(pk=queue[0].study_id).update(undo_window_seconds=0)

    notice = _notice(_submit(client, queue[0], **HTMX).content.decode())

    assert "Saved: Item 1, Minor Issues." in notice
    assert "Ratings in this study are final" in notice and "undo-button" not in notice


def test_undo_needs_a_logged_in_reader_and_a_post(client, queue, coordinator):
    assert client.get(reverse("reading_undo")).status_code == 405
    client.force_login(coordinator)
    assert client.post(reverse("reading_undo")).status_code == 403
    anonymous = Client().post(reverse("reading_undo"))
    assert anonymous.status_code == 302 and "login" in anonymous.url


def test_another_readers_rating_cannot_be_taken_back(client, queue, reader):
    _submit(client, queue[0])
    other = make_user(Role.READER)
    client.force_login(other)

    response = client.post(reverse("reading_undo"), **HTMX)

    assert response.status_code == 409 and "no rating to take back" in response.content.decode()
    assert Annotation.objects.filter(reader=reader).exists()


# --- The study's undo window ---------------------------------------------------------------------


def test_a_coordinator_sets_the_undo_window_of_a_study(client, coordinator):
    study = make_study()
    client.force_login(coordinator)
    url = reverse("study_undo_window", args=[study.slug])

    saved = client.post(url, {"undo_window_seconds": "30"}, **HTMX)
    refused = client.post(url, {"undo_window_seconds": "99999"}, **HTMX)

    assert saved.status_code == 200 and "30 seconds" in saved.content.decode()
    assert refused.status_code == 422 and "3600" in refused.content.decode()
    study.refresh_from_db()
    assert study.undo_window_seconds == 30
    assert 'name="undo_window_seconds"' in client.get(reverse("study_detail", args=[study.slug])).content.decode()


def test_changing_the_undo_window_is_audited_with_the_old_value_and_an_unchanged_one_is_not(client, coordinator):
    study = make_study(undo_window_seconds=120)
    client.force_login(coordinator)
    url = reverse("study_undo_window", args=[study.slug])

    client.post(url, {"undo_window_seconds": "30"}, **HTMX)
    client.post(url, {"undo_window_seconds": "30"}, **HTMX)
    client.post(url, {"undo_window_seconds": "99999"}, **HTMX)  # refused: nothing to audit

    events = AuditEvent.objects.filter(study=study, action=AuditAction.UNDO_WINDOW_CHANGED)
    assert [(e.actor, e.before, e.after) for e in events] == [
        (coordinator, {"undo_window_seconds": 120}, {"undo_window_seconds": 30})
    ]


def test_only_a_coordinator_sets_the_undo_window(client, reader):
    study = make_study(undo_window_seconds=120)
    client.force_login(reader)

    response = client.post(reverse("study_undo_window", args=[study.slug]), {"undo_window_seconds": "0"})

    assert response.status_code == 403
    study.refresh_from_db()
    assert study.undo_window_seconds == 120


def test_a_new_study_has_a_two_minute_undo_window(client, coordinator):
    client.force_login(coordinator)
    client.post(reverse("study_list"), {"name": "New", "slug": "new"})
    api = Client(HTTP_AUTHORIZATION=f"Token {make_token(coordinator)}")
    created = api.post("/api/studies/", {"slug": "api", "name": "Api"}, content_type="application/json").json()

    assert Study.objects.get(slug="new").undo_window_seconds == 120
    assert created["undo_window_seconds"] == 120


# --- The API -------------------------------------------------------------------------------------


@pytest.fixture
def api(reader):
    return Client(HTTP_AUTHORIZATION=f"Token {make_token(reader)}")


def _api_rate(api, assignment, rating=RatingChoice.MINOR_ISSUES, rationale="Odd word order."):
    item = api.get(f"/api/reading/{assignment.public_id}/").json()
    body = {"rating": rating, "rationale": rationale, "form_token": item["form_token"]}
    return api.post(f"/api/reading/{assignment.public_id}/rating/", body, content_type="application/json")


def test_the_api_takes_back_the_callers_last_rating(api, client, queue):
    rated = _api_rate(api, queue[0]).json()
    assert 119 <= rated["undo_seconds"] <= 120

    response = api.post("/api/reading/undo/")

    assert response.status_code == 200
    body = response.json()
    assert (body["id"], body["rating"], body["rationale"]) == (
        str(queue[0].public_id),
        "minor_issues",
        "Odd word order.",
    )
    item = api.get(f"/api/reading/{queue[0].public_id}/").json()
    assert item["status"] == "open" and item["form_token"]
    assert api.get("/api/reading/next/?task=realism").json()["id"] == str(queue[0].public_id)


def test_the_api_answers_409_with_the_reason_once_the_rating_has_settled(api, queue):
    _api_rate(api, queue[0])
    _api_rate(api, queue[1], RatingChoice.REALISTIC, "")
    api.post("/api/reading/undo/")  # the newest one

    response = api.post("/api/reading/undo/")

    assert response.status_code == 409
    assert "can no longer be taken back" in response.json()["detail"]
    assert Annotation.objects.get().assignment_id == queue[0].pk


def test_undo_is_in_the_openapi_schema(api, reader):
    client = Client()
    client.force_login(reader)
    schema = client.get("/api/schema/?format=json").json()

    operation = schema["paths"]["/api/reading/undo/"]["post"]
    assert set(operation["responses"]) >= {"200", "409"}
    assert "undo_seconds" in schema["components"]["schemas"]["RatingResult"]["properties"]
