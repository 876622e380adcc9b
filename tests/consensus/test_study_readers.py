import re
import uuid

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.urls import reverse
from django.utils.html import escape

from annotation.models import (
    Assignment,
    AuditAction,
    AuditEvent,
    Example,
    MemberRole,
    RatingChoice,
    Role,
    Study,
    StudyMember,
    Task,
)
from annotation.services import sample_pairs
from consensus.blinding import readers_needed
from tests.factories import make_pair, make_reading_study, make_study, make_user, rate_open_reads

HTMX = {"HTTP_HX_REQUEST": "true"}

pytestmark = pytest.mark.django_db


def _url(study, name: str = "study_readers") -> str:
    return reverse(name, args=[study.slug])


def _workload(client, study) -> dict:
    return {row.username: row for row in client.get(_url(study)).context["workload"]}


def test_it_shows_each_members_reads_per_task(client, coordinator):
    study, readers, adjudicators = make_reading_study(pairs=2, readers=6)
    example = Example.objects.filter(study=study, task=Task.EQUIVALENCE).order_by("pk").first()
    (annotation,) = rate_open_reads(example, RatingChoice.EQUIVALENT)
    client.force_login(coordinator)

    rows = _workload(client, study)

    assert set(rows) == {u.username for u in readers + adjudicators}
    # 4 Task 1 examples and 2 Task 2 examples, two reads each, over 6 readers: each reader has one
    # item of each of the two exams, and per task the counts differ by at most one.
    per_task = []
    for reader in readers:
        realism, equivalence = rows[reader.username].tasks
        assert (realism.task, equivalence.task) == (Task.REALISM, Task.EQUIVALENCE)
        assert rows[reader.username].initial_reads == 2
        per_task.append((realism.assigned, equivalence.assigned))
    assert sorted(per_task) == [(1, 1)] * 4 + [(2, 0)] * 2
    rater = rows[annotation.reader.username]
    assert (rater.tasks[1].done, rater.tasks[1].open, rater.done, rater.open) == (1, 0, 1, 1)
    assert rows[adjudicators[0].username].roles == [MemberRole.ADJUDICATOR]
    assert rows[adjudicators[0].username].assigned == 0


def test_it_shows_caps_subspecialties_and_progress_bars(client, coordinator):
    study, _, _ = make_reading_study(pairs=1, readers=6, adjudicators=1)
    capped = make_user(Role.READER, username="capped-reader", subspecialty="neuroradiology")
    StudyMember.objects.create(study=study, user=capped, role=MemberRole.READER, max_assignments=7)
    client.force_login(coordinator)

    response = client.get(_url(study))

    html = response.content.decode()
    row = {r.username: r for r in response.context["workload"]}["capped-reader"]
    assert (row.max_assignments, row.subspecialty) == (7, "Neuroradiology")
    assert "0 / 7" in html
    assert "no cap" in html
    assert "Cardiothoracic" in html  # the adjudicator
    assert html.count("<progress ") == 6  # the six readers with work; the newcomer and the adjudicator have none
    assert f'href="{reverse("reader_detail", args=[study.slug, "capped-reader"])}"' in html


def test_it_counts_voided_ratings_and_adjudications(client, coordinator):
    from consensus.services import submit_adjudication, void_annotation

    study, _, adjudicators = make_reading_study(pairs=1)
    split, agreed, *_ = Example.objects.filter(study=study, task=Task.REALISM).order_by("pk")
    rate_open_reads(split, RatingChoice.REALISTIC, RatingChoice.MINOR_ISSUES, RatingChoice.MAJOR_ISSUES)
    first, _ = rate_open_reads(agreed, RatingChoice.REALISTIC, RatingChoice.REALISTIC)
    void_annotation(first.public_id, actor=coordinator, reason="Rated the wrong report.")
    client.force_login(coordinator)

    rows = _workload(client, study)
    assert rows[first.reader.username].voided == 1
    adjudicator = rows[adjudicators[0].username]
    assert (adjudicator.adjudications_open, adjudicator.adjudications_done) == (1, 0)

    adjudication = split.adjudications.get()
    submit_adjudication(
        adjudicator=adjudicators[0],
        adjudication_id=adjudication.public_id,
        rating=RatingChoice.MINOR_ISSUES,
        rationale="Unusual phrasing.",
        form_token=uuid.uuid4(),
    )
    adjudicator = _workload(client, study)[adjudicators[0].username]
    assert (adjudicator.adjudications_open, adjudicator.adjudications_done, adjudicator.percent_done) == (0, 1, 100)


def test_its_query_count_does_not_grow_with_the_study(client, coordinator):
    client.force_login(coordinator)
    counts = []
    # Three readers beyond the initial need or more: the three third reads of an exam find one.
    for pairs, beyond in ((2, 3), (12, 5)):
        study, _, _ = make_reading_study(pairs=pairs, readers_beyond_initial=beyond, adjudicators=2)
        for example in Example.objects.filter(study=study, task=Task.REALISM).order_by("pk")[:3]:
            rate_open_reads(example, RatingChoice.REALISTIC, RatingChoice.MINOR_ISSUES, RatingChoice.MAJOR_ISSUES)
        client.get(_url(study))  # warm the session and permission caches
        with CaptureQueriesContext(connection) as queries:
            response = client.get(_url(study))
        assert response.status_code == 200
        counts.append(len(queries))
    assert counts[0] == counts[1], counts
    # Three of them are for the note by Assign: they count the examples nobody has yet and the
    # active readers, and the readers the study's exams need (consensus.blinding.readers_needed).
    assert counts[1] <= 13, counts


# --- Adding a member --------------------------------------------------------------------------


def test_it_adds_a_reader(client, coordinator):
    study, _, _ = make_reading_study(pairs=1)
    newcomer = make_user(Role.READER, username="newcomer")
    client.force_login(coordinator)

    response = client.post(
        _url(study, "study_add_member"), {"user": "newcomer", "role": "reader", "max_assignments": "12"}, **HTMX
    )

    assert response.status_code == 200
    html = response.content.decode()
    assert "newcomer is now an active reader of this study, with a cap of 12 initial reads." in html
    assert 'id="member-panel"' in html
    assert '<div id="workload" hx-swap-oob="true">' in html
    assert "<html" not in html
    member = StudyMember.objects.get(study=study, user=newcomer)
    assert (member.role, member.max_assignments, member.active) == (MemberRole.READER, 12, True)
    event = AuditEvent.objects.get(study=study, action=AuditAction.MEMBER_ADDED, subject=newcomer)
    assert event.actor == coordinator


def test_adding_an_adjudicator_routes_a_waiting_split(client, coordinator):
    study, _, _ = make_reading_study(pairs=1, adjudicators=0)
    example = Example.objects.filter(study=study, task=Task.REALISM).order_by("pk").first()
    rate_open_reads(example, RatingChoice.REALISTIC, RatingChoice.MINOR_ISSUES, RatingChoice.MAJOR_ISSUES)
    assert example.unrouted
    make_user(Role.ADJUDICATOR, username="adj")
    client.force_login(coordinator)

    response = client.post(_url(study, "study_add_member"), {"user": "adj", "role": "adjudicator"}, **HTMX)

    assert response.status_code == 200
    example.refresh_from_db()
    assert not example.unrouted
    assert example.adjudications.get().adjudicator.username == "adj"


def test_it_explains_a_refused_member_in_place(client, coordinator):
    study, _, _ = make_reading_study(pairs=1)
    make_user(Role.ADJUDICATOR, username="only-adjudicator")
    client.force_login(coordinator)

    response = client.post(_url(study, "study_add_member"), {"user": "only-adjudicator", "role": "reader"}, **HTMX)

    assert response.status_code == 422
    assert b"only-adjudicator does not have the Reader role" in response.content
    assert b'role="alert"' in response.content
    assert b"hx-swap-oob" not in response.content
    assert not StudyMember.objects.filter(study=study, user__username="only-adjudicator").exists()


def test_it_shows_form_errors_in_place(client, coordinator):
    study, _, _ = make_reading_study(pairs=1)
    make_user(Role.COORDINATOR, username="not-a-reader")
    client.force_login(coordinator)

    response = client.post(
        _url(study, "study_add_member"), {"user": "not-a-reader", "role": "reader", "max_assignments": "-1"}, **HTMX
    )

    assert response.status_code == 422
    html = response.content.decode()
    assert "Select a valid choice" in html
    assert "greater than or equal to 0" in html
    assert not StudyMember.objects.filter(study=study, user__username="not-a-reader").exists()


def test_it_offers_only_people_with_a_reading_role(client, coordinator):
    study = make_study()
    make_user(Role.READER, username="a-reader")
    make_user(Role.ADJUDICATOR, username="an-adjudicator")
    make_user(Role.DATA_MANAGER, username="a-data-manager")
    make_user(Role.READER, username="a-former-reader", is_active=False)
    client.force_login(coordinator)

    form = client.get(_url(study)).context["member_form"]

    offered = {user.username for user in form.fields["user"].queryset}
    assert offered == {"a-reader", "an-adjudicator"}


# --- Assigning automatically -------------------------------------------------------------------


def test_it_assigns_automatically(client, coordinator):
    study, _, _ = make_reading_study(pairs=2, assign=False)
    client.force_login(coordinator)

    response = client.post(_url(study, "study_assign"), {}, **HTMX)

    assert response.status_code == 200
    assert b"Assigned 12 reads." in response.content
    assert b'<div id="workload" hx-swap-oob="true">' in response.content
    assert Assignment.objects.filter(example__study=study).count() == 12


def test_it_assigns_one_task_only(client, coordinator):
    study, _, _ = make_reading_study(pairs=2, assign=False)
    client.force_login(coordinator)

    response = client.post(_url(study, "study_assign"), {"tasks": [Task.EQUIVALENCE]}, **HTMX)

    assert b"Assigned 4 reads." in response.content
    assert set(Assignment.objects.values_list("example__task", flat=True)) == {Task.EQUIVALENCE}


def test_it_shows_the_notes_when_caps_leave_reads_unassigned(client, coordinator):
    study, _, _ = make_reading_study(pairs=2, readers=6, assign=False)
    StudyMember.objects.filter(study=study, role=MemberRole.READER).update(max_assignments=1)
    client.force_login(coordinator)

    response = client.post(_url(study, "study_assign"), {}, **HTMX)

    assert response.status_code == 200
    assert b"Assigned 6 reads. 6 reads could not be assigned." in response.content
    assert b"Add readers or raise caps, then assign again." in response.content


def test_it_explains_a_refused_assignment_in_place(client, coordinator):
    study, _, _ = make_reading_study(pairs=1, readers=1, assign=False)
    client.force_login(coordinator)

    response = client.post(_url(study, "study_assign"), {}, **HTMX)

    assert response.status_code == 422
    assert b"has 1 active reader(s); every example needs 2 distinct readers" in response.content
    assert b'id="assign-panel"' in response.content
    assert not Assignment.objects.exists()


def test_it_works_without_javascript(client, coordinator):
    study, _, _ = make_reading_study(pairs=1, assign=False)
    client.force_login(coordinator)

    response = client.post(_url(study, "study_assign"), {})

    assert response.status_code == 200
    html = response.content.decode()
    assert "<html" in html
    assert "Assigned 6 reads." in html
    assert html.count('id="workload"') == 1
    assert "hx-swap-oob" not in html


# --- Who may -----------------------------------------------------------------------------------


@pytest.mark.parametrize("role", [Role.READER, Role.DATA_MANAGER])
def test_it_requires_the_coordinator_role(client, role):
    study, _, _ = make_reading_study(pairs=1, assign=False)
    make_user(Role.READER, username="hopeful")
    client.force_login(make_user(role))

    assert client.get(_url(study)).status_code == 403
    assert client.post(_url(study, "study_assign"), {}).status_code == 403
    response = client.post(_url(study, "study_add_member"), {"user": "hopeful", "role": "reader"})
    assert response.status_code == 403
    assert not Assignment.objects.exists()
    assert not StudyMember.objects.filter(user__username="hopeful").exists()


def test_it_redirects_anonymous_users_to_login(client):
    study = make_study()

    for response in (client.get(_url(study)), client.post(_url(study, "study_assign"), {})):
        assert response.status_code == 302
        assert response.url.startswith(reverse("login"))


def test_changes_must_be_posted(client, coordinator):
    study, _, _ = make_reading_study(pairs=1, assign=False)
    client.force_login(coordinator)

    assert client.get(_url(study, "study_assign")).status_code == 405
    assert client.get(_url(study, "study_add_member")).status_code == 405


def test_it_404s_for_an_unknown_study(client, coordinator):
    client.force_login(coordinator)

    assert client.get(reverse("study_readers", args=["nope"])).status_code == 404
    assert client.post(reverse("study_assign", args=["nope"]), {}).status_code == 404


def test_add_offers_only_people_not_yet_active_in_a_role_they_hold(client, coordinator):
    study = make_study()
    enrolled = make_user(Role.READER, username="enrolled")
    both = make_user(Role.READER, Role.ADJUDICATOR, username="both")
    make_user(Role.READER, username="newcomer")
    StudyMember.objects.create(study=study, user=enrolled, role=MemberRole.READER)
    StudyMember.objects.create(study=study, user=both, role=MemberRole.READER)
    client.force_login(coordinator)

    html = client.get(reverse("study_readers", args=[study.slug])).content.decode()

    options = re.findall(r'<option value="([^"]+)"', html.split('name="user"', 1)[1].split("</select>", 1)[0])
    assert options == ["both", "newcomer"]  # both may still join as adjudicator


def _assign_minimum(client, study) -> str:
    html = client.get(reverse("study_readers", args=[study.slug])).content.decode()
    return html.split('id="assign-minimum"', 1)[1].split("</p>", 1)[0]


def test_the_reader_minimum_is_said_beside_the_assign_button(client, coordinator):
    # One exam's three items, kept apart: each needs its own two readers (three with a third read).
    study, _, _ = make_reading_study(pairs=1, readers=2, assign=False)
    client.force_login(coordinator)

    note = _assign_minimum(client, study)
    assert "This study needs at least 6 active readers, 9 to give every third read; it has 2." in note
    assert escape(readers_needed(study).explanation) in note
    assert "Add readers above first." in note

    # Not kept apart: the Task 1 original and Task 2 both show the original, so their initial reads
    # need four readers; a third read of Task 2 must also find one who read neither Task 1 item.
    Study.objects.filter(pk=study.pk).update(keep_versions_apart=False)
    study.refresh_from_db()
    note = _assign_minimum(client, study)
    assert "This study needs at least 4 active readers, 9 to give every third read; it has 2." in note
    assert escape(readers_needed(study).explanation) in note

    # Enough for the initial reads, not for every third read: said, without asking for readers first.
    for _ in range(2):
        StudyMember.objects.create(study=study, user=make_user(Role.READER), role=MemberRole.READER)
    note = _assign_minimum(client, study)
    assert "needs at least 4 active readers, 9 to give every third read; it has 4." in note
    assert "Add readers above first." not in note
    assert "A third read that finds no eligible reader waits, listed as unrouted" in note


def test_the_reader_minimum_names_the_exams_in_the_most_pairs(client, coordinator):
    # Two pairs (two variations) of one exam: six items kept apart, twelve readers, eighteen with third reads.
    study, _, _ = make_reading_study(pairs=4, pairs_per_exam=2, readers=12, assign=False)
    client.force_login(coordinator)

    note = _assign_minimum(client, study)
    needed = readers_needed(study)
    assert (needed.initial, needed.with_third_reads, needed.driving_exams) == (
        12,
        18,
        ["mimic-cxr 52000000", "mimic-cxr 52000001"],
    )
    assert "This study needs at least 12 active readers, 18 to give every third read; it has 12." in note
    assert escape(needed.explanation) in note
    assert "mimic-cxr 52000000, mimic-cxr 52000001" in note


def test_adding_readers_and_assigning_update_the_minimum_beside_the_assign_form(client, coordinator):
    study = make_study("fresh")
    make_pair(study)
    sample_pairs(study, per_variation=1, seed=1)
    needed = readers_needed(study).initial
    names = [f"r{n}" for n in range(1, needed + 1)]
    for name in names:
        make_user(Role.READER, username=name)
    client.force_login(coordinator)
    assert "it has 0." in client.get(_url(study)).content.decode()

    added = client.post(_url(study, "study_add_member"), {"user": "r1", "role": "reader"}, **HTMX).content.decode()

    assert '<p class="notice" id="assign-minimum" hx-swap-oob="true">' in added
    assert "it has 1." in added
    for name in names[1:]:
        client.post(_url(study, "study_add_member"), {"user": name, "role": "reader"}, **HTMX)
    assigned = client.post(_url(study, "study_assign"), {}, **HTMX).content.decode()

    assert "Assigned" in assigned
    assert 'id="assign-minimum" hx-swap-oob="true">' in assigned
    assert f"it has {needed}." in assigned and "Add readers above first" not in assigned
