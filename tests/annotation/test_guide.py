"""The reader guide: versions, safe rendering, confirmation before reading, and the coordinator's view."""

from html.parser import HTMLParser

import pytest
from django.db import DatabaseError, connection, transaction
from django.test.utils import CaptureQueriesContext
from django.urls import reverse

from annotation.guide import GuideRefused, confirm_guide, publish_guide, render_guide
from annotation.models import (
    Annotation,
    AuditAction,
    AuditEvent,
    GuideAcknowledgement,
    GuideVersion,
    RatingChoice,
    Role,
    Task,
)
from tests.browser.test_hostile_text import CORPUS
from tests.factories import make_reading_study, make_token, make_user

pytestmark = pytest.mark.django_db

JSON = "application/json"


@pytest.fixture
def reading():
    # Three exams, six readers: each reader has one item of each exam, two Task 1 and one Task 2.
    study, readers, adjudicators = make_reading_study(pairs=3, readers=6)
    for reader in readers:
        if reader.assignments.filter(task=Task.REALISM).count() >= 2 and reader.assignments.filter(
            task=Task.EQUIVALENCE
        ):
            return study, reader, adjudicators[0]
    raise AssertionError("no reader with two Task 1 items and a Task 2 item")


def _first_open(reader, task=Task.REALISM):
    return reader.assignments.filter(task=task, status="open").order_by("queue_order", "pk").first()


# --- Rendering --------------------------------------------------------------------------------


class _Elements(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.found: list[tuple[str, dict]] = []

    def handle_starttag(self, tag: str, attrs: list) -> None:
        self.found.append((tag, dict(attrs)))


def _elements(html: str) -> list[tuple[str, dict]]:
    parser = _Elements()
    parser.feed(html)
    return parser.found


@pytest.mark.parametrize("hostile", CORPUS)
def test_it_renders_no_markup_that_could_run_or_load(hostile):
    html = render_guide(f"# Title\n\n{hostile}\n\n[click](javascript:alert(1)) ![x](http://evil.invalid/x.png)")

    elements = _elements(html)
    assert {tag for tag, _ in elements} <= {"h1", "p", "br"}
    assert all(not attrs for _, attrs in elements)
    # The hostile text itself is kept, as text.
    assert hostile.split(">")[0].replace("<", "&lt;") in html or hostile.split()[0] in html


def test_links_keep_only_safe_schemes():
    html = render_guide("[a](javascript:alert(1)) [b](data:text/html,x) [c](https://e.org) [d](mailto:x@e.org)")

    assert [attrs.get("href") for tag, attrs in _elements(html) if tag == "a"] == ["https://e.org", "mailto:x@e.org"]


def test_it_keeps_the_markdown_a_guide_needs():
    html = render_guide(
        "## Labels\n\n- **Realistic**: *fine*\n\n| a | b |\n|---|---|\n| 1 | 2 |\n\n[PhysioNet](https://physionet.org)"
    )

    assert "<h2>Labels</h2>" in html
    assert "<strong>Realistic</strong>" in html and "<em>fine</em>" in html
    assert "<table>" in html
    assert '<a href="https://physionet.org" rel="noopener noreferrer nofollow">PhysioNet</a>' in html


# --- Versions -----------------------------------------------------------------------------------


def test_every_edit_makes_a_new_version_and_keeps_the_old_ones(reading):
    study, _, _ = reading
    coordinator = make_user(Role.COORDINATOR)

    first, created_first = publish_guide(study, "Version one.", author=coordinator)
    second, created_second = publish_guide(study, "Version two.", author=coordinator)
    again, created_again = publish_guide(study, "Version two.", author=coordinator)

    assert (first.number, second.number, again.pk) == (1, 2, second.pk)
    assert (created_first, created_second, created_again) == (True, True, False)
    assert list(GuideVersion.objects.filter(study=study).values_list("text", flat=True)) == [
        "Version one.",
        "Version two.",
    ]
    study.refresh_from_db()
    assert study.guide_number == 2
    assert AuditEvent.objects.filter(study=study, action=AuditAction.GUIDE_PUBLISHED).count() == 2


def test_a_version_cannot_be_changed_or_deleted(reading):
    study, _, _ = reading
    version, _ = publish_guide(study, "Text.", author=None)

    version.text = "Other."
    with pytest.raises(TypeError):
        version.save()
    with pytest.raises(TypeError):
        GuideVersion.objects.filter(pk=version.pk).update(text="Other.")
    with pytest.raises(TypeError):
        version.delete()


@pytest.mark.postgres
@pytest.mark.django_db(transaction=True)
def test_the_database_refuses_to_change_or_delete_a_version_on_postgresql():
    study = make_reading_study(pairs=1, readers=2, keep_versions_apart=False)[0]
    version, _ = publish_guide(study, "Text.", author=None)
    for statement in (
        "UPDATE annotation_guideversion SET text = 'x' WHERE id = %s",
        "DELETE FROM annotation_guideversion WHERE id = %s",
    ):
        with pytest.raises(DatabaseError, match="append-only"), transaction.atomic(), connection.cursor() as cursor:
            cursor.execute(statement, [version.pk])
    assert GuideVersion.objects.get().text == "Text."


@pytest.mark.parametrize("text", ["", "   \n"])
def test_an_empty_guide_is_refused(reading, text):
    study, _, _ = reading
    with pytest.raises(GuideRefused, match="empty"):
        publish_guide(study, text, author=None)
    assert not GuideVersion.objects.exists()


# --- Confirmation -----------------------------------------------------------------------------------


def test_a_confirmation_is_timestamped_audited_and_stored_once(reading):
    study, reader, _ = reading
    publish_guide(study, "Guide.", author=None)

    ack, created = confirm_guide(reader, study, 1)
    again, created_again = confirm_guide(reader, study, 1)

    assert created and not created_again and again.pk == ack.pk and ack.created_at is not None
    event = AuditEvent.objects.get(action=AuditAction.GUIDE_CONFIRMED)
    assert (event.actor, event.subject, event.after) == (reader, reader, {"guide_version": 1})


def test_only_the_current_version_can_be_confirmed(reading):
    study, reader, _ = reading
    publish_guide(study, "One.", author=None)
    publish_guide(study, "Two.", author=None)

    with pytest.raises(GuideRefused, match="changed while you were reading"):
        confirm_guide(reader, study, 1)
    assert not GuideAcknowledgement.objects.exists()


def test_a_reader_confirms_the_guide_before_the_first_item(client, reading):
    study, reader, _ = reading
    publish_guide(study, "# Read me\n\nDefinitions.", author=None)
    client.force_login(reader)

    response = client.get(reverse("reading_next", args=[study.slug, Task.REALISM]))
    guide_url = reverse("reader_guide", args=[study.slug]) + "?next=realism"
    assert response.status_code == 302 and response.url == guide_url
    # A direct link to an item waits for the guide too, and does not start its time on task.
    assignment = _first_open(reader)
    assert client.get(reverse("reading_page", args=[assignment.public_id])).status_code == 302
    # Fetched by htmx (a link followed within the page), it is the browser that goes to the guide:
    # a redirect followed inside the request would swap the whole guide page into the reading panel.
    fetched = client.get(reverse("reading_page", args=[assignment.public_id]), HTTP_HX_REQUEST="true")
    assert fetched.status_code == 200 and fetched.headers["HX-Redirect"] == guide_url
    assignment.refresh_from_db()
    assert assignment.first_shown_at is None

    page = client.get(guide_url)
    assert b"<h1>Read me</h1>" in page.content
    assert client.post(guide_url, {"version": 1, "next": "realism"}).url == reverse(
        "reading_next", args=[study.slug, Task.REALISM]
    )
    response = client.get(reverse("reading_next", args=[study.slug, Task.REALISM]))
    assert response.url == reverse("reading_page", args=[assignment.public_id])


def test_after_a_change_the_reader_sees_what_changed_and_confirms_again(client, reading):
    study, reader, _ = reading
    publish_guide(study, "Line kept.\nLine removed.", author=None)
    confirm_guide(reader, study, 1)
    client.force_login(reader)
    first = _first_open(reader)
    client.get(reverse("reading_page", args=[first.public_id]))
    publish_guide(study, "Line kept.\nLine added.", author=None)

    # The item on screen is rated; the next one waits for the new version (htmx: a client redirect).
    response = client.post(
        reverse("reading_page", args=[first.public_id]),
        {"rating": RatingChoice.REALISTIC, "rationale": "", "form_token": "6f1c2a4e-0d5b-4c8e-9a7f-3b2d1e0c9a8b"},
        HTTP_HX_REQUEST="true",
    )
    assert response.headers["HX-Redirect"] == reverse("reader_guide", args=[study.slug]) + "?next=realism"
    # The rating records the version the reader had confirmed when they made it.
    assert Annotation.objects.get().guide_version.number == 1

    page = client.get(response.headers["HX-Redirect"]).content.decode()
    assert "What changed since version 1" in page
    assert '<li class="removed"><del><span class="visually-hidden">Removed: </span>Line removed.</del></li>' in page
    assert '<li class="added"><ins><span class="visually-hidden">Added: </span>Line added.</ins></li>' in page
    client.post(reverse("reader_guide", args=[study.slug]), {"version": 2})
    second = _first_open(reader)
    assert client.get(reverse("reading_page", args=[second.public_id])).status_code == 200


def test_confirming_a_version_that_is_no_longer_current_is_explained(client, reading):
    study, reader, _ = reading
    publish_guide(study, "One.", author=None)
    publish_guide(study, "Two.", author=None)
    client.force_login(reader)

    response = client.post(reverse("reader_guide", args=[study.slug]), {"version": 1})

    assert response.status_code == 409
    assert "The guide changed while you were reading it" in response.content.decode()
    assert not GuideAcknowledgement.objects.exists()


def test_an_adjudicator_confirms_the_guide_before_adjudicating(client, reading):
    from consensus.models import Adjudication

    study, _, adjudicator = reading
    publish_guide(study, "Guide.", author=None)
    example = study.examples.first()
    adjudication = Adjudication.objects.create(example=example, adjudicator=adjudicator, task=example.task)
    client.force_login(adjudicator)

    response = client.get(reverse("adjudication_page", args=[adjudication.public_id]))

    assert response.status_code == 302 and response.url.startswith(reverse("reader_guide", args=[study.slug]))


def test_the_guide_is_one_click_away_on_the_reading_page(client, reading):
    study, reader, _ = reading
    publish_guide(study, "**Bold** guide.", author=None)
    confirm_guide(reader, study, 1)
    client.force_login(reader)

    page = client.get(reverse("reading_page", args=[_first_open(reader).public_id])).content.decode()

    assert 'id="guide-dialog"' in page and "<strong>Bold</strong> guide." in page
    assert "data-opens-guide" in page


def test_the_guide_page_is_only_for_the_studys_readers(client, reading):
    study, _, _ = reading
    publish_guide(study, "Guide.", author=None)
    client.force_login(make_user(Role.READER))

    assert client.get(reverse("reader_guide", args=[study.slug])).status_code == 404


def test_a_study_without_a_guide_costs_no_query(reading):
    study, reader, _ = reading
    from annotation.practice import pending_step

    with CaptureQueriesContext(connection) as captured:
        assert pending_step(reader, study, Task.REALISM) is None
    assert len(captured) == 0


# --- The coordinator ------------------------------------------------------------------------------


def test_the_coordinator_writes_versions_and_sees_who_confirmed_which(client, reading):
    study, reader, _ = reading
    coordinator = make_user(Role.COORDINATOR)
    client.force_login(coordinator)
    url = reverse("study_guide", args=[study.slug])

    client.post(url, {"text": "First."})
    confirm_guide(reader, study, 1)
    client.post(url, {"text": "Second."})
    page = client.get(url).content.decode()

    assert [v.author for v in GuideVersion.objects.all()] == [coordinator, coordinator]
    assert "Version 2</a> (current)" in page
    assert f"<td>{reader.username}</td>" in page and "(not the current one)" in page
    assert "First." in client.get(url + "?version=1").content.decode()


def test_only_coordinators_edit_the_guide(client, reading):
    study, reader, _ = reading
    client.force_login(reader)

    assert client.post(reverse("study_guide", args=[study.slug]), {"text": "x"}).status_code == 403
    assert not GuideVersion.objects.exists()


def test_the_guide_page_query_count_does_not_grow_with_the_readers(client):
    coordinator = make_user(Role.COORDINATOR)
    client.force_login(coordinator)
    counts = []
    for readers in (2, 8):
        study, members, _ = make_reading_study(pairs=1, readers=readers, keep_versions_apart=False)
        publish_guide(study, "Guide.", author=coordinator)
        for member in members:
            confirm_guide(member, study, 1)
        url = reverse("study_guide", args=[study.slug])
        client.get(url)
        with CaptureQueriesContext(connection) as captured:
            assert client.get(url).status_code == 200
        counts.append(len(captured))
    assert counts[0] == counts[1]


# --- The API --------------------------------------------------------------------------------------


def test_the_reader_api_waits_for_the_guide_then_serves_items(reading):
    from django.test import Client

    study, reader, _ = reading
    publish_guide(study, "Guide text.", author=None)
    client = Client(HTTP_AUTHORIZATION=f"Token {make_token(reader)}")

    refused = client.get("/api/reading/next/?task=realism")
    assert refused.status_code == 409 and refused.json()["required"] == "guide"
    guide = client.get(f"/api/reading/guide/?study={study.slug}").json()
    assert (guide["version"], guide["needs_confirmation"], guide["text"]) == (1, True, "Guide text.")
    confirmed = client.post("/api/reading/guide/", {"study": study.slug, "version": 1}, content_type=JSON)
    assert confirmed.status_code == 201
    assert client.get("/api/reading/next/?task=realism").status_code == 200


def test_the_coordinator_api_saves_versions(reading):
    from django.test import Client

    study, reader, _ = reading
    coordinator = make_user(Role.COORDINATOR)
    client = Client(HTTP_AUTHORIZATION=f"Token {make_token(coordinator)}")
    url = f"/api/studies/{study.slug}/guide/"

    assert client.post(url, {"text": "One."}, content_type=JSON).status_code == 201
    assert client.post(url, {"text": "One."}, content_type=JSON).status_code == 200
    assert client.post(url, {"text": "  "}, content_type=JSON).status_code == 400
    body = client.get(url).json()
    assert (body["version"], len(body["versions"])) == (1, 1)
    reader_client = Client(HTTP_AUTHORIZATION=f"Token {make_token(reader)}")
    assert reader_client.post(url, {"text": "x"}, content_type=JSON).status_code == 403
