"""The reader's home: one progress bar per queue, Continue, and the adjudication queue."""

import re

import pytest
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext
from django.urls import reverse

from annotation.models import Assignment, MemberRole, RatingChoice, ReportType, Role, StudyMember, Task
from annotation.roles import grant_role
from consensus.models import Adjudication, AdjudicationStatus
from tests.factories import make_assignment, make_example, make_pair, make_reading_study, make_study, make_user, rate

pytestmark = pytest.mark.django_db


def _queue(reader, study, task: str, orders: list[int]) -> list[Assignment]:
    queue = []
    for order in orders:
        pair = make_pair(study)
        if task == Task.REALISM:
            example = make_example(pair, task=task, report_type=ReportType.ORIGINAL)
        else:
            example = make_example(pair)
        queue.append(make_assignment(example, reader, queue_order=order))
    return queue


@pytest.fixture
def study(db):
    return make_study("pilot", name="Pilot study")


@pytest.fixture
def queues(client, reader, study) -> dict[str, list[Assignment]]:
    client.force_login(reader)
    return {
        Task.REALISM: _queue(reader, study, Task.REALISM, [30, 10, 20]),
        Task.EQUIVALENCE: _queue(reader, study, Task.EQUIVALENCE, [5, 1]),
    }


def _card(html: str, heading: str) -> str:
    match = re.search(rf"<h3>{re.escape(heading)}</h3>(.*?)</li>", html, re.DOTALL)
    assert match, f"no card {heading!r}"
    return match.group(1)


def test_it_shows_done_of_assigned_per_task(client, queues):
    rate(queues[Task.REALISM][0], RatingChoice.REALISTIC, "")

    html = client.get(reverse("reader_home")).content.decode()

    realism = _card(html, "Task 1: Realism")
    assert '<h2 id="study-pilot">Pilot study</h2>' in html
    assert "1 rated" in realism
    # No total: it would grow when a third read arrives.
    assert "of 3" not in realism and "<progress" not in realism
    equivalence = _card(html, "Task 2: Clinical equivalence")
    assert "0 rated" in equivalence


def test_continue_leads_to_the_first_open_assignment_in_queue_order(client, queues, study):
    html = client.get(reverse("reader_home")).content.decode()
    continue_url = reverse("reading_next", args=[study.slug, Task.REALISM])
    assert f'href="{continue_url}"' in html
    assert continue_url == f"/read/{study.slug}/realism/next/"

    response = client.get(continue_url)

    assert response.status_code == 302
    lowest = min(queues[Task.REALISM], key=lambda a: a.queue_order)
    assert response["Location"] == reverse("reading_page", args=[lowest.public_id])


def test_continue_skips_rated_assignments(client, queues, study):
    realism = sorted(queues[Task.REALISM], key=lambda a: a.queue_order)
    rate(realism[0], RatingChoice.REALISTIC, "")

    response = client.get(reverse("reading_next", args=[study.slug, Task.REALISM]))

    assert response["Location"] == reverse("reading_page", args=[realism[1].public_id])


def test_a_finished_queue_sends_the_reader_home_with_a_message(client, queues, study):
    for assignment in queues[Task.REALISM]:
        rate(assignment, RatingChoice.REALISTIC, "")

    response = client.get(reverse("reading_next", args=[study.slug, Task.REALISM]), follow=True)

    assert response.redirect_chain == [(reverse("reader_home"), 302)]
    html = response.content.decode()
    assert "Nothing is waiting for you in Task 1: Realism now" in html
    realism = _card(html, "Task 1: Realism")
    assert "Nothing is waiting for you now. More items may come" in realism
    assert "Continue" not in realism
    assert "Continue" in _card(html, "Task 2: Clinical equivalence")


def test_continue_refuses_an_unknown_task_or_study(client, queues, study):
    assert client.get(f"/read/{study.slug}/ranking/next/").status_code == 404
    assert client.get("/read/no-such-study/realism/next/").status_code == 404


def test_a_study_that_is_not_the_readers_answers_like_one_that_does_not_exist(client, queues, study):
    other = make_study("someone-elses")
    make_user(Role.READER)  # the other study has readers of its own, not this one

    existing = client.get(reverse("reading_next", args=[other.slug, Task.REALISM]))
    missing = client.get(reverse("reading_next", args=["no-such-study", Task.REALISM]))

    assert existing.status_code == missing.status_code == 404
    assert existing.content == missing.content
    # Another task or study id in the URL: still the same 404.
    assert client.get(f"/read/{other.slug}/ranking/next/").status_code == 404


@pytest.mark.parametrize(
    "url",
    [
        "/studies/{slug}/",
        "/studies/{slug}/progress/",
        "/studies/{slug}/readers/",
        "/studies/{slug}/releases/",
        "/studies/{slug}/examples/6f1c2a4e-0d5b-4c8e-9a7f-3b2d1e0c9a8b/",
        "/api/studies/{slug}/progress/",
        "/api/studies/{slug}/releases/",
        "/api/reading/next/?task=realism&study={slug}",
    ],
)
def test_no_url_tells_a_reader_which_studies_exist(client, queues, url):
    make_study("someone-elses")

    existing = client.get(url.format(slug="someone-elses"))
    missing = client.get(url.format(slug="no-such-study"))

    assert existing.status_code == missing.status_code
    assert existing.content == missing.content


def test_an_enrolled_reader_with_nothing_assigned_yet_is_sent_home(client, reader):
    study = make_study("enrolled")
    StudyMember.objects.create(study=study, user=reader, role=MemberRole.READER)
    client.force_login(reader)

    response = client.get(reverse("reading_next", args=[study.slug, Task.REALISM]))

    assert response.status_code == 302
    assert response["Location"] == reverse("reader_home")


def test_a_reader_with_nothing_assigned_is_told_so(client, reader):
    client.force_login(reader)

    html = client.get(reverse("reader_home")).content.decode()

    assert "Nothing has been assigned to you yet." in html
    assert "Adjudication" not in html


def test_it_shows_nothing_about_other_readers(client, queues, study):
    other = make_user(Role.READER, username="other-reader-zebulon")
    example = queues[Task.REALISM][0].example
    rate(make_assignment(example, other, slot=2), RatingChoice.MAJOR_ISSUES, "Zebulon's secret reason.")
    _queue(other, study, Task.EQUIVALENCE, [1, 2, 3, 4])

    html = client.get(reverse("reader_home")).content.decode()

    assert "zebulon" not in html.lower()
    assert "0 rated" in _card(html, "Task 1: Realism")
    assert "0 rated" in _card(html, "Task 2: Clinical equivalence")
    assert "Major Issues" not in html


@pytest.fixture
def adjudicator(client):
    user = make_user(Role.ADJUDICATOR, username="adjudicator")
    client.force_login(user)
    return user


def _adjudication(study, adjudicator, **fields) -> Adjudication:
    example = make_example(make_pair(study))
    return Adjudication.objects.create(example=example, adjudicator=adjudicator, task=Task.EQUIVALENCE, **fields)


def test_an_adjudicator_sees_the_adjudication_queue(client, adjudicator, study):
    _adjudication(study, adjudicator)
    _adjudication(study, adjudicator, status=AdjudicationStatus.VOIDED)
    _adjudication(study, make_user(Role.ADJUDICATOR))  # someone else's

    response = client.get(reverse("reader_home"))

    assert response.status_code == 200
    html = response.content.decode()
    assert "0 of 1 done" in _card(html, "Adjudication")
    assert "Nothing has been assigned to you yet." not in html


def test_continue_leads_to_the_adjudicators_next_adjudication(client, adjudicator, study):
    first = _adjudication(study, adjudicator)
    _adjudication(study, adjudicator)

    html = client.get(reverse("reader_home")).content.decode()
    continue_url = reverse("adjudication_next", args=[study.slug])
    assert f'href="{continue_url}"' in _card(html, "Adjudication")

    response = client.get(continue_url)

    assert response["Location"] == reverse("adjudication_page", args=[first.public_id])


def test_an_adjudicator_with_nothing_waiting_is_told_so(client, adjudicator, study):
    html = client.get(reverse("reader_home")).content.decode()

    assert "Nothing has been assigned to you yet. No adjudication is waiting for you." in html

    decided = _adjudication(
        study, adjudicator, status=AdjudicationStatus.DONE, rating=RatingChoice.EQUIVALENT, rationale="Same."
    )
    html = client.get(reverse("reader_home")).content.decode()

    assert "1 of 1 done" in _card(html, "Adjudication")
    assert "No adjudication is waiting for you in this study." in html
    response = client.get(reverse("adjudication_next", args=[study.slug]), follow=True)
    assert response.redirect_chain == [(reverse("reader_home"), 302)]
    assert decided.public_id


def test_the_adjudication_queue_is_shown_per_study(client, adjudicator, study):
    other = make_study("second", name="Second study")
    _adjudication(study, adjudicator)
    _adjudication(study, adjudicator, status=AdjudicationStatus.DONE, rating=RatingChoice.EQUIVALENT, rationale="Same.")
    _adjudication(other, adjudicator)

    html = client.get(reverse("reader_home")).content.decode()

    pilot = html.split('id="study-pilot"', 1)[1].split("</section>", 1)[0]
    second = html.split('id="study-second"', 1)[1].split("</section>", 1)[0]
    assert "1 of 2 done" in pilot
    assert "0 of 1 done" in second
    assert reverse("adjudication_next", args=["second"]) in second


def test_an_adjudicator_cannot_continue_in_a_study_without_their_adjudications(client, adjudicator, study):
    _adjudication(study, make_user(Role.ADJUDICATOR))
    assert client.get(reverse("adjudication_next", args=[study.slug])).status_code == 404


def test_cards_are_grouped_by_study_unfinished_first_task_1_before_task_2(client, reader, study):
    client.force_login(reader)
    finished = make_study("aaa-finished", name="Aaa finished study")
    for assignment in _queue(reader, finished, Task.REALISM, [1]) + _queue(reader, finished, Task.EQUIVALENCE, [1]):
        rate(
            assignment,
            RatingChoice.REALISTIC if assignment.example.task == Task.REALISM else RatingChoice.EQUIVALENT,
            "",
        )
    _queue(reader, study, Task.EQUIVALENCE, [1])
    _queue(reader, study, Task.REALISM, [1])

    html = client.get(reverse("reader_home")).content.decode()

    # The study with work comes first, although its name sorts after the finished one.
    assert html.index('id="study-pilot"') < html.index('id="study-aaa-finished"')
    pilot = html.split('id="study-pilot"', 1)[1].split("</section>", 1)[0]
    assert pilot.index("Task 1: Realism") < pilot.index("Task 2: Clinical equivalence")
    finished_card = html.split('id="study-aaa-finished"', 1)[1]
    assert finished_card.index("Task 1: Realism") < finished_card.index("Task 2: Clinical equivalence")


def test_a_reader_who_adjudicates_sees_both(client, study):
    user = make_user(Role.READER, Role.ADJUDICATOR)
    client.force_login(user)
    _queue(user, study, Task.REALISM, [1])
    _adjudication(study, user)

    html = client.get(reverse("reader_home")).content.decode()

    assert "0 rated" in _card(html, "Task 1: Realism")
    assert "0 of 1 done" in _card(html, "Adjudication")


def test_it_requires_the_reader_or_adjudicator_role(client, coordinator):
    client.force_login(coordinator)

    assert client.get(reverse("reader_home")).status_code == 403
    assert client.get("/read/pilot/realism/next/").status_code == 403


def test_it_requires_a_login(client):
    response = client.get(reverse("reader_home"))

    assert response.status_code == 302
    assert response["Location"] == f"{reverse('login')}?next={reverse('reader_home')}"


def test_an_adjudicator_who_does_not_read_cannot_continue_a_reading_queue(client, adjudicator, study):
    assert client.get(reverse("reading_next", args=[study.slug, Task.REALISM])).status_code == 403


def _home_queries(pairs: int) -> int:
    study, readers, _ = make_reading_study(pairs=pairs, readers=6)
    # A reader with both tasks (one item per exam: which tasks a reader has depends on the seed).
    user = next(r for r in readers if len({a.task for a in Assignment.objects.filter(reader=r)}) == 2)
    grant_role(user, Role.ADJUDICATOR)
    for example in study.examples.all()[:3]:
        Adjudication.objects.create(example=example, adjudicator=user, task=example.task)
    for assignment in Assignment.objects.filter(reader=user)[:1]:
        rate(
            assignment,
            RatingChoice.REALISTIC if assignment.example.task == Task.REALISM else RatingChoice.EQUIVALENT,
            "",
        )
    client = Client()
    client.force_login(user)
    client.get(reverse("reader_home"))  # warm up
    with CaptureQueriesContext(connection) as captured:
        response = client.get(reverse("reader_home"))
    assert response.status_code == 200
    assert response.content.decode().count(" rated</p>") == 2  # one card per task
    return len(captured)


def test_the_query_count_does_not_grow_with_the_study():
    small, large = _home_queries(2), _home_queries(15)

    assert small == large
    assert large <= 12
