"""One exam in several pairs (one per variation, all with the exam's original): no reader is given
one report text twice, and, when the study keeps versions apart, no reader gets two items of one
exam. On every routing path: assignment, third reads, late joiners, by hand, reassignment."""

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
    Study,
    StudyMember,
    Task,
)
from consensus.assignment import QueueRefused, add_study_member, assign_example, assign_readers, reassign_assignment
from consensus.blinding import readers_needed
from tests.factories import make_reading_study, make_user, rate
from tests.invariants import exams_given_twice, texts_shown_twice

pytestmark = pytest.mark.django_db

EXAM_IN_TWO_PAIRS = "mimic-cxr 52000000"


def _disagree(example: Example) -> None:
    """Rate the example's two open initial reads apart: a third read is routed (or the example unrouted)."""
    first, second = example.assignments.filter(status=AssignmentStatus.OPEN).select_related("reader").order_by("slot")
    low, high = (
        (RatingChoice.REALISTIC, RatingChoice.MAJOR_ISSUES)
        if example.task == Task.REALISM
        else (RatingChoice.EQUIVALENT, RatingChoice.MAJOR_DISCREPANCY)
    )
    rate(first, low, "")
    rate(second, high)


def _holder_of(example: Example):
    return example.assignments.select_related("reader").first().reader


@pytest.mark.parametrize(
    ("keep_apart", "tasks", "initial", "third"),
    [
        (True, None, 12, 18),  # six items of the exam in two pairs
        (True, [Task.REALISM], 8, 12),  # its four Task 1 items
        # The four items that show its original (two Task 1, two Task 2); a Task 2 third read must
        # also miss the readers of its pair's rewrite: five items of three reads.
        (False, None, 8, 15),
        (False, [Task.EQUIVALENCE], 4, 6),
    ],
)
def test_readers_needed_is_set_by_the_exam_in_the_most_pairs(keep_apart, tasks, initial, third):
    study, _, _ = make_reading_study(pairs=3, pairs_per_exam=2, readers=0, assign=False, keep_versions_apart=keep_apart)

    needed = readers_needed(study, tasks)

    assert (needed.initial, needed.with_third_reads) == (initial, third)
    assert needed.driving_exams == [EXAM_IN_TWO_PAIRS]
    assert EXAM_IN_TWO_PAIRS in needed.explanation
    assert f"need {initial} different readers, and up to {third}" in needed.explanation


def test_readers_needed_names_no_exam_when_every_exam_is_in_one_pair():
    study, _, _ = make_reading_study(pairs=2, readers=0, assign=False)

    needed = readers_needed(study)

    assert (needed.initial, needed.with_third_reads, needed.driving_exams) == (6, 9, [])
    assert "each exam has at most 3 items" in needed.explanation


def test_assignment_refuses_too_few_readers_naming_the_exam_and_assigns_nothing():
    study, _, _ = make_reading_study(pairs=3, pairs_per_exam=2, readers=11, assign=False)

    with pytest.raises(QueueRefused) as refused:
        assign_readers(study, actor=make_user(Role.COORDINATOR))

    assert "has 11 active readers and needs at least 12" in str(refused.value)
    assert EXAM_IN_TWO_PAIRS in str(refused.value)
    assert "sample at most one pair per exam" in str(refused.value)
    assert not Assignment.objects.filter(study=study).exists()


@pytest.mark.parametrize("keep_apart", [True, False])
def test_assignment_never_gives_one_text_twice_and_kept_apart_one_item_per_exam(keep_apart):
    study, _, _ = make_reading_study(
        pairs=6, pairs_per_exam=2, readers_beyond_initial=1, keep_versions_apart=keep_apart
    )

    assert texts_shown_twice(study) == {}
    if keep_apart:
        assert exams_given_twice(study) == {}
    for example in Example.objects.filter(study=study):
        assert example.assignments.filter(status=AssignmentStatus.OPEN).count() == 2


def test_without_versions_apart_a_reader_may_get_both_versions_but_never_a_text_twice():
    # The weaker, explicit setting: two items of one exam for one reader, as long as their texts differ.
    study, _, _ = make_reading_study(pairs=6, pairs_per_exam=2, readers_beyond_initial=0, keep_versions_apart=False)

    assert texts_shown_twice(study) == {}
    assert exams_given_twice(study) != {}


def test_third_reads_keep_the_exam_apart_and_use_every_reader_needed():
    study, _, _ = make_reading_study(pairs=2, pairs_per_exam=2)  # 18 readers: every third read can be routed
    for example in Example.objects.filter(study=study).order_by("pk"):
        _disagree(example)

    assert Example.objects.filter(study=study, state=ExampleState.THIRD_READ, unrouted=False).count() == 6
    assert exams_given_twice(study) == {}
    assert texts_shown_twice(study) == {}


def test_a_third_read_with_nobody_left_outside_the_exam_is_unrouted_then_goes_to_a_late_joiner():
    study, _, _ = make_reading_study(pairs=2, pairs_per_exam=2, readers_beyond_initial=0)
    example = Example.objects.filter(study=study, task=Task.REALISM).order_by("pk").first()

    _disagree(example)

    example.refresh_from_db()
    assert example.unrouted
    assert "another item of the same exam" in example.unrouted_reason
    assert EXAM_IN_TWO_PAIRS in example.unrouted_reason
    late = make_user(Role.READER)
    add_study_member(study, late, MemberRole.READER, actor=make_user(Role.COORDINATOR))
    example.refresh_from_db()
    assert not example.unrouted
    assert example.assignments.get(slot=3).reader == late
    assert exams_given_twice(study) == {}


def test_by_hand_a_reader_with_another_item_of_the_exam_is_refused_and_nothing_changes():
    study, _, _ = make_reading_study(pairs=2, pairs_per_exam=2, readers_beyond_initial=1)
    first_pair, second_pair = sorted({e.pair for e in Example.objects.filter(study=study)}, key=lambda p: p.pk)
    assignment = Example.objects.get(pair=first_pair, task=Task.EQUIVALENCE).assignments.first()
    holder = _holder_of(Example.objects.get(pair=second_pair, report_type=ReportType.ALTERNATIVE))
    coordinator = make_user(Role.COORDINATOR)
    before = sorted(Assignment.objects.filter(study=study).values_list("pk", "reader_id", "status"))

    with pytest.raises(QueueRefused, match="another item of the same exam"):
        reassign_assignment(assignment.public_id, holder, actor=coordinator)
    with pytest.raises(QueueRefused, match="another item of the same exam"):
        assign_example(
            Example.objects.get(pair=first_pair, report_type=ReportType.ORIGINAL).public_id, holder, actor=coordinator
        )

    assert sorted(Assignment.objects.filter(study=study).values_list("pk", "reader_id", "status")) == before


def test_by_hand_without_versions_apart_the_same_text_is_refused_another_text_of_the_exam_is_not():
    study, _, _ = make_reading_study(pairs=2, pairs_per_exam=2, keep_versions_apart=False, assign=False, readers=9)
    coordinator = make_user(Role.COORDINATOR)
    reader = StudyMember.objects.filter(study=study, role=MemberRole.READER).first().user
    first_pair, second_pair = sorted({e.pair for e in Example.objects.filter(study=study)}, key=lambda p: p.pk)
    equivalence = Example.objects.get(pair=first_pair, task=Task.EQUIVALENCE)
    assign_example(equivalence.public_id, reader, actor=coordinator)

    other_original = Example.objects.get(pair=second_pair, report_type=ReportType.ORIGINAL)
    with pytest.raises(QueueRefused, match="shows the same report text"):
        assign_example(other_original.public_id, reader, actor=coordinator)
    own_rewrite = Example.objects.get(pair=first_pair, report_type=ReportType.ALTERNATIVE)
    with pytest.raises(QueueRefused, match="shows the same report text"):
        assign_example(own_rewrite.public_id, reader, actor=coordinator)

    other_rewrite = Example.objects.get(pair=second_pair, report_type=ReportType.ALTERNATIVE)
    assign_example(other_rewrite.public_id, reader, actor=coordinator)
    assert texts_shown_twice(study) == {}


@pytest.mark.parametrize("keep_apart", [True, False])
@pytest.mark.parametrize("pairs_per_exam", [1, 2])
def test_the_fewest_readers_needed_are_enough_for_every_initial_read_whatever_the_seed(keep_apart, pairs_per_exam):
    # Filled greedily, an exam's items must go most constrained first (Task 2, which shows both
    # texts): a Task 1 rewrite filled before it may take the readers its original left it.
    for seed in range(12):
        study, _, _ = make_reading_study(
            pairs=2, pairs_per_exam=pairs_per_exam, keep_versions_apart=keep_apart, readers=0, assign=False
        )
        Study.objects.filter(pk=study.pk).update(seed=seed)
        for _ in range(readers_needed(study).initial):
            StudyMember.objects.create(study=study, user=make_user(Role.READER), role=MemberRole.READER)

        report = assign_readers(study, actor=make_user(Role.COORDINATOR))

        assert report.unfilled == 0, seed
        assert texts_shown_twice(study) == {}


def test_the_readers_page_says_beforehand_how_many_readers_the_study_needs_and_which_exams(client):
    from django.urls import reverse

    study, _, _ = make_reading_study(pairs=3, pairs_per_exam=2, readers=5, assign=False)
    client.force_login(make_user(Role.COORDINATOR))

    html = client.get(reverse("study_readers", args=[study.slug])).content.decode()

    assert "This study needs at least 12 active readers, 18 to give every third read; it has 5." in html
    assert f"the exams in the most pairs have 6 items ({EXAM_IN_TWO_PAIRS})" in html
    assert "Add readers above first." in html


def test_the_assign_command_and_api_say_what_the_study_needs(client):
    import io

    from django.core.management import call_command

    study, _, _ = make_reading_study(pairs=3, pairs_per_exam=2, readers=13, assign=False)
    out = io.StringIO()
    call_command("assign_readers", study=study.slug, no_progress=True, stdout=out, stderr=io.StringIO())
    assert "This study needs at least 12 active readers, 18 to give every third read; it has 13." in out.getvalue()
    assert EXAM_IN_TWO_PAIRS in out.getvalue()

    client.force_login(make_user(Role.COORDINATOR))
    answer = client.post(f"/api/studies/{study.slug}/assign/", {}, content_type="application/json").json()
    assert answer["readers"].startswith("This study needs at least 12 active readers")


@pytest.mark.parametrize("keep_apart", [True, False])
@pytest.mark.parametrize("pairs_per_exam", [1, 2])
def test_as_many_readers_as_said_give_every_third_read_a_reader(keep_apart, pairs_per_exam):
    # The factory enrols readers_needed(...).with_third_reads readers; every item then disagrees.
    study, _, _ = make_reading_study(pairs=2, pairs_per_exam=pairs_per_exam, keep_versions_apart=keep_apart)
    for example in Example.objects.filter(study=study).order_by("pk"):
        _disagree(example)

    assert not Example.objects.filter(study=study, unrouted=True).exists()
    assert Example.objects.filter(study=study, state=ExampleState.THIRD_READ).count() == 6
    assert texts_shown_twice(study) == {}


def test_one_item_per_exam_is_said_in_the_singular():
    study, _, _ = make_reading_study(pairs=2, readers=0, assign=False)
    assert "each exam has at most 1 item:" in readers_needed(study, [Task.EQUIVALENCE]).explanation
