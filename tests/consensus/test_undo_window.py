"""The undo window: a rating settles at its reader's next submit or when the window closes; until
then routing ignores it and its reader may take it back (consensus.services)."""

import uuid
from datetime import timedelta

import pytest
from django.core.management import call_command
from django.db import IntegrityError, transaction
from django.tasks import default_task_backend
from django.test import TestCase, override_settings
from django.utils import timezone
from django_tasks_db.models import DBTaskResult

from annotation.models import (
    Annotation,
    Assignment,
    AssignmentStatus,
    AuditAction,
    AuditEvent,
    Example,
    ExampleState,
    MemberRole,
    RatingChoice,
    ReaderQueue,
    Role,
    Study,
    StudyMember,
    Task,
)
from annotation.reading import next_assignment, saved_notice, taken_back_rating
from consensus.assignment import assign_readers
from consensus.models import ConsensusLabel
from consensus.services import (
    SubmissionRefused,
    UndoRefused,
    settle_due_ratings,
    settle_ratings_task,
    settlement_run_after,
    show_assignment,
    submit_annotation,
    undo_last_rating,
    void_annotation,
)
from exports.building import build_release
from tests.factories import make_reading_study, make_user

pytestmark = pytest.mark.django_db

WINDOW = 120


@pytest.fixture
def study():
    study, _, _ = make_reading_study(pairs=2, readers=4, keep_versions_apart=False)
    study.undo_window_seconds = WINDOW
    study.save(update_fields=["undo_window_seconds"])
    return study


def _equivalence(study) -> Example:
    return Example.objects.filter(study=study, task=Task.EQUIVALENCE).order_by("pk").first()


def _reads(example: Example) -> list[Assignment]:
    return list(example.assignments.select_related("reader", "example__study").order_by("slot"))


def _rate(assignment: Assignment, rating: str | None = None, *, token: uuid.UUID | None = None):
    show_assignment(assignment)
    rating = rating or (RatingChoice.EQUIVALENT if assignment.task == Task.EQUIVALENCE else RatingChoice.REALISTIC)
    return submit_annotation(
        reader=assignment.reader,
        assignment_id=assignment.public_id,
        rating=rating,
        rationale="" if rating in (RatingChoice.EQUIVALENT, RatingChoice.REALISTIC) else "A slip.",
        form_token=token or uuid.uuid4(),
        require_shown=True,
    ).annotation


def _other_open_read(reader, but: Example) -> Assignment:
    return (
        Assignment.objects.filter(reader=reader, status=AssignmentStatus.OPEN)
        .exclude(example=but)
        .select_related("reader", "example__study")
        .order_by("pk")
        .first()
    )


def _later(seconds: int = WINDOW + 1):
    return timezone.now() + timedelta(seconds=seconds)


def test_a_rating_is_stored_at_once_but_routing_waits_for_it_to_settle(study):
    example = _equivalence(study)
    first, second = _reads(example)

    one, two = _rate(first), _rate(second)

    example.refresh_from_db()
    assert Annotation.objects.filter(example=example).count() == 2
    assert one.settled_at is None and two.settled_at is None
    assert abs(one.settle_by - (one.created_at + timedelta(seconds=WINDOW))) < timedelta(seconds=1)
    assert example.state == ExampleState.WAITING
    assert not ConsensusLabel.objects.filter(example=example).exists()


def test_routing_acts_when_the_window_closes(study):
    example = _equivalence(study)
    first, second = _reads(example)
    _rate(first, RatingChoice.EQUIVALENT)
    _rate(second, RatingChoice.MAJOR_DISCREPANCY)
    # The study's four readers all read a text of this pair (Task 2 shows both): its third read
    # needs a reader who has read neither Task 1 version, enrolled here without routing anything.
    newcomer = make_user(Role.READER)
    StudyMember.objects.create(study=study, user=newcomer, role=MemberRole.READER)

    assert settle_due_ratings(now=_later(WINDOW - 5)) == 0
    assert settle_due_ratings(now=_later()) == 2

    example.refresh_from_db()
    assert example.state == ExampleState.THIRD_READ
    assert example.assignments.open().get().reader == newcomer
    assert not Annotation.objects.filter(example=example, settled_at__isnull=True).exists()


def test_the_readers_next_submit_settles_their_previous_rating(study):
    example = _equivalence(study)
    first, second = _reads(example)
    _rate(first)
    settle_due_ratings(now=_later())  # the first read settles on time
    previous = _rate(second)

    _rate(_other_open_read(second.reader, but=example))

    previous.refresh_from_db()
    example.refresh_from_db()
    assert previous.settled_at is not None and previous.settled_at < previous.settle_by
    assert example.state == ExampleState.CONSENSUS


def test_a_rating_another_tab_stores_while_the_submit_locks_makes_it_start_again(study, monkeypatch):
    # The lock reads the reader's unsettled rating along, and the submit reads it again once locked: a
    # rating another tab stored in between has an example this submit did not lock, so it starts again.
    from consensus import services

    example = _equivalence(study)
    rated = _reads(example)[1]
    reader = rated.reader
    previous = _rate(rated)
    this_tab = _other_open_read(reader, but=example)
    other_tab = (
        Assignment.objects.filter(reader=reader, status=AssignmentStatus.OPEN)
        .exclude(example__in=[example, this_tab.example])
        .select_related("reader", "example__study")
        .order_by("pk")
        .first()
    )
    lock, own, moved, meanwhile = services._lock_with_unsettled, services._own_assignment_with_rating, [], [other_tab]

    def another_tab_meanwhile(read):
        locked = lock(read)
        if meanwhile:
            _rate(meanwhile.pop())  # settles `previous` and leaves its own rating unsettled
        return locked

    def recording(read, unsettled):
        try:
            return own(read, unsettled)
        except services._UnsettledRatingMoved:
            moved.append(unsettled)
            raise

    monkeypatch.setattr(services, "_lock_with_unsettled", another_tab_meanwhile)
    monkeypatch.setattr(services, "_own_assignment_with_rating", recording)
    stored = _rate(this_tab)

    assert moved == [(previous.pk, example.pk)]
    previous.refresh_from_db()
    assert previous.settled_at is not None
    assert list(Annotation.objects.filter(reader=reader, settled_at__isnull=True)) == [stored]


def test_a_reader_has_at_most_one_unsettled_rating_in_the_database(study):
    example = _equivalence(study)
    first, _ = _reads(example)
    rated = _rate(first)
    other = _other_open_read(first.reader, but=example)

    with pytest.raises(IntegrityError), transaction.atomic():
        Annotation.objects.create(
            assignment=other,
            example=other.example,
            reader=other.reader,
            task=other.task,
            rating=RatingChoice.REALISTIC if other.task == Task.REALISM else RatingChoice.EQUIVALENT,
            form_token=uuid.uuid4(),
            settle_by=rated.settle_by,
            settled_at=None,
        )


def test_undo_takes_the_rating_back_and_puts_its_item_first_in_the_queue(study):
    example = _equivalence(study)
    first, _ = _reads(example)
    reader = first.reader
    before = ReaderQueue.objects.get(reader=reader, study=study, task=Task.EQUIVALENCE)
    annotation = _rate(first, RatingChoice.MINOR_DISCREPANCY)

    result = undo_last_rating(reader)

    assert (result.rating, result.rationale) == (RatingChoice.MINOR_DISCREPANCY, "A slip.")
    assert not Annotation.objects.filter(pk=annotation.pk).exists()
    first.refresh_from_db()
    assert first.status == AssignmentStatus.OPEN
    assert next_assignment(reader, task=Task.EQUIVALENCE, study_id=study.pk).pk == first.pk
    after = ReaderQueue.objects.get(reader=reader, study=study, task=Task.EQUIVALENCE)
    assert (after.open_count, after.rated_count) == (before.open_count, before.rated_count)
    assert taken_back_rating(first) == {"rating": RatingChoice.MINOR_DISCREPANCY, "rationale": "A slip."}


def test_an_item_taken_back_goes_before_every_other_open_item_of_its_queue():
    study, readers, _ = make_reading_study(pairs=6, readers=4, keep_versions_apart=False)
    study.undo_window_seconds = WINDOW
    study.save(update_fields=["undo_window_seconds"])
    reader = readers[0]
    queue = list(
        Assignment.objects.filter(reader=reader, study=study, task=Task.EQUIVALENCE, status=AssignmentStatus.OPEN)
        .select_related("reader", "example__study")
        .order_by("queue_order")
    )
    assert len(queue) >= 3
    # Rated out of turn (the service allows any of the reader's open items): the last of the queue.
    last = queue[-1]
    _rate(last)

    undo_last_rating(reader)

    reopened = Assignment.objects.filter(
        reader=reader, study=study, task=Task.EQUIVALENCE, status=AssignmentStatus.OPEN
    )
    assert list(reopened.order_by("queue_order").values_list("pk", flat=True)) == [a.pk for a in [last, *queue[:-1]]]


def test_an_item_taken_back_goes_first_whatever_the_queue_orders_of_the_others():
    # Queue orders are seeded draws; an undo puts the item one before the first, whatever it is
    # (here smaller than any primary key). Task 2 only: two readers may hold all three items (Task 1
    # as well would need four, the Task 1 original and Task 2 showing the same original).
    study, _, _ = make_reading_study(pairs=3, readers=2, keep_versions_apart=False, assign=False)
    assign_readers(study, tasks=[Task.EQUIVALENCE], actor=make_user(Role.COORDINATOR))
    Study.objects.filter(pk=study.pk).update(undo_window_seconds=WINDOW)
    first, _ = _reads(_equivalence(study))
    reader = first.reader
    others = Assignment.objects.filter(reader=reader, study=study, task=Task.EQUIVALENCE).exclude(pk=first.pk)
    assert others.count() == 2
    for order, other in enumerate(others.order_by("pk"), start=1):
        Assignment.objects.filter(pk=other.pk).update(queue_order=order)
    _rate(first)

    undo_last_rating(reader)

    first.refresh_from_db()
    assert first.queue_order == 0
    assert next_assignment(reader, task=Task.EQUIVALENCE, study_id=study.pk).pk == first.pk


def test_an_untimed_rating_taken_back_carries_no_time_over(study):
    # Rated through the service without being shown (no time on task): nothing to carry over.
    first, _ = _reads(_equivalence(study))
    submit_annotation(
        reader=first.reader,
        assignment_id=first.public_id,
        rating=RatingChoice.EQUIVALENT,
        rationale="",
        form_token=uuid.uuid4(),
    )

    undo_last_rating(first.reader)

    first.refresh_from_db()
    assert first.time_before_undo_ms == 0


def test_undo_uses_a_fixed_number_of_queries(study, django_assert_num_queries):
    first, _ = _reads(_equivalence(study))
    _rate(first)

    # The rating with its read and study (locked), the delete, the queue's first place, the read
    # saved, the queue counter, the audit row, and the transaction's savepoints.
    with django_assert_num_queries(UNDO_QUERIES):
        undo_last_rating(first.reader)


UNDO_QUERIES = 8


def test_the_audit_trail_keeps_the_rating_taken_back_and_the_corrected_one(study):
    example = _equivalence(study)
    first, _ = _reads(example)
    taken_back = _rate(first, RatingChoice.MINOR_DISCREPANCY)
    undo_last_rating(first.reader)
    corrected = _rate(Assignment.objects.select_related("reader", "example__study").get(pk=first.pk))

    events = list(AuditEvent.objects.filter(example=example, subject=first.reader).order_by("pk"))
    actions = [event.action for event in events if event.action != AuditAction.ASSIGNED]
    assert actions == [AuditAction.SUBMITTED, AuditAction.UNDONE, AuditAction.SUBMITTED]
    undone = next(event for event in events if event.action == AuditAction.UNDONE)
    assert undone.actor == first.reader
    # Everything the rating taken back was, for the audit trail.
    assert undone.before == {
        "annotation": str(taken_back.public_id),
        "assignment": str(first.public_id),
        "slot": first.slot,
        "rating": RatingChoice.MINOR_DISCREPANCY,
        "rationale": "A slip.",
        "submitted_at": taken_back.created_at.isoformat(),
        "duration_ms": taken_back.duration_ms,
        "form_token": str(taken_back.form_token),
    }
    assert events[-1].after["rating"] == corrected.rating == RatingChoice.EQUIVALENT


def test_the_corrected_ratings_time_on_task_includes_the_time_before_the_undo(study):
    example = _equivalence(study)
    first, _ = _reads(example)
    show_assignment(first)
    Assignment.objects.filter(pk=first.pk).update(first_shown_at=timezone.now() - timedelta(seconds=30))
    first.refresh_from_db()
    taken_back = _rate(first, RatingChoice.MINOR_DISCREPANCY)
    assert taken_back.duration_ms >= 30_000

    undo_last_rating(first.reader)
    # Ten seconds on the item again before submitting the correction.
    Assignment.objects.filter(pk=first.pk).update(resumed_at=timezone.now() - timedelta(seconds=10))
    corrected = _rate(Assignment.objects.select_related("reader", "example__study").get(pk=first.pk))

    assert taken_back.duration_ms + 10_000 <= corrected.duration_ms < taken_back.duration_ms + 12_000


def test_undo_is_refused_once_the_window_has_closed_even_before_the_worker_ran(study):
    example = _equivalence(study)
    first, _ = _reads(example)
    annotation = _rate(first)

    with pytest.raises(UndoRefused) as refused:
        undo_last_rating(first.reader, now=_later())

    # The reader's words, whole.
    assert str(refused.value) == (
        "Your last rating (Equivalent) can no longer be taken back: it settled when its undo window closed "
        "or when you submitted another rating. A coordinator can void it if you ask, with a reason."
    )

    assert Annotation.objects.filter(pk=annotation.pk, settled_at__isnull=True).exists()


def test_undo_is_refused_after_the_readers_next_submit(study):
    example = _equivalence(study)
    first, _ = _reads(example)
    _rate(first)
    following = _rate(_other_open_read(first.reader, but=example))
    undo_last_rating(first.reader)  # takes back the newest only

    with pytest.raises(UndoRefused, match="can no longer be taken back"):
        undo_last_rating(first.reader)

    assert not Annotation.objects.filter(pk=following.pk).exists()
    assert Annotation.objects.filter(example=example, reader=first.reader, settled_at__isnull=False).exists()


def test_undo_without_any_rating_says_so(study):
    with pytest.raises(UndoRefused) as refused:
        undo_last_rating(make_user())

    assert str(refused.value) == "You have no rating to take back."


def test_a_late_retry_of_the_form_taken_back_does_not_store_it_again(study):
    example = _equivalence(study)
    first, _ = _reads(example)
    token = uuid.uuid4()
    _rate(first, RatingChoice.MINOR_DISCREPANCY, token=token)
    undo_last_rating(first.reader)

    with pytest.raises(SubmissionRefused) as refused:
        _rate(Assignment.objects.select_related("reader", "example__study").get(pk=first.pk), token=token)
    assert str(refused.value) == "You took this rating back. Choose your rating again and submit it."

    assert not Annotation.objects.filter(example=example, reader=first.reader).exists()


def test_a_coordinator_cannot_void_a_rating_its_reader_can_still_take_back(study):
    example = _equivalence(study)
    first, _ = _reads(example)
    annotation = _rate(first)

    with pytest.raises(SubmissionRefused) as refused:
        void_annotation(annotation.public_id, actor=make_user(), reason="Too early.")

    assert str(refused.value) == (
        "Its reader can still take this rating back (its undo window is open, or closed a moment ago and it is "
        "about to settle). Void it once it has settled."
    )

    settle_due_ratings(now=_later())
    void_annotation(annotation.public_id, actor=make_user(), reason="Now it may.")


def test_settling_twice_routes_once(study):
    example = _equivalence(study)
    first, second = _reads(example)
    _rate(first)
    _rate(second)
    later = _later()

    assert settle_due_ratings(now=later) == 2
    assert settle_due_ratings(now=later) == 0

    assert AuditEvent.objects.filter(example=example, action=AuditAction.CONSENSUS).count() == 1


def test_a_window_of_zero_settles_and_routes_at_once():
    study, _, _ = make_reading_study(pairs=1, readers=4, keep_versions_apart=False)
    example = _equivalence(study)
    first, second = _reads(example)

    _rate(first)
    annotation = _rate(second)

    example.refresh_from_db()
    assert annotation.settled_at is not None
    assert example.state == ExampleState.CONSENSUS
    with pytest.raises(UndoRefused, match="can no longer be taken back"):
        undo_last_rating(second.reader)
    assert saved_notice(second.reader) is None
    notice = saved_notice(second.reader, saved=annotation)
    assert (notice.undoable, notice.window_seconds) == (False, 0)


def test_the_notice_names_the_item_and_label_and_counts_down(study):
    example = _equivalence(study)
    first, _ = _reads(example)
    annotation = _rate(first, RatingChoice.MINOR_DISCREPANCY)

    notice = saved_notice(first.reader, now=annotation.created_at + timedelta(seconds=20))

    rated = ReaderQueue.objects.get(reader=first.reader, study=study, task=Task.EQUIVALENCE).rated_count
    assert (notice.item, notice.rating_label, notice.undoable) == (rated, "Minor Discrepancy", True)
    assert notice.seconds_left == WINDOW - 20
    assert saved_notice(first.reader, now=_later()) is None


def test_the_ratings_due_in_one_second_share_one_settlement_task_at_its_end(study, monkeypatch):
    example = _equivalence(study)
    first, second = _reads(example)
    third = (
        Assignment.objects.filter(example__study=study, status=AssignmentStatus.OPEN)
        .exclude(reader__in=[first.reader, second.reader])
        .select_related("reader", "example__study")
        .first()
    )
    clock = [timezone.now().replace(microsecond=100_000)]
    monkeypatch.setattr(timezone, "now", lambda: clock[0])
    dummy = {"default": {"BACKEND": "django.tasks.backends.dummy.DummyBackend", "QUEUES": ["default"]}}

    with override_settings(TASKS=dummy):  # a backend of its own: nothing queued by this process yet
        with TestCase.captureOnCommitCallbacks(execute=True):
            one = _rate(first)
        clock[0] += timedelta(milliseconds=500)
        with TestCase.captureOnCommitCallbacks(execute=True):
            two = _rate(second)
        clock[0] += timedelta(milliseconds=600)  # the next second
        with TestCase.captureOnCommitCallbacks(execute=True):
            three = _rate(third)
        queued = [result.task for result in default_task_backend.results]

    end = one.settle_by.replace(microsecond=0) + timedelta(seconds=1)
    assert one.settle_by < two.settle_by < end < three.settle_by
    assert [(task.name, task.run_after) for task in queued] == [
        (settle_ratings_task.name, end),
        (settle_ratings_task.name, end + timedelta(seconds=1)),
    ]
    # The first task, run when it is due, settles both ratings due in its second, not the third.
    clock[0] = end
    assert settle_ratings_task.call() == {"settled": 2}
    clock[0] = end + timedelta(seconds=1)
    assert settle_ratings_task.call() == {"settled": 1}


def test_a_deadline_on_a_whole_second_is_its_own_settlement_time():
    deadline = timezone.now().replace(microsecond=0)
    assert settlement_run_after(deadline) == deadline
    assert settlement_run_after(deadline + timedelta(microseconds=1)) == deadline + timedelta(seconds=1)


def test_the_worker_task_and_the_command_settle_what_is_due(study, capsys):
    example = _equivalence(study)
    first, second = _reads(example)
    _rate(first)
    _rate(second)
    Annotation.objects.filter(example=example).update(settle_by=timezone.now() - timedelta(seconds=1))

    assert settle_ratings_task.call() == {"settled": 2}
    call_command("settle_ratings")

    assert "Settled 0 ratings" in capsys.readouterr().out
    example.refresh_from_db()
    assert example.state == ExampleState.CONSENSUS


def test_a_settlement_queued_under_the_tasks_former_path_still_runs(study):
    example = _equivalence(study)
    first, second = _reads(example)
    _rate(first)
    _rate(second)
    Annotation.objects.filter(example=example).update(settle_by=timezone.now() - timedelta(seconds=1))
    # A row queued before the task moved to consensus.services; the worker imports its task_path.
    queued = DBTaskResult(
        task_path="consensus.tasks.settle_ratings_task", backend_name="default", args_kwargs={"args": [], "kwargs": {}}
    )

    assert queued.task.func is settle_ratings_task.func
    assert queued.task.call() == {"settled": 2}


def test_the_release_and_the_counts_ignore_undone_and_unsettled_ratings(study, tmp_path):
    example = _equivalence(study)
    first, second = _reads(example)
    _rate(first)
    settle_due_ratings(now=_later())
    _rate(second, RatingChoice.MINOR_DISCREPANCY)
    undo_last_rating(second.reader)
    _rate(Assignment.objects.select_related("reader", "example__study").get(pk=second.pk))  # still unsettled

    summary = build_release(study, tmp_path / "out", license_text="CC0\n", include_unfinished=True)

    assert summary.row_counts["task2/task2_full.csv"] == 1
    full = (tmp_path / "out" / "task2" / "task2_full.csv").read_text()
    assert "Minor Discrepancy" not in full


def test_routing_never_counts_a_rating_still_in_its_window(study):
    example = _equivalence(study)
    first, second = _reads(example)
    _rate(first)
    later = _rate(second)
    Annotation.objects.filter(pk=later.pk).update(settle_by=timezone.now() + timedelta(seconds=WINDOW * 2))

    assert settle_due_ratings(now=_later()) == 1  # the first read settles and routes; the second waits

    example.refresh_from_db()
    assert example.state == ExampleState.WAITING
    assert not ConsensusLabel.objects.filter(example=example).exists()
    undo_last_rating(second.reader)
    example.refresh_from_db()
    assert example.state == ExampleState.WAITING


def test_the_coordinator_sees_a_rating_in_its_window_and_the_rating_taken_back(study, client, coordinator):
    from django.urls import reverse

    example = _equivalence(study)
    first, second = _reads(example)
    _rate(first, RatingChoice.MINOR_DISCREPANCY)
    undo_last_rating(first.reader)
    _rate(second)
    client.force_login(coordinator)

    html = client.get(reverse("example_detail", args=[study.slug, example.public_id])).content.decode()
    api = client.get(f"/api/studies/{study.slug}/examples/{example.public_id}/").json()

    assert "in its undo window" in html and "Its reader can take it back until" in html
    assert "Rating taken back by its reader" in html and "A slip." in html
    [record] = api["annotations"]
    assert record["settled_at"] is None and record["settle_by"]


def test_a_settlement_that_cannot_be_queued_is_logged_and_the_rating_kept(
    study, monkeypatch, caplog, django_capture_on_commit_callbacks
):
    class QueueDown:
        def get_backend(self):
            return settle_ratings_task.get_backend()

        def using(self, **options):
            raise ConnectionError("the task queue is down")

    monkeypatch.setattr("consensus.services.settle_ratings_task", QueueDown())
    first, _ = _reads(_equivalence(study))

    with django_capture_on_commit_callbacks(execute=True):
        annotation = _rate(first)

    assert Annotation.objects.filter(pk=annotation.pk).exists()
    [record] = [r for r in caplog.records if r.name == "readingroom.consensus"]
    due = annotation.settle_by.isoformat()
    assert record.getMessage() == f"Could not queue the settlement of the ratings due at {due}"
    assert record.exc_info[0] is ConnectionError
