import uuid

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.urls import reverse

from annotation.models import (
    Assignment,
    AssignmentStatus,
    AuditAction,
    AuditEvent,
    CandidatePair,
    Example,
    ExampleState,
    RatingChoice,
    Role,
    Task,
)
from consensus.models import ConsensusLabel
from consensus.services import submit_adjudication, void_annotation
from tests.factories import make_reading_study, make_user, rate_open_reads

HTMX = {"HTTP_HX_REQUEST": "true"}

pytestmark = pytest.mark.django_db


def _example(study, task: str = Task.REALISM, index: int = 0) -> Example:
    return Example.objects.filter(study=study, task=task).order_by("pk")[index]


def _url(example) -> str:
    return reverse("example_detail", args=[example.study.slug, example.public_id])


def _post(client, name: str, study, object_id, data=None, **headers):
    return client.post(reverse(name, args=[study.slug, object_id]), data or {}, **headers)


def _open_assignment(example) -> Assignment:
    return example.assignments.open().select_related("reader").order_by("slot").first()


# --- What it shows -----------------------------------------------------------------------------


def test_it_shows_the_context_and_the_report_rated(client, coordinator):
    study, _, _ = make_reading_study(pairs=1)
    example = _example(study)
    pair = example.pair
    client.force_login(coordinator)

    response = client.get(_url(example))

    assert response.status_code == 200
    html = response.content.decode()
    assert "Task 1: Realism · Original report" in html
    for text in (pair.indication, pair.comparison, pair.technique, pair.original_findings, pair.original_impression):
        assert text in html
    assert pair.alternative_findings not in html
    assert pair.source_study_id in html
    assert pair.variation.key in html


def test_an_empty_section_has_the_readers_marker(client, coordinator):
    study, _, _ = make_reading_study(pairs=1)
    example = _example(study, Task.EQUIVALENCE)
    CandidatePair.objects.filter(pk=example.pair_id).update(technique="", alternative_findings="")
    client.force_login(coordinator)

    html = client.get(_url(example)).content.decode()

    assert html.count('<span class="empty-section">empty section</span>') == 2
    assert "<dd>—</dd>" not in html


def test_task_2_shows_both_reports(client, coordinator):
    study, _, _ = make_reading_study(pairs=1)
    example = _example(study, Task.EQUIVALENCE)
    client.force_login(coordinator)

    html = client.get(_url(example)).content.decode()

    assert example.pair.original_findings in html
    assert example.pair.alternative_findings in html
    assert "Shown as Report A" in html


def test_it_escapes_report_text(client, coordinator):
    study, _, _ = make_reading_study(pairs=1)
    example = _example(study)
    CandidatePair.objects.filter(pk=example.pair_id).update(
        original_findings='<script>alert("x")</script> <b>bold</b>', indication="<img src=x onerror=alert(1)>"
    )
    client.force_login(coordinator)

    html = client.get(_url(example)).content.decode()

    assert "&lt;script&gt;alert(&quot;x&quot;)&lt;/script&gt; &lt;b&gt;bold&lt;/b&gt;" in html
    assert "&lt;img src=x onerror=alert(1)&gt;" in html
    assert "<b>bold" not in html
    assert "<img src=x" not in html


def test_it_shows_assignments_ratings_and_the_audit_history(client, coordinator):
    study, _, _ = make_reading_study(pairs=1)
    example = _example(study)
    first, second = rate_open_reads(example, RatingChoice.REALISTIC, RatingChoice.MINOR_ISSUES)
    third = example.assignments.get(slot=3)
    client.force_login(coordinator)

    response = client.get(_url(example))

    html = response.content.decode()
    detail = response.context["detail"]
    assert [a.reader for a in detail.assignments] == [first.reader, second.reader, third.reader]
    for reader in (first.reader, second.reader, third.reader):
        assert f'href="{reverse("reader_detail", args=[study.slug, reader.username])}"' in html
    assert "Minor Issues" in html and "A reason." in html
    assert "Needs a third read" in html
    actions = [event.action for event in detail.history]
    assert actions == [
        AuditAction.ASSIGNED,
        AuditAction.ASSIGNED,
        AuditAction.SUBMITTED,
        AuditAction.SUBMITTED,
        AuditAction.THIRD_READ_ROUTED,
    ]
    assert "Third read assigned" in html
    assert "Rating submitted" in html
    assert "automatic" in html  # the automatic assignment's "how"
    assert f"<td>{detail.history[0].actor.username}</td>" in html  # the coordinator who assigned
    assert '<span class="meta">system</span>' in html  # the routing of the third read


def test_it_marks_voided_ratings(client, coordinator):
    study, _, _ = make_reading_study(pairs=1)
    example = _example(study)
    first, _ = rate_open_reads(example, RatingChoice.REALISTIC, RatingChoice.REALISTIC)
    void_annotation(first.public_id, actor=coordinator, reason="Rated <the wrong> report.")
    client.force_login(coordinator)

    response = client.get(_url(example))

    html = response.content.decode()
    assert '<span class="badge">voided</span>' in html
    assert "by coord: Rated &lt;the wrong&gt; report." in html
    assert "Rating voided" in html
    assert "Consensus withdrawn" in html
    assert [a.is_voided for a in response.context["detail"].annotations] == [True, False]


def test_it_shows_the_adjudication_and_the_consensus(client, coordinator):
    study, _, adjudicators = make_reading_study(pairs=1)
    example = _example(study)
    rate_open_reads(example, RatingChoice.REALISTIC, RatingChoice.MINOR_ISSUES, RatingChoice.MAJOR_ISSUES)
    adjudication = example.adjudications.get()
    submit_adjudication(
        adjudicator=adjudicators[0],
        adjudication_id=adjudication.public_id,
        rating=RatingChoice.MINOR_ISSUES,
        rationale="Unusual but correct.",
        form_token=uuid.uuid4(),
    )
    client.force_login(coordinator)

    html = client.get(_url(example)).content.decode()

    assert adjudicators[0].username in html
    assert "Unusual but correct." in html
    assert "<strong>Minor Issues</strong> (adjudicated, from 3 ratings)" in html
    assert "Adjudication assigned" in html and "Adjudicated" in html and "Consensus reached" in html


def test_its_query_count_does_not_grow_with_the_study(client, coordinator):
    client.force_login(coordinator)
    counts = []
    for pairs in (2, 12):
        study, _, _ = make_reading_study(pairs=pairs)
        example = _example(study)
        rate_open_reads(example, RatingChoice.REALISTIC, RatingChoice.MINOR_ISSUES)
        client.get(_url(example))
        with CaptureQueriesContext(connection) as queries:
            client.get(_url(example))
        counts.append(len(queries))
    assert counts[0] == counts[1], counts


# --- Assigning by hand -------------------------------------------------------------------------


def test_it_assigns_by_hand(client, coordinator):
    study, readers, _ = make_reading_study(pairs=1, assign=False)
    example = _example(study)
    client.force_login(coordinator)

    response = _post(client, "example_assign", study, example.public_id, {"reader": readers[0].username}, **HTMX)

    assert response.status_code == 200
    html = response.content.decode()
    assert html.lstrip().startswith('<div id="example-work">')
    assert f"Assigned to {readers[0].username}." in html
    assignment = example.assignments.get()
    assert (assignment.reader, assignment.slot, assignment.status) == (readers[0], 1, AssignmentStatus.OPEN)
    event = AuditEvent.objects.get(example=example, action=AuditAction.ASSIGNED)
    assert (event.actor, event.subject, event.after["how"]) == (coordinator, readers[0], "by hand")


def test_it_explains_a_refused_assignment_in_place(client, coordinator):
    study, _, _ = make_reading_study(pairs=1)
    example = _example(study)
    already = _open_assignment(example).reader
    client.force_login(coordinator)

    response = _post(client, "example_assign", study, example.public_id, {"reader": already.username}, **HTMX)

    assert response.status_code == 422
    assert f"{already.username} already has (or had) this example.".encode() in response.content
    assert b'role="alert"' in response.content
    assert example.assignments.count() == 2


def test_it_offers_only_the_studys_active_readers(client, coordinator):
    study, readers, _ = make_reading_study(pairs=1, assign=False)
    outsider = make_user(Role.READER, username="outsider")
    client.force_login(coordinator)
    example = _example(study)

    response = _post(client, "example_assign", study, example.public_id, {"reader": outsider.username}, **HTMX)

    assert response.status_code == 422
    assert b"Select a valid choice" in response.content
    offered = set(response.context["assign_form"].fields["reader"].queryset)
    assert offered == set(readers)
    assert not example.assignments.exists()


# --- Withdrawing and reassigning -----------------------------------------------------------------


def test_it_withdraws_an_open_assignment(client, coordinator):
    study, _, _ = make_reading_study(pairs=1)
    example = _example(study)
    assignment = _open_assignment(example)
    client.force_login(coordinator)

    response = _post(client, "assignment_withdraw", study, assignment.public_id, **HTMX)

    assert response.status_code == 200
    assert f"Withdrew the assignment of {assignment.reader.username}.".encode() in response.content
    assert not Assignment.objects.filter(pk=assignment.pk).exists()
    event = AuditEvent.objects.get(example=example, action=AuditAction.WITHDRAWN)
    assert (event.actor, event.subject, event.before["assignment"]) == (
        coordinator,
        assignment.reader,
        str(assignment.public_id),
    )
    assert b"Assignment withdrawn" in response.content


def test_it_refuses_to_withdraw_a_rated_assignment_in_place(client, coordinator):
    study, _, _ = make_reading_study(pairs=1)
    example = _example(study)
    (annotation,) = rate_open_reads(example, RatingChoice.REALISTIC)
    client.force_login(coordinator)

    response = _post(client, "assignment_withdraw", study, annotation.assignment.public_id, **HTMX)

    assert response.status_code == 422
    assert b"This assignment has a rating; it cannot be withdrawn" in response.content
    assert Assignment.objects.filter(pk=annotation.assignment_id, status=AssignmentStatus.DONE).exists()


def test_it_reassigns_an_open_assignment(client, coordinator):
    study, readers, _ = make_reading_study(pairs=1, readers_beyond_initial=1)
    example = _example(study, Task.EQUIVALENCE)
    assignment = _open_assignment(example)
    # A reader gets at most one item of an exam: the free reader is the one with none of it.
    (free,) = [r for r in readers if not Assignment.objects.filter(example__study=study, reader=r).exists()]
    client.force_login(coordinator)

    response = _post(client, "assignment_reassign", study, assignment.public_id, {"reader": free.username}, **HTMX)

    assert response.status_code == 200
    assert f"to {free.username}.".encode() in response.content
    moved = example.assignments.get(reader=free)
    assert (moved.slot, moved.status) == (assignment.slot, AssignmentStatus.OPEN)
    assert not Assignment.objects.filter(pk=assignment.pk).exists()


def test_it_explains_a_refused_reassignment_in_place_and_keeps_the_assignment(client, coordinator):
    study, _, _ = make_reading_study(pairs=1)
    example = _example(study)
    assignment, other = example.assignments.select_related("reader").order_by("slot")
    client.force_login(coordinator)

    response = _post(
        client, "assignment_reassign", study, assignment.public_id, {"reader": other.reader.username}, **HTMX
    )

    assert response.status_code == 422
    assert b"already has (or had) this example" in response.content
    assert Assignment.objects.filter(pk=assignment.pk, reader=assignment.reader).exists()
    assert not AuditEvent.objects.filter(example=example, action=AuditAction.WITHDRAWN).exists()


def test_it_explains_in_place_that_a_reader_of_another_item_of_the_exam_is_refused(client, coordinator):
    study, _, _ = make_reading_study(pairs=1)
    example = _example(study)
    assignment = _open_assignment(example)
    of_the_exam = _open_assignment(_example(study, Task.EQUIVALENCE)).reader
    client.force_login(coordinator)

    response = _post(
        client, "assignment_reassign", study, assignment.public_id, {"reader": of_the_exam.username}, **HTMX
    )

    assert response.status_code == 422
    assert b"has or had another item of the same exam" in response.content
    assert Assignment.objects.filter(pk=assignment.pk, reader=assignment.reader).exists()
    assert not example.assignments.filter(reader=of_the_exam).exists()


# --- Voiding ---------------------------------------------------------------------------------------


def test_it_voids_a_rating_with_a_reason_and_routes_the_example_again(client, coordinator):
    study, _, _ = make_reading_study(pairs=1)
    example = _example(study)
    first, _ = rate_open_reads(example, RatingChoice.REALISTIC, RatingChoice.REALISTIC)
    client.force_login(coordinator)

    response = _post(client, "annotation_void", study, first.public_id, {"reason": "Rated the wrong report."}, **HTMX)

    assert response.status_code == 200
    assert b"Voided the rating of" in response.content
    first.refresh_from_db()
    assert (first.is_voided, first.voided_by, first.void_reason) == (True, coordinator, "Rated the wrong report.")
    example.refresh_from_db()
    assert example.state == ExampleState.WAITING
    assert not ConsensusLabel.objects.filter(example=example).exists()
    assert example.assignments.open().exclude(reader=first.reader).count() == 1
    event = AuditEvent.objects.get(example=example, action=AuditAction.VOIDED)
    assert (event.actor, event.subject, event.after["reason"]) == (coordinator, first.reader, "Rated the wrong report.")


def test_voiding_needs_a_reason(client, coordinator):
    study, _, _ = make_reading_study(pairs=1)
    (annotation,) = rate_open_reads(_example(study), RatingChoice.REALISTIC)
    client.force_login(coordinator)

    response = _post(client, "annotation_void", study, annotation.public_id, {"reason": "  "}, **HTMX)

    assert response.status_code == 422
    assert b"Reason for voiding: This field is required." in response.content
    annotation.refresh_from_db()
    assert not annotation.is_voided


def test_it_explains_that_a_rating_was_already_voided(client, coordinator):
    study, _, _ = make_reading_study(pairs=1)
    (annotation,) = rate_open_reads(_example(study), RatingChoice.REALISTIC)
    void_annotation(annotation.public_id, actor=coordinator, reason="First time.")
    client.force_login(coordinator)

    response = _post(client, "annotation_void", study, annotation.public_id, {"reason": "Again."}, **HTMX)

    assert response.status_code == 422
    assert b"This rating was already voided." in response.content
    assert AuditEvent.objects.filter(action=AuditAction.VOIDED).count() == 1


def test_it_voids_a_rating_while_an_adjudication_is_open(client, coordinator):
    study, _, _ = make_reading_study(pairs=1)
    example = _example(study)
    first, *_ = rate_open_reads(example, RatingChoice.REALISTIC, RatingChoice.MINOR_ISSUES, RatingChoice.MAJOR_ISSUES)
    client.force_login(coordinator)

    response = _post(client, "annotation_void", study, first.public_id, {"reason": "Wrong report."}, **HTMX)

    assert response.status_code == 200
    assert not example.adjudications.active().exists()
    assert b"Adjudication" in response.content
    assert [a.get_status_display() for a in response.context["detail"].adjudications] == ["Voided"]


def test_it_works_without_javascript(client, coordinator):
    study, _, _ = make_reading_study(pairs=1)
    (annotation,) = rate_open_reads(_example(study), RatingChoice.REALISTIC)
    client.force_login(coordinator)

    response = _post(client, "annotation_void", study, annotation.public_id, {"reason": "Wrong report."})

    assert response.status_code == 200
    html = response.content.decode()
    assert "<html" in html
    assert html.count('id="example-work"') == 1
    assert "Voided the rating of" in html


# --- Which objects, and who may ------------------------------------------------------------------


def test_it_404s_for_an_example_of_another_study(client, coordinator):
    study, _, _ = make_reading_study(pairs=1)
    other, _, _ = make_reading_study(pairs=1)
    foreign = _example(other)
    client.force_login(coordinator)

    assert client.get(reverse("example_detail", args=[study.slug, foreign.public_id])).status_code == 404
    assert client.get(reverse("example_detail", args=[study.slug, uuid.uuid4()])).status_code == 404
    assert client.get(reverse("example_detail", args=["nope", foreign.public_id])).status_code == 404


def test_changes_through_another_study_404(client, coordinator):
    study, readers, _ = make_reading_study(pairs=1)
    other, _, _ = make_reading_study(pairs=1)
    foreign = _example(other)
    (annotation,) = rate_open_reads(foreign, RatingChoice.REALISTIC)
    assignment = _open_assignment(foreign)
    client.force_login(coordinator)

    assert _post(client, "assignment_withdraw", study, assignment.public_id).status_code == 404
    reassign = _post(client, "assignment_reassign", study, assignment.public_id, {"reader": readers[0].username})
    assert reassign.status_code == 404
    assert _post(client, "annotation_void", study, annotation.public_id, {"reason": "x"}).status_code == 404
    assert _post(client, "example_assign", study, foreign.public_id, {"reader": readers[0].username}).status_code == 404
    assert Assignment.objects.filter(pk=assignment.pk).exists()
    annotation.refresh_from_db()
    assert not annotation.is_voided


@pytest.mark.parametrize("role", [Role.READER, Role.ADJUDICATOR, Role.DATA_MANAGER])
def test_it_requires_the_coordinator_role(client, role):
    study, readers, _ = make_reading_study(pairs=1)
    example = _example(study)
    (annotation,) = rate_open_reads(example, RatingChoice.REALISTIC)
    assignment = _open_assignment(example)
    client.force_login(make_user(role))

    assert client.get(_url(example)).status_code == 403
    assert _post(client, "example_assign", study, example.public_id, {"reader": readers[0].username}).status_code == 403
    assert _post(client, "assignment_withdraw", study, assignment.public_id).status_code == 403
    assert _post(client, "annotation_void", study, annotation.public_id, {"reason": "x"}).status_code == 403
    assert Assignment.objects.filter(pk=assignment.pk).exists()
    annotation.refresh_from_db()
    assert not annotation.is_voided


def test_it_redirects_anonymous_users_to_login(client):
    study, _, _ = make_reading_study(pairs=1)
    example = _example(study)
    assignment = _open_assignment(example)

    for response in (client.get(_url(example)), _post(client, "assignment_withdraw", study, assignment.public_id)):
        assert response.status_code == 302
        assert response.url.startswith(reverse("login"))
    assert Assignment.objects.filter(pk=assignment.pk).exists()


def test_changes_must_be_posted(client, coordinator):
    study, _, _ = make_reading_study(pairs=1)
    assignment = _open_assignment(_example(study))
    client.force_login(coordinator)

    assert client.get(reverse("assignment_withdraw", args=[study.slug, assignment.public_id])).status_code == 405
    assert Assignment.objects.filter(pk=assignment.pk).exists()


def test_the_audit_trail_shows_the_labels_people_read_elsewhere(client, coordinator):
    study, _, _ = make_reading_study(pairs=1)
    example = _example(study, Task.EQUIVALENCE)
    rate_open_reads(example, RatingChoice.MAJOR_DISCREPANCY, RatingChoice.MAJOR_DISCREPANCY)
    client.force_login(coordinator)

    html = client.get(_url(example)).content.decode()

    history = html.split('id="history-heading"', 1)[1]
    assert "<dt>rating</dt><dd>Major Discrepancy</dd>" in history
    assert "<dt>decided by</dt><dd>unanimous</dd>" in history
    assert "major_discrepancy" not in history
    assert "label_source" not in history


def test_each_rating_has_one_void_action_that_opens_its_form(client, coordinator):
    study, _, _ = make_reading_study(pairs=1)
    example = _example(study)
    rate_open_reads(example, RatingChoice.REALISTIC, RatingChoice.MINOR_ISSUES)
    client.force_login(coordinator)

    html = client.get(_url(example)).content.decode()

    assert html.count('<details class="void-action">') == 2
    assert html.count("<summary>Void…</summary>") == 2
    # Every void form sits inside its closed action.
    for form in html.split('<details class="void-action">')[1:]:
        assert 'name="reason"' in form.split("</details>", 1)[0]
    assert html.count('name="reason"') == 2
