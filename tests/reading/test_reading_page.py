"""The reading page: one blinded item, its rating form, and the htmx flow through the queue."""

import re
import uuid
from datetime import timedelta

import pytest
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext
from django.urls import reverse
from django.utils import timezone

from annotation.models import Annotation, Assignment, AssignmentStatus, AuditEvent, RatingChoice, ReportType, Role, Task
from annotation.reading import RATING_DEFINITIONS
from tests.factories import make_assignment, make_example, make_pair, make_reading_study, make_study, make_user, rate

pytestmark = pytest.mark.django_db

REALISM_LABELS = [
    (RatingChoice.REALISTIC, "Realistic"),
    (RatingChoice.MINOR_ISSUES, "Minor Issues"),
    (RatingChoice.MAJOR_ISSUES, "Major Issues"),
]
EQUIVALENCE_LABELS = [
    (RatingChoice.EQUIVALENT, "Equivalent"),
    (RatingChoice.MINOR_DISCREPANCY, "Minor Discrepancy"),
    (RatingChoice.MAJOR_DISCREPANCY, "Major Discrepancy"),
]


def _queue(reader, n: int = 3, *, task: str = Task.REALISM, study=None) -> list[Assignment]:
    """n open assignments of one task in the reader's queue, in queue order."""
    study = study or make_study()
    queue = []
    # Created last to first, so that the queue order runs against the primary keys.
    for position in reversed(range(n)):
        pair = make_pair(
            study,
            indication=f"Indication {position}.",
            comparison=f"Comparison {position}.",
            technique=f"Technique {position}.",
            original_findings=f"Original findings {position}.",
            original_impression=f"Original impression {position}.",
            alternative_findings=f"Other findings {position}.",
            alternative_impression=f"Other impression {position}.",
        )
        if task == Task.REALISM:
            example = make_example(pair, task=Task.REALISM, report_type=ReportType.ORIGINAL)
        else:
            example = make_example(pair)
        queue.append(make_assignment(example, reader, queue_order=position))
    return queue[::-1]


def _url(assignment: Assignment) -> str:
    return reverse("reading_page", args=[assignment.public_id])


def _rating(rating: str = RatingChoice.REALISTIC, rationale: str = "", token: uuid.UUID | None = None) -> dict:
    return {"rating": rating, "rationale": rationale, "form_token": token or uuid.uuid4()}


@pytest.fixture
def queue(client, reader) -> list[Assignment]:
    client.force_login(reader)
    return _queue(reader)


def test_it_shows_the_context_apart_then_findings_and_impression(client, queue):
    html = client.get(_url(queue[0])).content.decode()

    context = html.index('<section class="context"')
    report = html.index('<section class="report"')
    order = [html.index(text) for text in ("Indication", "Comparison", "Technique", "Findings", "Impression")]
    assert context < order[0] < order[1] < order[2] < report < order[3] < order[4]
    assert "(not rated)" in html[context:report]
    for text in ("Indication 0.", "Comparison 0.", "Technique 0."):
        assert context < html.index(text) < report
    assert report < html.index("Original findings 0.") < html.index("Original impression 0.")


@pytest.mark.parametrize(("task", "labels"), [(Task.REALISM, REALISM_LABELS), (Task.EQUIVALENCE, EQUIVALENCE_LABELS)])
def test_it_shows_the_three_labels_with_the_protocols_definitions(client, reader, task, labels):
    client.force_login(reader)
    assignment = _queue(reader, 1, task=task)[0]

    html = client.get(_url(assignment)).content.decode()

    for value, label in labels:
        assert f'value="{value}"' in html
        assert label in html
        assert RATING_DEFINITIONS[value] in html
    assert html.count('type="radio"') == 3


def test_the_labels_are_a_radio_group_in_a_fieldset_with_a_legend(client, queue):
    html = client.get(_url(queue[0])).content.decode()

    fieldset = re.search(r"<fieldset>(.*?)</fieldset>", html, re.DOTALL).group(1)
    assert re.search(r"<legend>\s*Is this report realistic\?.*?</legend>", fieldset)
    radios = re.findall(r'<input type="radio" name="rating"[^>]*>', fieldset)
    assert len(radios) == 3
    for radio in radios:
        input_id = re.search(r'id="([^"]+)"', radio).group(1)
        assert html.count(f'id="{input_id}"') == 1
        assert re.search(rf'<label for="{input_id}">', fieldset), input_id
    assert re.search(r'<label for="rationale">', html)
    assert re.search(r'<textarea name="rationale" id="rationale"', html)


def test_a_get_starts_the_time_on_task_once(client, queue):
    client.get(_url(queue[0]))
    queue[0].refresh_from_db()
    first_shown = queue[0].first_shown_at

    client.get(_url(queue[0]))
    queue[0].refresh_from_db()

    assert first_shown is not None
    assert queue[0].first_shown_at == first_shown


def test_it_names_the_study_and_leads_back_to_the_queues(client, reader):
    client.force_login(reader)
    assignment = _queue(reader, 1, study=make_study("chest-2026", name="Chest reports 2026"))[0]

    html = client.get(_url(assignment)).content.decode()

    study_nav = re.search(r'<nav class="reading-study".*?</nav>', html, re.DOTALL).group(0)
    assert "Chest reports 2026" in study_nav
    assert f'<a href="{reverse("reader_home")}">Back to your queues</a>' in study_nav


EMPTY_SECTION = '<span class="empty-section">empty section</span>'


@pytest.mark.parametrize("report_type", [ReportType.ORIGINAL, ReportType.ALTERNATIVE])
def test_an_empty_section_has_one_marker_that_is_not_report_text(client, reader, report_type):
    client.force_login(reader)
    pair = make_pair(
        make_study(),
        comparison="",
        original_findings="",
        original_impression="None.",
        alternative_findings="",
        alternative_impression="None.",
    )
    assignment = make_assignment(make_example(pair, task=Task.REALISM, report_type=report_type), reader)

    html = client.get(_url(assignment)).content.decode()

    # The empty comparison and the empty findings get the same marker, outside the report text's
    # <bdi>; the report's own "None." stays what it is.
    assert html.count(EMPTY_SECTION) == 2
    assert "<bdi>None.</bdi>" in html
    assert "None given" not in html and ">None<" not in html


def test_it_says_which_item_of_the_queue_this_is(client, queue):
    assert ">Item 1</span>" in client.get(_url(queue[0])).content.decode()


def test_an_htmx_post_swaps_in_the_next_item(client, queue):
    client.get(_url(queue[0]))

    response = client.post(_url(queue[0]), _rating(), HTTP_HX_REQUEST="true")

    assert response.status_code == 200
    html = response.content.decode()
    assert html.lstrip().startswith('<div id="reading"')
    assert "<html" not in html
    assert response["HX-Push-Url"] == _url(queue[1])
    assert ">Item 2</span>" in html
    assert "Original findings 1." in html
    assert f'hx-post="{_url(queue[1])}"' in html
    assert Annotation.objects.get().assignment == queue[0]
    queue[1].refresh_from_db()
    assert queue[1].first_shown_at is not None  # the swapped-in item is shown now


def test_the_last_htmx_post_says_the_queue_is_finished(client, queue):
    for assignment in queue[:2]:
        rate(assignment, RatingChoice.REALISTIC, "")
    client.get(_url(queue[2]))

    response = client.post(_url(queue[2]), _rating(), HTTP_HX_REQUEST="true")

    assert response.status_code == 200
    html = response.content.decode()
    assert 'id="reading"' in html
    assert "Nothing is waiting for you in Task 1: Realism now" in html
    assert response["HX-Push-Url"] == reverse("reader_home")
    assert Assignment.objects.open().count() == 0


def test_a_post_without_htmx_redirects_to_the_next_item(client, queue):
    client.get(_url(queue[0]))

    response = client.post(_url(queue[0]), _rating())

    assert response.status_code == 302
    assert response["Location"] == _url(queue[1])
    assert Annotation.objects.count() == 1


def test_the_last_post_without_htmx_redirects_home(client, queue):
    for assignment in queue[:2]:
        rate(assignment, RatingChoice.REALISTIC, "")
    client.get(_url(queue[2]))

    response = client.post(_url(queue[2]), _rating())

    assert response.status_code == 302
    assert response["Location"] == reverse("reader_home")


def test_the_same_form_sent_twice_stores_one_rating(client, queue):
    data = _rating(RatingChoice.MINOR_ISSUES, "Odd word order.")
    client.get(_url(queue[0]))

    first = client.post(_url(queue[0]), data, HTTP_HX_REQUEST="true")
    second = client.post(_url(queue[0]), data, HTTP_HX_REQUEST="true")

    assert first.status_code == second.status_code == 200
    assert Annotation.objects.count() == 1


@pytest.mark.parametrize("headers", [{}, {"HTTP_HX_REQUEST": "true"}], ids=["page", "htmx"])
@pytest.mark.parametrize(
    ("rating", "error"),
    [
        ("excellent", "Select a valid choice."),
        (RatingChoice.EQUIVALENT, "Select a valid choice."),  # a Task 2 label on a Task 1 item
        ("", "Choose a rating."),
    ],
)
def test_an_invalid_label_is_refused_and_the_rationale_kept(client, queue, headers, rating, error):
    response = client.post(_url(queue[0]), _rating(rating, "Typed before the mistake."), **headers)

    assert response.status_code == 422
    html = response.content.decode()
    assert error in html
    assert 'id="rating-error"' in html
    assert ">Typed before the mistake.</textarea>" in html
    assert not Annotation.objects.exists()
    queue[0].refresh_from_db()
    assert queue[0].status == AssignmentStatus.OPEN


@pytest.mark.parametrize("headers", [{}, {"HTTP_HX_REQUEST": "true"}], ids=["page", "htmx"])
@pytest.mark.parametrize("rationale", ["", "   \n "])
def test_a_missing_rationale_is_refused(client, queue, headers, rationale):
    token = uuid.uuid4()
    client.get(_url(queue[0]))

    response = client.post(_url(queue[0]), _rating(RatingChoice.MAJOR_ISSUES, rationale, token), **headers)

    assert response.status_code == 422
    html = response.content.decode()
    assert "A rationale is required for Major Issues" in html
    assert 'id="rationale-error"' in html
    assert f'value="{RatingChoice.MAJOR_ISSUES}" id="rating-3"' in html
    assert re.search(rf'value="{RatingChoice.MAJOR_ISSUES}"[^>]*checked', html)
    assert f'value="{token}"' in html  # the same form, so a retry is still one submission
    assert not Annotation.objects.exists()


@pytest.mark.parametrize("headers", [{}, {"HTTP_HX_REQUEST": "true"}], ids=["page", "htmx"])
def test_a_rating_of_an_item_never_shown_is_refused_and_the_item_shown(client, queue, headers):
    events = AuditEvent.objects.count()

    response = client.post(_url(queue[0]), _rating(RatingChoice.MINOR_ISSUES, "Typed blind."), **headers)

    assert response.status_code == 422
    html = response.content.decode()
    assert "This item had not been opened, so the rating was not stored." in html
    assert "Original findings 0." in html
    assert ">Typed blind.</textarea>" in html
    assert not Annotation.objects.exists()
    assert AuditEvent.objects.count() == events
    queue[0].refresh_from_db()
    assert queue[0].status == AssignmentStatus.OPEN
    assert queue[0].first_shown_at is not None  # the answer showed it: now it can be rated
    assert client.post(_url(queue[0]), _rating(), **headers).status_code in (200, 302)
    assert Annotation.objects.get().assignment == queue[0]


def test_an_already_rated_item_is_a_409_shown_read_only(client, queue):
    rate(queue[0], RatingChoice.MINOR_ISSUES, "My first reason.")

    response = client.post(_url(queue[0]), _rating(RatingChoice.REALISTIC), HTTP_HX_REQUEST="true")

    assert response.status_code == 409
    html = response.content.decode()
    assert "already rated" in html
    assert 'id="rating-form"' not in html
    assert "Minor Issues" in html and "My first reason." in html
    assert Annotation.objects.get().rating == RatingChoice.MINOR_ISSUES


def test_a_rated_item_shows_the_stored_rating_without_a_form(client, queue):
    rate(queue[0], RatingChoice.MAJOR_ISSUES, "Contradicts itself.")

    response = client.get(_url(queue[0]))

    html = response.content.decode()
    assert response.status_code == 200
    assert "<form" not in html.split('<div id="reading"', 1)[1]
    assert "Your rating" in html
    assert "Major Issues" in html
    assert "Contradicts itself." in html
    assert reverse("reading_next", args=[queue[0].example.study.slug, Task.REALISM]) in html


def test_it_stores_the_time_on_task(client, queue):
    client.get(_url(queue[0]))
    Assignment.objects.filter(pk=queue[0].pk).update(first_shown_at=timezone.now() - timedelta(seconds=95))

    client.post(_url(queue[0]), _rating(), HTTP_HX_REQUEST="true")

    duration = Annotation.objects.get().duration_ms
    assert 95_000 <= duration < 95_000 + 60_000


def test_it_requires_the_reader_role(client, coordinator, reader):
    assignment = _queue(reader, 1)[0]
    client.force_login(coordinator)

    assert client.get(_url(assignment)).status_code == 403
    assert client.post(_url(assignment), _rating()).status_code == 403
    assert client.post(_url(assignment), _rating(), HTTP_HX_REQUEST="true").status_code == 403
    assert not Annotation.objects.exists()


def test_an_anonymous_get_redirects_to_the_login_page(client, reader):
    assignment = _queue(reader, 1)[0]

    response = client.get(_url(assignment))

    assert response.status_code == 302
    assert response["Location"] == f"{reverse('login')}?next={_url(assignment)}"


def test_an_anonymous_htmx_post_redirects_the_page_to_the_login_page(client, reader):
    assignment = _queue(reader, 1)[0]

    response = client.post(_url(assignment), _rating(), HTTP_HX_REQUEST="true")

    assert response["HX-Redirect"] == f"{reverse('login')}?next={_url(assignment)}"
    assert not Annotation.objects.exists()


# --- Task 2: Report A and Report B ---------------------------------------------------------------


def _shown_findings(html: str) -> dict[str, str]:
    """Heading -> findings text of each report on the page."""
    sections = re.findall(
        r'<h2 id="report-heading-\d">([^<]+)</h2>\s*<h3>Findings</h3>\s*<div class="report-text"><bdi>([^<]*)</bdi>',
        html,
    )
    return dict(sections)


def test_task_2_shows_report_a_and_report_b_in_a_stable_order(client, reader):
    client.force_login(reader)
    assignment = _queue(reader, 1, task=Task.EQUIVALENCE)[0]

    first = _shown_findings(client.get(_url(assignment)).content.decode())
    second = _shown_findings(client.get(_url(assignment)).content.decode())

    assert list(first) == ["Report A", "Report B"]
    assert first == second
    assert set(first.values()) == {"Original findings 0.", "Other findings 0."}
    assignment.refresh_from_db()
    expected = "Original findings 0." if assignment.report_a_type == ReportType.ORIGINAL else "Other findings 0."
    assert first["Report A"] == expected


@pytest.mark.parametrize("first_to_open", [0, 1], ids=["slot-1-first", "slot-2-first"])
def test_the_two_initial_readers_see_opposite_orders(first_to_open):
    study = make_study()
    readers = [make_user(Role.READER), make_user(Role.READER)]
    clients = []
    for user in readers:
        clients.append(Client())
        clients[-1].force_login(user)
    pairs = []
    for _ in range(6):  # enough examples for the first reader's draw to go both ways
        example = make_example(make_pair(study))
        pairs.append([make_assignment(example, user, slot=slot) for slot, user in enumerate(readers, start=1)])

    for assignments in pairs:
        for index in (first_to_open, 1 - first_to_open):
            html = clients[index].get(_url(assignments[index])).content.decode()
            assignments[index].refresh_from_db()
            pair = assignments[index].example.pair
            a_findings = pair.report(assignments[index].report_a_type)[0]
            assert _shown_findings(html)["Report A"] == a_findings

    for first, second in pairs:
        assert {first.report_a_type, second.report_a_type} == {ReportType.ORIGINAL, ReportType.ALTERNATIVE}


def test_a_third_reader_gets_an_order_too(client):
    study = make_study()
    third_reader = make_user(Role.READER)
    client.force_login(third_reader)
    example = make_example(make_pair(study))
    for slot in (1, 2):
        make_assignment(example, make_user(Role.READER), slot=slot, report_a_type=ReportType.ORIGINAL)
    third = make_assignment(example, third_reader, slot=3)

    html = client.get(_url(third)).content.decode()

    third.refresh_from_db()
    assert third.report_a_type in ReportType.values
    assert _shown_findings(html)["Report A"] == example.pair.report(third.report_a_type)[0]


def test_the_stored_rating_keeps_the_order_shown(client, reader):
    client.force_login(reader)
    assignment = _queue(reader, 1, task=Task.EQUIVALENCE)[0]
    shown = _shown_findings(client.get(_url(assignment)).content.decode())

    client.post(_url(assignment), _rating(RatingChoice.EQUIVALENT), HTTP_HX_REQUEST="true")

    assignment.refresh_from_db()
    assert Annotation.objects.get().report_a_type == assignment.report_a_type
    assert _shown_findings(client.get(_url(assignment)).content.decode()) == shown


# --- Query budget --------------------------------------------------------------------------------


def _queries(call) -> int:
    with CaptureQueriesContext(connection) as captured:
        response = call()
    assert response.status_code in (200, 302, 422), response.status_code
    return len(captured)


def _measure(pairs: int) -> dict[str, int]:
    # Four readers, the fewest who can read the study: each has half its items, in both tasks.
    _, readers, _ = make_reading_study(pairs=pairs, readers=4, keep_versions_apart=False)
    reader = readers[0]
    realism = list(Assignment.objects.filter(reader=reader, example__task=Task.REALISM).order_by("queue_order", "pk"))
    equivalence = (
        Assignment.objects.filter(reader=reader, example__task=Task.EQUIVALENCE).order_by("queue_order").first()
    )
    client = Client()
    client.force_login(reader)
    # Warm up: sessions, permissions and content types are cached after the first requests.
    client.get(_url(realism[0]))
    client.post(_url(realism[0]), _rating(), HTTP_HX_REQUEST="true")
    return {
        "get": _queries(lambda: client.get(_url(realism[1]))),
        "htmx post": _queries(lambda: client.post(_url(realism[1]), _rating(), HTTP_HX_REQUEST="true")),
        "post": _queries(lambda: client.post(_url(realism[2]), _rating())),
        "get, first time": _queries(lambda: client.get(_url(realism[3]))),
        "get, first time, task 2": _queries(lambda: client.get(_url(equivalence))),
        "invalid post": _queries(lambda: client.post(_url(realism[3]), _rating(RatingChoice.MAJOR_ISSUES))),
    }


def test_the_query_count_does_not_grow_with_the_study():
    small, large = _measure(4), _measure(15)

    assert small == large
    assert max(large.values()) <= 30, large
