"""Keep versions apart: no path gives a reader two items of one exam (consensus.blinding).

An exam's items are its pair's two Task 1 versions and its Task 2 (and those of its other pairs,
one per variation). A reader "has seen" an item when they have or had any assignment on it: open,
rated, voided (they read the text) or withdrawn after being shown. Only an assignment withdrawn
before it was ever shown, which is deleted, leaves no trace.
"""

import pytest

from annotation.models import (
    Assignment,
    AssignmentStatus,
    Example,
    ExampleState,
    MemberRole,
    RatingChoice,
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
from consensus.services import NoSuchWork, show_assignment, void_annotation
from tests.factories import make_reading_study, make_user, rate, rate_open_reads

pytestmark = pytest.mark.django_db

REALISTIC, MINOR, MAJOR = RatingChoice.REALISTIC, RatingChoice.MINOR_ISSUES, RatingChoice.MAJOR_ISSUES


KEPT_APART = "another item of the same exam"


def _versions(study) -> tuple[Example, Example]:
    examples = Example.objects.filter(study=study, task=Task.REALISM).select_related("study")
    return examples.get(report_type=ReportType.ORIGINAL), examples.get(report_type=ReportType.ALTERNATIVE)


def _equivalence(study) -> Example:
    return Example.objects.select_related("study").get(study=study, task=Task.EQUIVALENCE)


def _readers_of(example: Example) -> set[int]:
    return set(Assignment.objects.filter(example=example).values_list("reader_id", flat=True))


def test_a_third_read_never_goes_to_a_reader_of_another_item_of_the_exam(db):
    # Six readers: two for each of the exam's three items. The alternative's readers disagree;
    # the only readers who have not read the alternative hold the original or the Task 2 item.
    study, _, _ = make_reading_study(pairs=1, readers=6)
    original, alternative = _versions(study)
    equivalence = _equivalence(study)

    rate_open_reads(alternative, REALISTIC, MAJOR)

    alternative.refresh_from_db()
    assert alternative.state == ExampleState.THIRD_READ
    assert not alternative.assignments.open().exists()
    assert not (_readers_of(original) & _readers_of(alternative))
    assert not (_readers_of(equivalence) & (_readers_of(original) | _readers_of(alternative)))
    assert alternative.unrouted
    assert KEPT_APART in alternative.unrouted_reason
    assert "keeps the items of an exam apart" in alternative.unrouted_reason
    assert f"(exam mimic-cxr {alternative.pair.source_study_id})" in alternative.unrouted_reason


def test_a_third_read_of_task_2_never_goes_to_a_reader_of_the_exams_task_1(db):
    # One reader beyond the six: the Task 2 item's third read goes to them, never to a Task 1 reader.
    study, readers, _ = make_reading_study(pairs=1, readers_beyond_initial=1)
    original, alternative = _versions(study)
    equivalence = _equivalence(study)
    task1_readers = _readers_of(original) | _readers_of(alternative)
    (outsider,) = [r for r in readers if r.pk not in task1_readers | _readers_of(equivalence)]

    rate_open_reads(equivalence, RatingChoice.EQUIVALENT, RatingChoice.MAJOR_DISCREPANCY)

    assert equivalence.assignments.open().get().reader == outsider


def test_a_new_reader_takes_the_waiting_third_read(db):
    study, _, _ = make_reading_study(pairs=1, readers=6)
    _, alternative = _versions(study)
    rate_open_reads(alternative, REALISTIC, MAJOR)
    newcomer = make_user(Role.READER)

    add_study_member(study, newcomer, MemberRole.READER, actor=make_user(Role.COORDINATOR))

    alternative.refresh_from_db()
    assert not alternative.unrouted and alternative.unrouted_reason == ""
    assert alternative.assignments.open().get().reader == newcomer


def test_a_voided_read_of_one_version_bars_the_reader_from_the_other(db):
    # The original's first reader is voided (a reader outside the exam reads it again); the
    # alternative then needs a reader after a void of its own, and the voided original reader,
    # with nothing open now, would be among the least loaded. Two readers beyond the six: one
    # for each refill, so the second has a choice.
    study, _, _ = make_reading_study(pairs=1, readers_beyond_initial=2)
    coordinator = make_user(Role.COORDINATOR)
    original, alternative = _versions(study)
    equivalence = _equivalence(study)
    (voided, _) = rate_open_reads(original, REALISTIC, REALISTIC)
    void_annotation(voided.public_id, actor=coordinator, reason="Wrong report.")
    original_readers = _readers_of(original)
    assert voided.reader_id in original_readers
    assert original.assignments.open().exists()  # refilled

    (first_alt, _) = rate_open_reads(alternative, REALISTIC, REALISTIC)
    void_annotation(first_alt.public_id, actor=coordinator, reason="Wrong report.")

    alternative.refresh_from_db()
    refill = alternative.assignments.open().get()
    assert refill.reader_id not in _readers_of(original) | _readers_of(equivalence)
    assert not (_readers_of(original) & _readers_of(alternative))
    assert not (_readers_of(equivalence) & (_readers_of(original) | _readers_of(alternative)))


def test_manual_assignment_refuses_a_reader_whose_read_of_the_other_version_was_voided(coordinator):
    study, _, _ = make_reading_study(pairs=1, readers_beyond_initial=1)
    original, alternative = _versions(study)
    (voided, _) = rate_open_reads(original, REALISTIC, REALISTIC)
    void_annotation(voided.public_id, actor=coordinator, reason="Wrong report.")
    rate_open_reads(alternative, REALISTIC, MAJOR)  # needs a third reader
    alternative.refresh_from_db()
    for third in alternative.assignments.open():
        withdraw_assignment(third.public_id, actor=coordinator)

    with pytest.raises(QueueRefused, match=KEPT_APART):
        assign_example(alternative.public_id, voided.reader, actor=coordinator)


def test_manual_assignment_refuses_a_reader_of_the_exams_task_2_for_either_version(coordinator):
    study, readers, _ = make_reading_study(pairs=1, readers_beyond_initial=1)
    original, alternative = _versions(study)
    (rated,) = rate_open_reads(_equivalence(study), RatingChoice.EQUIVALENT)
    for version in (original, alternative):
        version.assignments.open().first().delete()  # a free slot on each
    before = set(Assignment.objects.values_list("pk", "reader_id", "status"))

    for version in (original, alternative):
        with pytest.raises(QueueRefused, match=KEPT_APART):
            assign_example(version.public_id, rated.reader, actor=coordinator)

    assert set(Assignment.objects.values_list("pk", "reader_id", "status")) == before
    outsider = next(r for r in readers if not Assignment.objects.filter(reader=r).exists())
    assert assign_example(original.public_id, outsider, actor=coordinator).reader == outsider


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
    with pytest.raises(QueueRefused, match=KEPT_APART):
        assign_example(alternative.public_id, shown.reader, actor=coordinator)
    with pytest.raises(QueueRefused, match=KEPT_APART):
        assign_example(_equivalence(study).public_id, shown.reader, actor=coordinator)


def test_a_withdrawn_assignment_never_shown_may_go_back_to_the_same_reader(coordinator):
    study, _, _ = make_reading_study(pairs=1, readers=5)
    original, _ = _versions(study)
    unseen = original.assignments.open().first()

    withdraw_assignment(unseen.public_id, actor=coordinator)

    assert not Assignment.objects.filter(pk=unseen.pk).exists()
    again = assign_example(original.public_id, unseen.reader, actor=coordinator)
    assert again.reader == unseen.reader


def test_reassignment_refuses_a_reader_of_another_item_of_the_exam(coordinator):
    study, readers, _ = make_reading_study(pairs=1, readers_beyond_initial=1)
    original, alternative = _versions(study)
    moving = original.assignments.open().first()
    holders = [alternative.assignments.open().first().reader, _equivalence(study).assignments.open().first().reader]

    for holder in holders:
        with pytest.raises(QueueRefused, match=KEPT_APART):
            reassign_assignment(moving.public_id, holder, actor=coordinator)

    assert Assignment.objects.get(pk=moving.pk).status == AssignmentStatus.OPEN
    (outsider,) = [r for r in readers if not Assignment.objects.filter(reader=r).exists()]
    assert reassign_assignment(moving.public_id, outsider, actor=coordinator).reader == outsider


def test_the_pairs_of_one_exam_are_kept_apart_too(coordinator):
    # Two pairs (two variations) of one exam share its original: its six items go to twelve
    # different readers, and one pair's reader is refused the other pair's rewrite by hand.
    study, readers, _ = make_reading_study(pairs=2, pairs_per_exam=2, readers=12)
    items = Example.objects.filter(study=study)
    assert items.count() == 6 and len({e.pair.source_study_id for e in items}) == 1
    per_reader = [Assignment.objects.filter(reader=r).count() for r in readers]
    assert per_reader == [1] * 12
    first, second = sorted({e.pair_id for e in items})
    rewrite = items.get(pair_id=second, task=Task.REALISM, report_type=ReportType.ALTERNATIVE)
    reader_of_first = Assignment.objects.filter(example__pair_id=first).first().reader
    rewrite.assignments.open().first().delete()

    with pytest.raises(QueueRefused, match=KEPT_APART):
        assign_example(rewrite.public_id, reader_of_first, actor=coordinator)


def test_a_withdrawn_shown_read_is_a_404_for_its_reader_like_one_that_never_existed(client, coordinator):
    study, _, _ = make_reading_study(pairs=1, readers=5)
    original, _ = _versions(study)
    shown = original.assignments.open().select_related("reader", "example__study").first()
    show_assignment(shown)
    withdraw_assignment(shown.public_id, actor=coordinator)
    client.force_login(shown.reader)

    assert client.get(f"/read/a/{shown.public_id}/").status_code == 404
    assert client.get(f"/api/reading/{shown.public_id}/").status_code == 404
    with pytest.raises(NoSuchWork):
        rate(shown, REALISTIC, "")


def test_not_kept_apart_a_reader_may_read_both_versions_but_never_task_2_with_either(coordinator):
    # One report text is never shown twice: Task 2 shows both the original and the rewrite.
    study, readers, _ = make_reading_study(pairs=1, keep_versions_apart=False, readers=9, assign=False)
    original, alternative = _versions(study)
    equivalence = _equivalence(study)
    both, original_only, alternative_only = readers[:3]

    assign_example(original.public_id, both, actor=coordinator)
    assign_example(alternative.public_id, both, actor=coordinator)
    assign_example(original.public_id, original_only, actor=coordinator)
    assign_example(alternative.public_id, alternative_only, actor=coordinator)

    for reader in (both, original_only, alternative_only):
        with pytest.raises(QueueRefused, match="an item that shows the same report text"):
            assign_example(equivalence.public_id, reader, actor=coordinator)
    assert not equivalence.assignments.exists()
    assert assign_example(equivalence.public_id, readers[3], actor=coordinator).reader == readers[3]
