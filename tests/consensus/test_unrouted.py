import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.urls import reverse

from annotation.models import Example, MemberRole, RatingChoice, Role, Task
from annotation.services import sample_pairs
from consensus.assignment import add_study_member, assign_readers
from consensus.services import void_annotation
from tests.factories import make_pair, make_reading_study, make_study, make_user, rate, rate_open_reads

pytestmark = pytest.mark.django_db


def _url(study) -> str:
    return reverse("study_unrouted", args=[study.slug])


def _realism(study) -> list[Example]:
    return list(Example.objects.filter(study=study, task=Task.REALISM).order_by("pk"))


def test_it_lists_examples_waiting_for_an_adjudicator(client, coordinator):
    # The default readers: enough for the split's third read.
    study, _, _ = make_reading_study(pairs=1, adjudicators=0, keep_versions_apart=False)
    split = _realism(study)[0]
    agreed = Example.objects.get(study=study, task=Task.EQUIVALENCE)
    rate_open_reads(split, RatingChoice.REALISTIC, RatingChoice.MINOR_ISSUES, RatingChoice.MAJOR_ISSUES)
    rate_open_reads(agreed, RatingChoice.EQUIVALENT, RatingChoice.EQUIVALENT)
    client.force_login(coordinator)

    response = client.get(_url(study))

    assert response.status_code == 200
    assert {e.public_id: e.waiting_for for e in response.context["examples"]} == {split.public_id: "adjudicator"}
    html = response.content.decode()
    assert "an adjudicator" in html
    assert "Needs adjudication" in html
    assert f'href="{reverse("example_detail", args=[study.slug, split.public_id])}"' in html


def test_it_says_whom_each_example_waits_for(client, coordinator):
    study, _, _ = make_reading_study(pairs=1, readers=2, keep_versions_apart=False)
    example = _realism(study)[0]
    rate_open_reads(example, RatingChoice.REALISTIC, RatingChoice.MINOR_ISSUES)
    client.force_login(coordinator)

    response = client.get(_url(study))

    (listed,) = response.context["examples"]
    assert (listed.public_id, listed.waiting_for, listed.n_ratings) == (example.public_id, "third_reader", 2)
    html = response.content.decode()
    assert "a third reader" in html
    assert "Needs a third read" in html
    assert example.pair.source_study_id in html


def test_it_lists_only_this_studys_examples(client, coordinator):
    study, _, _ = make_reading_study(pairs=1)
    other, _, _ = make_reading_study(pairs=1, readers=2, keep_versions_apart=False)
    rate_open_reads(_realism(other)[0], RatingChoice.REALISTIC, RatingChoice.MINOR_ISSUES)
    client.force_login(coordinator)

    response = client.get(_url(study))

    assert response.context["examples"] == []
    assert b"No example is waiting" in response.content


def test_its_query_count_does_not_grow_with_the_list(client, coordinator):
    client.force_login(coordinator)
    counts = []
    for pairs in (2, 12):
        study, _, _ = make_reading_study(pairs=pairs, readers=2, keep_versions_apart=False)
        for example in _realism(study):
            rate_open_reads(example, RatingChoice.REALISTIC, RatingChoice.MINOR_ISSUES)
        client.get(_url(study))
        with CaptureQueriesContext(connection) as queries:
            response = client.get(_url(study))
        assert len(response.context["examples"]) == 2 * pairs
        counts.append(len(queries))
    assert counts[0] == counts[1], counts


@pytest.mark.parametrize("role", [Role.READER, Role.DATA_MANAGER])
def test_it_requires_the_coordinator_role(client, role):
    study = make_study()
    client.force_login(make_user(role))

    assert client.get(_url(study)).status_code == 403


def test_it_redirects_anonymous_users_to_login(client):
    study = make_study()

    response = client.get(_url(study))

    assert response.status_code == 302
    assert response.url.startswith(reverse("login"))


def test_it_404s_for_an_unknown_study(client, coordinator):
    client.force_login(coordinator)

    assert client.get(reverse("study_unrouted", args=["nope"])).status_code == 404


def test_it_says_why_nobody_was_eligible(client, coordinator):
    # Kept apart with the six readers the exam's items need: the alternative's third read has no reader left.
    study, _, _ = make_reading_study(pairs=1, readers_beyond_initial=0, adjudicators=0)
    alternative = Example.objects.get(study=study, task=Task.REALISM, report_type="alternative")
    rate_open_reads(alternative, RatingChoice.REALISTIC, RatingChoice.MAJOR_ISSUES)
    client.force_login(coordinator)

    html = client.get(_url(study)).content.decode()
    (row,) = client.get(f"/api/studies/{study.slug}/unrouted/").json()

    assert "has or had another item of the same exam" in html
    assert f"(exam mimic-cxr {alternative.pair.source_study_id})" in html
    assert row["reason"] == SAME_EXAM


def test_with_nothing_assigned_it_says_so_and_what_to_do(client, coordinator):
    study = make_study()
    for n in range(3):
        make_pair(study, study_id=str(52_000_000 + n))
    sample_pairs(study, per_variation=3, seed=1)
    client.force_login(coordinator)

    unrouted = client.get(reverse("study_unrouted", args=[study.slug])).content.decode()
    progress = client.get(reverse("study_progress", args=[study.slug])).content.decode()

    for html in (unrouted, progress):
        assert "Nothing is assigned yet for 9 examples: no reader has them." in html
        # Six: an exam's three items, kept apart, two reads each.
        assert "needs at least 6 active readers; it has 0" in html
        assert "every example that needs a reader or an adjudicator has one" not in html
        assert "No example waits for an eligible reader" not in html


def test_an_example_waiting_for_a_refill_stays_listed_when_its_other_reader_rates(coordinator):
    # Found by the routing state machine. Keep-apart, the six readers the exam's items need: after
    # a void, nobody may refill the read; the remaining reader's rating must not take the example
    # off the list, or it would wait for ever with one read missing and no coordinator told.
    study, _, _ = make_reading_study(pairs=1, readers_beyond_initial=0)
    example = _realism(study)[0]
    first, second = example.assignments.order_by("slot")
    voided = rate(first, RatingChoice.REALISTIC, "").annotation
    void_annotation(voided.public_id, actor=coordinator, reason="Wrong report.")
    example.refresh_from_db()
    assert example.unrouted

    rate(second, RatingChoice.REALISTIC, "")

    example.refresh_from_db()
    assert example.unrouted
    assert "another item of the same exam" in example.unrouted_reason
    newcomer = make_user(Role.READER)
    add_study_member(study, newcomer, MemberRole.READER, actor=coordinator)
    example.refresh_from_db()
    assert not example.unrouted
    assert example.assignments.open().get().reader == newcomer


# --- Why nobody was eligible, and its audit row ------------------------------------------------

NO_READER = "The study has no active reader."
ALL_READ = "Every active reader of the study has already read (or been given) this example."
# The factories number their exams from 52000000: a one-pair study's exam.
SAME_EXAM = (
    "Every active reader who has not read this example has or had another item of the same exam (the original, "
    "a rewrite or Task 2 of it), and the study keeps the items of an exam apart (exam mimic-cxr 52000000). "
    "Add a reader to the study."
)
SAME_TEXT = (
    "Every active reader who has not read this example has or had an item that shows the same report text "
    "(exam mimic-cxr 52000000). Add a reader to the study."
)


def _task2_alone(**options) -> tuple:
    """A one-pair study with two readers and only its Task 2 example assigned: they are all its readers."""
    study, people, _ = make_reading_study(pairs=1, readers=2, assign=False, **options)
    assign_readers(study, actor=make_user(Role.COORDINATOR), tasks=[Task.EQUIVALENCE])
    return study, people, Example.objects.get(study=study, task=Task.EQUIVALENCE)


def _split_task2(**options) -> tuple:
    """A Task 2 example, read by every reader of the study, whose two first reads disagree."""
    study, people, example = _task2_alone(**options)
    rate_open_reads(example, RatingChoice.EQUIVALENT, RatingChoice.MAJOR_DISCREPANCY)
    example.refresh_from_db()
    return study, people, example


def test_every_reader_has_read_it():
    _, _, example = _split_task2(keep_versions_apart=False)

    assert (example.unrouted, example.unrouted_reason) == (True, ALL_READ)


@pytest.mark.parametrize(("keep_versions_apart", "reason"), [(True, SAME_EXAM), (False, SAME_TEXT)])
def test_the_exams_other_items_keep_everyone_out(keep_versions_apart, reason):
    # With the fewest readers the study needs, everyone who has not read the alternative has
    # another item of its exam (kept apart), or one that shows its rewrite (its Task 2).
    study, _, _ = make_reading_study(
        pairs=1, readers_beyond_initial=0, adjudicators=0, keep_versions_apart=keep_versions_apart
    )
    alternative = Example.objects.get(study=study, task=Task.REALISM, report_type="alternative")
    rate_open_reads(alternative, RatingChoice.REALISTIC, RatingChoice.MAJOR_ISSUES)
    alternative.refresh_from_db()

    assert (alternative.unrouted, alternative.unrouted_reason) == (True, reason)


def test_unrouting_is_audited_once_per_reason(coordinator):
    from annotation.models import AuditAction, AuditEvent, StudyMember
    from consensus.services import route_unrouted

    study, _, example = _split_task2(keep_versions_apart=False)

    def events():
        return list(AuditEvent.objects.filter(action=AuditAction.UNROUTED, example=example).order_by("pk"))

    (event,) = events()
    assert (event.study, event.actor) == (study, None)  # routing after a rating: nobody acted by hand
    assert event.after == {"waiting_for": "reader", "reason": ALL_READ}

    # Routing again for the same reason adds nothing.
    route_unrouted(study.pk, actor=coordinator)
    assert len(events()) == 1

    # A new reason is recorded, with who acted.
    StudyMember.objects.filter(study=study).update(active=False)
    route_unrouted(study.pk, actor=coordinator)
    example.refresh_from_db()
    assert (example.unrouted, example.unrouted_reason) == (True, NO_READER)
    assert [(e.actor, e.after) for e in events()] == [
        (None, {"waiting_for": "reader", "reason": ALL_READ}),
        (coordinator, {"waiting_for": "reader", "reason": NO_READER}),
    ]


def test_a_waiting_example_retried_for_the_same_reason_is_audited_once(coordinator):
    # A refill after a void finds nobody; enrolling an adjudicator (which retries every unrouted
    # example) changes nothing for it, and writes nothing.
    from annotation.models import AuditAction, AuditEvent
    from consensus.assignment import add_study_member

    study, _, example = _task2_alone(keep_versions_apart=False)
    first, _ = rate_open_reads(example, RatingChoice.EQUIVALENT, RatingChoice.EQUIVALENT)
    void_annotation(first.public_id, actor=coordinator, reason="Wrong report.")
    example.refresh_from_db()
    assert (example.unrouted, example.unrouted_reason) == (True, ALL_READ)

    add_study_member(study, make_user(Role.ADJUDICATOR), MemberRole.ADJUDICATOR, actor=coordinator)

    example.refresh_from_db()
    assert (example.unrouted, example.unrouted_reason) == (True, ALL_READ)
    assert AuditEvent.objects.filter(action=AuditAction.UNROUTED, example=example).count() == 1
