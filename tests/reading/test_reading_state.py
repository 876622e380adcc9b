"""annotation.reading: the saved notice, the rating taken back and the home's order are each reader's own."""

from datetime import timedelta

import pytest

from annotation.models import Assignment, AssignmentStatus, RatingChoice, ReaderQueue, ReportType, Task
from annotation.reading import (
    ShownReport,
    home_studies,
    present,
    queue_position,
    reader_queues,
    saved_notice,
    taken_back_rating,
)
from consensus.services import show_assignment, undo_last_rating
from tests.factories import make_pair, make_reading_study, make_study, rate

pytestmark = pytest.mark.django_db


@pytest.fixture
def study():
    study, _, _ = make_reading_study(pairs=4, readers=4, keep_versions_apart=False)
    study.undo_window_seconds = 120
    study.save(update_fields=["undo_window_seconds"])
    return study


def _open(reader, study) -> list[Assignment]:
    return list(
        Assignment.objects.filter(reader=reader, study=study, task=Task.EQUIVALENCE, status=AssignmentStatus.OPEN)
        .select_related("reader", "example__study")
        .order_by("queue_order")
    )


def _rate(assignment: Assignment, rating: str = RatingChoice.MINOR_DISCREPANCY, rationale: str = "Mine."):
    show_assignment(assignment)
    return rate(assignment, rating, rationale).annotation


def _shared_example(study):
    """An example two readers both hold, and their two reads of it."""
    for example in study.examples.filter(task=Task.EQUIVALENCE):
        reads = list(example.assignments.select_related("reader", "example__study").order_by("slot"))
        if len(reads) == 2:
            return reads
    raise AssertionError("no shared example")


def test_the_saved_notice_is_about_the_readers_own_unsettled_rating_only(study, django_assert_num_queries):
    mine, colleagues = _shared_example(study)
    _rate(colleagues, RatingChoice.MAJOR_DISCREPANCY, "Theirs.")

    # A colleague's rating still in its window says nothing to me.
    assert saved_notice(mine.reader) is None

    _rate(mine)
    with django_assert_num_queries(2):
        notice = saved_notice(mine.reader)
    assert (notice.rating_label, notice.undoable, notice.study_slug) == ("Minor Discrepancy", True, study.slug)


def test_a_rating_settled_by_the_next_submit_is_not_announced_again(study):
    reader = _shared_example(study)[0].reader
    first, second = _open(reader, study)[:2]
    _rate(first)
    _rate(second)  # settles the first
    undo_last_rating(reader)  # takes the second back

    assert saved_notice(reader) is None


def test_the_rating_taken_back_is_this_readers_of_this_read(study):
    mine, colleagues = _shared_example(study)
    reader = mine.reader
    _rate(mine, RatingChoice.MINOR_DISCREPANCY, "My first thought.")
    undo_last_rating(reader)
    # Afterwards the colleague takes one back on the same example, and I take back another read.
    _rate(colleagues, RatingChoice.MAJOR_DISCREPANCY, "Theirs.")
    undo_last_rating(colleagues.reader)
    _rate(Assignment.objects.select_related("reader", "example__study").get(pk=mine.pk), RatingChoice.EQUIVALENT, "")
    other = _open(reader, study)[0]
    _rate(other, RatingChoice.MAJOR_DISCREPANCY, "Another read.")
    undo_last_rating(reader)

    mine.refresh_from_db()
    assert taken_back_rating(mine) == {"rating": RatingChoice.MINOR_DISCREPANCY, "rationale": "My first thought."}
    other.refresh_from_db()
    assert taken_back_rating(other) == {"rating": RatingChoice.MAJOR_DISCREPANCY, "rationale": "Another read."}


def test_a_study_with_only_an_adjudication_waiting_comes_first_on_the_home():
    queue = {"study_slug": "a", "study_name": "A", "task": Task.REALISM, "waiting": False}
    adjudication = {"study_slug": "b", "study_name": "B", "waiting": True}

    assert [study["slug"] for study in home_studies([queue], [adjudication])] == ["b", "a"]
    assert [study["waiting"] for study in home_studies([queue], [adjudication])] == [True, False]


def _only_the_readers_own_counter_says(rated: int, reader, study) -> None:
    """Give every other counter a larger count, all in rows older than the reader's own (made again,
    last): the colleagues' in the same queue, the reader's in the other task and in another study.
    Only a query of the reader's own queue can then find `rated`."""
    ReaderQueue.objects.create(reader=reader, study=make_study("elsewhere"), task=Task.EQUIVALENCE, rated_count=9)
    ReaderQueue.objects.filter(study=study, task=Task.EQUIVALENCE).exclude(reader=reader).update(rated_count=7)
    ReaderQueue.objects.filter(reader=reader, study=study, task=Task.REALISM).update(rated_count=5)
    own = ReaderQueue.objects.get(reader=reader, study=study, task=Task.EQUIVALENCE)
    own.delete()
    ReaderQueue.objects.create(
        reader=reader, study=study, task=Task.EQUIVALENCE, open_count=own.open_count, rated_count=rated
    )


def test_the_notices_item_number_is_this_readers_count_in_this_queue(study):
    mine, _ = _shared_example(study)
    saved = _rate(mine)
    _only_the_readers_own_counter_says(1, mine.reader, study)

    assert saved_notice(mine.reader, saved=saved).item == 1


def test_a_rating_can_be_taken_back_until_its_last_second(study):
    mine, _ = _shared_example(study)
    saved = _rate(mine)

    last_second = saved_notice(mine.reader, now=saved.settle_by - timedelta(milliseconds=500))
    assert (last_second.undoable, last_second.seconds_left) == (True, 1)
    assert saved_notice(mine.reader, saved=saved, now=saved.settle_by).undoable is False


def test_the_queues_are_listed_by_study_name_then_task():
    # (The home puts Task 1 first within a study: home_studies.)
    # Two pairs: a reader holds Task 1 of one and Task 2 of the other (never both tasks of one pair).
    study_b, readers, _ = make_reading_study(pairs=2, readers=4, slug="b-study", keep_versions_apart=False)
    study_b.name = "B"
    study_b.save(update_fields=["name"])
    study_a, _, _ = make_reading_study(pairs=1, readers=0, slug="a-study", assign=False, keep_versions_apart=False)
    study_a.name = "A"
    study_a.save(update_fields=["name"])
    reader = readers[0]
    ReaderQueue.objects.create(reader=reader, study=study_a, task=Task.EQUIVALENCE, open_count=1)

    assert [(q["study_name"], q["task"]) for q in reader_queues(reader)] == [
        ("A", Task.EQUIVALENCE),
        ("B", Task.EQUIVALENCE),
        ("B", Task.REALISM),
    ]


@pytest.mark.parametrize("report_a_type", [ReportType.ORIGINAL, ReportType.ALTERNATIVE])
def test_task_2_shows_both_reports_once_each_in_the_drawn_order_with_the_context(report_a_type):
    pair = make_pair(
        make_study(),
        original_findings="Original findings.",
        original_impression="Original impression.",
        alternative_findings="Rewritten findings.",
        alternative_impression="Rewritten impression.",
        indication="Cough.",
        comparison="None.",
        technique="PA and lateral.",
    )
    other = ReportType.ALTERNATIVE if report_a_type == ReportType.ORIGINAL else ReportType.ORIGINAL

    item = present(Task.EQUIVALENCE, pair, report_a_type=report_a_type)

    assert item.reports == (
        ShownReport("Report A", *pair.report(report_a_type)),
        ShownReport("Report B", *pair.report(other)),
    )
    assert item.context == (("Indication", "Cough."), ("Comparison", "None."), ("Technique", "PA and lateral."))


def test_item_n_is_this_readers_count_in_this_queue_plus_one(study):
    mine, _ = _shared_example(study)
    _only_the_readers_own_counter_says(2, mine.reader, study)

    assert queue_position(mine) == 3
