"""Keep versions apart: no path gives a reader both Task 1 examples of one pair.

A reader "has seen" a Task 1 version when they have or had any assignment on it: open, rated,
voided (they read the text) or withdrawn after being shown. Only an assignment withdrawn before
it was ever shown, which is deleted, leaves no trace.
"""

import pytest

from annotation.models import (
    Assignment,
    AssignmentStatus,
    Example,
    ExampleState,
    MemberRole,
    Rating,
    ReportType,
    Role,
    Task,
)
from consensus.assignment import (
    QueueRefused,
    add_study_member,
    assign_example,
    reassign_assignment,
    withdraw_assignment,
)
from consensus.services import NotFound, show_assignment, void_annotation
from tests.factories import make_reading_study, make_user, rate, rate_open_reads

pytestmark = pytest.mark.django_db

REALISTIC, MINOR, MAJOR = Rating.REALISTIC, Rating.MINOR_ISSUES, Rating.MAJOR_ISSUES


def _versions(study) -> tuple[Example, Example]:
    examples = Example.objects.filter(study=study, task=Task.REALISM).select_related("study")
    return examples.get(report_type=ReportType.ORIGINAL), examples.get(report_type=ReportType.ALTERNATIVE)


def _readers_of(example: Example) -> set[int]:
    return set(Assignment.objects.filter(example=example).values_list("reader_id", flat=True))


def test_a_third_read_never_goes_to_a_reader_of_the_other_version(db):
    # Four readers: the original's two and the alternative's two. The alternative's readers
    # disagree; the only readers who have not read the alternative hold the original.
    study, _, _ = make_reading_study(pairs=1, readers=4)
    original, alternative = _versions(study)

    rate_open_reads(alternative, REALISTIC, MAJOR)

    alternative.refresh_from_db()
    assert alternative.state == ExampleState.THIRD_READ
    assert not alternative.assignments.open().exists()
    assert not (_readers_of(original) & _readers_of(alternative))
    assert alternative.unrouted
    assert "other version" in alternative.unrouted_reason
    assert "keeps the two versions apart" in alternative.unrouted_reason


def test_a_new_reader_takes_the_waiting_third_read(db):
    study, _, _ = make_reading_study(pairs=1, readers=4)
    _, alternative = _versions(study)
    rate_open_reads(alternative, REALISTIC, MAJOR)
    newcomer = make_user(Role.READER)

    add_study_member(study, newcomer, MemberRole.READER, actor=make_user(Role.COORDINATOR))

    alternative.refresh_from_db()
    assert not alternative.unrouted and alternative.unrouted_reason == ""
    assert alternative.assignments.open().get().reader == newcomer


def test_a_voided_read_of_one_version_bars_the_reader_from_the_other(db):
    # The original's first reader is voided; the alternative then needs a reader after a void of
    # its own, and the voided original reader would be the least loaded one.
    study, _, _ = make_reading_study(pairs=1, readers=5)
    coordinator = make_user(Role.COORDINATOR)
    original, alternative = _versions(study)
    (voided, _) = rate_open_reads(original, REALISTIC, REALISTIC)
    void_annotation(voided.public_id, actor=coordinator, reason="Wrong report.")
    original_readers = _readers_of(original)
    assert voided.reader_id in original_readers

    (first_alt, _) = rate_open_reads(alternative, REALISTIC, REALISTIC)
    void_annotation(first_alt.public_id, actor=coordinator, reason="Wrong report.")

    alternative.refresh_from_db()
    refill = alternative.assignments.open().first()
    assert refill is None or refill.reader_id not in original_readers
    assert not (_readers_of(original) & _readers_of(alternative))


def test_manual_assignment_refuses_a_reader_whose_read_of_the_other_version_was_voided(coordinator):
    study, _, _ = make_reading_study(pairs=1, readers=5)
    original, alternative = _versions(study)
    (voided, _) = rate_open_reads(original, REALISTIC, REALISTIC)
    void_annotation(voided.public_id, actor=coordinator, reason="Wrong report.")
    rate_open_reads(alternative, REALISTIC, MAJOR)  # needs a third reader
    alternative.refresh_from_db()
    for third in alternative.assignments.open():
        withdraw_assignment(third.public_id, actor=coordinator)

    with pytest.raises(QueueRefused, match="other version"):
        assign_example(alternative.public_id, voided.reader, actor=coordinator)


def test_a_withdrawn_assignment_that_was_shown_bars_the_reader_from_both_versions(coordinator):
    study, _, _ = make_reading_study(pairs=1, readers=5)
    original, alternative = _versions(study)
    shown = original.assignments.open().select_related("example__study").first()
    show_assignment(shown)

    withdraw_assignment(shown.public_id, actor=coordinator)

    shown.refresh_from_db()
    assert shown.status == AssignmentStatus.WITHDRAWN
    with pytest.raises(QueueRefused, match="already has"):
        assign_example(original.public_id, shown.reader, actor=coordinator)
    with pytest.raises(QueueRefused):
        assign_example(alternative.public_id, shown.reader, actor=coordinator)


def test_a_withdrawn_assignment_never_shown_may_go_back_to_the_same_reader(coordinator):
    study, _, _ = make_reading_study(pairs=1, readers=5)
    original, _ = _versions(study)
    unseen = original.assignments.open().first()

    withdraw_assignment(unseen.public_id, actor=coordinator)

    assert not Assignment.objects.filter(pk=unseen.pk).exists()
    again = assign_example(original.public_id, unseen.reader, actor=coordinator)
    assert again.reader == unseen.reader


def test_reassignment_refuses_a_reader_of_the_other_version(coordinator):
    study, _, _ = make_reading_study(pairs=1, readers=5)
    original, alternative = _versions(study)
    moving = original.assignments.open().first()
    holder = alternative.assignments.open().first().reader

    with pytest.raises(QueueRefused, match="other version"):
        reassign_assignment(moving.public_id, holder, actor=coordinator)

    assert Assignment.objects.get(pk=moving.pk).status == AssignmentStatus.OPEN


def test_a_withdrawn_shown_read_is_a_404_for_its_reader_like_one_that_never_existed(client, coordinator):
    study, _, _ = make_reading_study(pairs=1, readers=5)
    original, _ = _versions(study)
    shown = original.assignments.open().select_related("reader", "example__study").first()
    show_assignment(shown)
    withdraw_assignment(shown.public_id, actor=coordinator)
    client.force_login(shown.reader)

    assert client.get(f"/read/a/{shown.public_id}/").status_code == 404
    assert client.get(f"/api/reading/{shown.public_id}/").status_code == 404
    with pytest.raises(NotFound):
        rate(shown, REALISTIC, "")
