import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.urls import reverse

from annotation.models import Assignment, AuditAction, Example, MemberRole, RatingChoice, Role, StudyMember, Task
from consensus.assignment import add_study_member
from consensus.services import void_annotation
from tests.factories import make_reading_study, make_user, rate_open_reads

pytestmark = pytest.mark.django_db


def _url(study, user) -> str:
    return reverse("reader_detail", args=[study.slug, user.username])


def _first_example(study) -> Example:
    return Example.objects.filter(study=study, task=Task.REALISM).order_by("pk").first()


def test_it_lists_the_readers_assignments_with_links_to_the_examples(client, coordinator):
    # Six readers for two exams: each reader has one item of each (two assignments).
    study, readers, _ = make_reading_study(pairs=2, readers=6)
    reader = readers[0]
    client.force_login(coordinator)

    response = client.get(_url(study, reader))

    assert response.status_code == 200
    detail = response.context["detail"]
    assignments = list(reader.assignments.all())
    assert {a.pk for a in detail.assignments} == {a.pk for a in assignments}
    html = response.content.decode()
    for assignment in assignments:
        assert f'href="{reverse("example_detail", args=[study.slug, assignment.example.public_id])}"' in html
    assert len(assignments) == 2
    assert f"{len(assignments)} assignments in this study" in html


def test_it_shows_ratings_and_voided_ones(client, coordinator):
    study, _, _ = make_reading_study(pairs=1)
    example = _first_example(study)
    annotation, _ = rate_open_reads(example, RatingChoice.MINOR_ISSUES, RatingChoice.REALISTIC)
    void_annotation(annotation.public_id, actor=coordinator, reason="Wrong report.")
    client.force_login(coordinator)

    response = client.get(_url(study, annotation.reader))

    html = response.content.decode()
    assert "Minor Issues" in html
    assert '<tr class="voided">' in html
    assert "Voided" in html


def test_it_shows_the_audit_events_that_concern_the_reader(client, coordinator):
    study, _, _ = make_reading_study(pairs=1)
    example = _first_example(study)
    (annotation,) = rate_open_reads(example, RatingChoice.REALISTIC)
    reader = annotation.reader
    add_study_member(study, reader, MemberRole.READER, actor=coordinator, max_assignments=9)
    client.force_login(coordinator)

    response = client.get(_url(study, reader))

    history = response.context["detail"].history
    assert {event.subject for event in history} == {reader}
    actions = [event.action for event in history]
    assert actions.count(AuditAction.SUBMITTED) == 1
    assert AuditAction.MEMBER_CHANGED in actions
    assert actions.count(AuditAction.ASSIGNED) == reader.assignments.count()
    html = response.content.decode()
    assert "Rating submitted" in html and "Member changed" in html
    assert "<td>coord</td>" in html  # the actor of the member change
    assert f'href="{reverse("example_detail", args=[study.slug, example.public_id])}"' in html
    assert "cap 9 initial reads" in html


def test_it_shows_only_this_studys_work(client, coordinator):
    # Six readers for the exam's three items: each has one (with more, readers[0] might have none).
    study, readers, _ = make_reading_study(pairs=1, readers=6)
    other, _, _ = make_reading_study(pairs=1)
    reader = readers[0]
    StudyMember.objects.create(study=other, user=reader, role=MemberRole.READER)
    add_study_member(other, reader, MemberRole.READER, actor=coordinator)
    client.force_login(coordinator)

    detail = client.get(_url(study, reader)).context["detail"]

    assert {a.example.study_id for a in detail.assignments} == {study.pk}
    assert all(event.study_id == study.pk for event in detail.history)
    assert AuditAction.MEMBER_CHANGED not in [event.action for event in detail.history]


def test_it_shows_an_adjudicators_adjudications(client, coordinator):
    study, _, adjudicators = make_reading_study(pairs=1)
    example = _first_example(study)
    rate_open_reads(example, RatingChoice.REALISTIC, RatingChoice.MINOR_ISSUES, RatingChoice.MAJOR_ISSUES)
    client.force_login(coordinator)

    response = client.get(_url(study, adjudicators[0]))

    assert [a.example for a in response.context["detail"].adjudications] == [example]
    html = response.content.decode()
    assert "Adjudications" in html
    assert "Adjudication assigned" in html
    assert "Cardiothoracic" in html


def test_its_query_count_does_not_grow_with_the_readers_work(client, coordinator):
    client.force_login(coordinator)
    counts = []
    for pairs in (2, 12):
        # Six readers: each has one item of every exam (2, then 12), so the work grows.
        study, readers, _ = make_reading_study(pairs=pairs, readers=6)
        client.get(_url(study, readers[0]))
        with CaptureQueriesContext(connection) as queries:
            client.get(_url(study, readers[0]))
        counts.append(len(queries))
    assert counts[0] == counts[1], counts


def test_it_404s_for_someone_who_is_not_a_member(client, coordinator):
    study, _, _ = make_reading_study(pairs=1)
    _, other_readers, _ = make_reading_study(pairs=1)
    client.force_login(coordinator)

    assert client.get(_url(study, other_readers[0])).status_code == 404
    assert client.get(_url(study, make_user(Role.READER))).status_code == 404
    assert client.get(reverse("reader_detail", args=[study.slug, "nobody"])).status_code == 404
    assert client.get(reverse("reader_detail", args=["nope", other_readers[0].username])).status_code == 404


def test_it_lists_a_reader_with_two_roles_once(client, coordinator):
    study, readers, _ = make_reading_study(pairs=1)
    both = readers[0]
    both.groups.add(*make_user(Role.ADJUDICATOR).groups.all())
    add_study_member(study, both, MemberRole.ADJUDICATOR, actor=coordinator)
    client.force_login(coordinator)

    response = client.get(_url(study, both))

    assert response.status_code == 200
    assert [m.role for m in response.context["detail"].memberships] == [MemberRole.ADJUDICATOR, MemberRole.READER]


@pytest.mark.parametrize("role", [Role.READER, Role.DATA_MANAGER])
def test_it_requires_the_coordinator_role(client, role):
    study, readers, _ = make_reading_study(pairs=1)
    client.force_login(make_user(role))

    assert client.get(_url(study, readers[0])).status_code == 403


def test_a_reader_cannot_see_their_own_page(client):
    study, readers, _ = make_reading_study(pairs=1)
    client.force_login(readers[0])

    assert client.get(_url(study, readers[0])).status_code == 403


def test_it_redirects_anonymous_users_to_login(client):
    study, readers, _ = make_reading_study(pairs=1)

    response = client.get(_url(study, readers[0]))

    assert response.status_code == 302
    assert response.url.startswith(reverse("login"))


def test_a_long_history_is_shown_a_page_at_a_time(client, coordinator):
    from consensus.views import READER_ROWS_PER_PAGE

    # At most one item of an exam per reader: 30 exams over six readers give each of them 30 items.
    study, readers, _ = make_reading_study(pairs=30, readers=6)
    reader = max(readers, key=lambda r: Assignment.objects.filter(reader=r).count())
    total = Assignment.objects.filter(reader=reader).count()
    assert total > READER_ROWS_PER_PAGE
    client.force_login(coordinator)
    url = reverse("reader_detail", args=[study.slug, reader.username])

    first = client.get(url).content.decode()
    second = client.get(url + "?assignments=2&history=1").content.decode()

    assert f"{total} assignments in this study" in first
    assert f"1 to {READER_ROWS_PER_PAGE} shown" in first
    assert 'rel="next"' in first
    assert "?history=1&amp;assignments=2" in first
    rows = lambda html: html.split('id="assignments-heading"', 1)[1].split("</table>", 1)[0].count("<tr")  # noqa: E731
    assert rows(first) == READER_ROWS_PER_PAGE + 1  # with the header row
    assert rows(second) == total - READER_ROWS_PER_PAGE + 1
