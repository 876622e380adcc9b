"""From ratings to consensus: submitting, routing, adjudicating and voiding.

Every workflow here runs in one transaction and takes row locks in one order: the study row
(only when a whole study is worked on), then example rows in primary-key order. Every write
to an example's assignments, annotations, adjudication or consensus happens under that
example's lock, so two readers submitting the second read of one example at the same moment
are serialized and exactly one of them routes the third read. Partial unique constraints
hold the same rules in the database should anything slip past.
"""

import functools
import logging
import uuid
import weakref
from collections import Counter
from dataclasses import dataclass
from datetime import datetime, timedelta

from django.contrib.auth import get_user_model
from django.contrib.auth.models import AbstractBaseUser
from django.db import IntegrityError, connection, transaction
from django.db.models import (
    Count,
    Exists,
    OuterRef,
    Q,
)
from django.db.transaction import TransactionManagementError
from django.tasks import task
from django.utils import timezone

from annotation import queues
from annotation.guide import confirmed_version_id
from annotation.models import (
    ACTIVE_STATUSES,
    RATINGS_WITHOUT_RATIONALE,
    RATIONALE_MAX_LENGTH,
    TASK_RATINGS,
    THIRD_READ_SLOT,
    Annotation,
    Assignment,
    AssignmentStatus,
    AuditAction,
    AuditEvent,
    CandidatePair,
    Example,
    ExampleState,
    MemberRole,
    RatingChoice,
    ReaderQueue,
    ReportType,
    Role,
    Study,
    StudyMember,
    Subspecialty,
    Task,
    tiebreak,
)
from annotation.rows import Selected, attach, insert, instances, select_list, update_row
from consensus import blinding, reserve
from consensus.models import Adjudication, AdjudicationStatus, ConsensusLabel, LabelSource

logger = logging.getLogger("readingroom.consensus")

INITIAL_SLOTS = (1, 2)


class SubmissionRefused(Exception):
    """A rating cannot be stored. field names the form field at fault, if any."""

    def __init__(self, message: str, *, field: str | None = None) -> None:
        super().__init__(message)
        self.field = field


class AlreadySubmitted(SubmissionRefused):
    """The assignment was rated before (from another tab or device); ratings are final."""

    def __init__(self, annotation: "Annotation | Adjudication") -> None:
        super().__init__("This example was already rated. Ratings are final and cannot be changed.")
        self.annotation = annotation


class NotShownYet(SubmissionRefused):
    """The assignment was never opened: a rating needs the reader to have seen the item."""

    def __init__(self) -> None:
        super().__init__("Open the item before rating it.")


class NoSuchWork(Exception):
    """No such work for this user: an assignment or adjudication never theirs, withdrawn or finished,
    or a rating that does not exist. The pages and the API answer 404 (DRF's NotFound is the HTTP
    answer; this is the service's reason)."""


class UndoRefused(Exception):
    """The reader's last rating cannot be taken back; the message says why, in the reader's words."""


class _UnsettledRatingMoved(Exception):
    """The reader's unsettled rating changed between reading it and locking its example."""


# A submit starts again (at most this often) when another tab of the same reader changed their
# unsettled rating in the meantime.
SUBMIT_ATTEMPTS = 3


@dataclass(frozen=True)
class SubmitResult:
    annotation: Annotation
    created: bool


def validate_rating(task: str, rating: str, rationale: str, *, rationale_always_required: bool = False) -> str:
    """The rationale to store, or SubmissionRefused naming the field."""
    if rating not in TASK_RATINGS[task]:
        labels = ", ".join(RatingChoice(r).label for r in TASK_RATINGS[task])
        raise SubmissionRefused(f"Choose one of: {labels}.", field="rating")
    rationale = rationale.strip()
    if len(rationale) > RATIONALE_MAX_LENGTH:
        raise SubmissionRefused(
            f"The rationale is {len(rationale):,} characters long; the limit is {RATIONALE_MAX_LENGTH:,}. Shorten it.",
            field="rationale",
        )
    if not rationale and (rationale_always_required or rating not in RATINGS_WITHOUT_RATIONALE):
        raise SubmissionRefused(
            f"A rationale is required for {RatingChoice(rating).label}: say what you found.", field="rationale"
        )
    return rationale


@dataclass(frozen=True)
class ReadOf:
    """The example of a reader's own assignment, found by the assignment's public id within the
    statement that locks it (lock_example)."""

    assignment_id: uuid.UUID
    reader_pk: int


def lock_example(example: int | ReadOf) -> Example | None:
    """The example, locked for the rest of the transaction, and with it every example of its exam.

    Routing an example asks what its reader has of the same exam (consensus.blinding), so two
    examples of one exam are never routed at once: their rows are locked together, in one query,
    in primary-key order (as _lock_with_unsettled does), so two lockers never wait for each other
    in a circle. The study and pairs are read along but not locked, and readers of different exams
    never wait for each other.

    example may be a reader's own read (ReadOf): it is found and locked in one query (None if
    there is no such read). FOR NO KEY UPDATE: workflows still exclude each other, but a row that
    merely refers to the example (an audit event a reader's undo writes) never waits for whoever
    holds it.
    """
    target = _example_of(example) if isinstance(example, ReadOf) else ("%s", [example])
    locked = _lock_exams_of([target])
    found = locked.example(locked.first_target)
    if found is None and not isinstance(example, ReadOf):
        raise Example.DoesNotExist
    return found


def _example_of(read: ReadOf) -> tuple[str, list]:
    """SQL giving the pk of the example of a reader's own assignment (NULL if there is none), with its parameters."""
    assignment = Assignment._meta
    public_id = assignment.get_field("public_id").get_db_prep_value(read.assignment_id, connection)
    own = "SELECT a.example_id FROM {table} a WHERE a.public_id = %s AND a.reader_id = %s LIMIT 1"
    return own.format(table=connection.ops.quote_name(assignment.db_table)), [public_id, read.reader_pk]


# The examples of the exams of some target examples, with their studies and pairs, locked in
# primary-key order. Each exam is found from its target's pair by scalar subqueries, evaluated once:
# the rows are then read through the pairs' (study, dataset, study id) index and the examples' pair
# index, whatever the study's size. The exams' pairs are one IN over a UNION ALL: an OR of one IN per
# exam made PostgreSQL filter every example instead (32 ms per submit at 50,000 pairs).
# Written by hand: the ORM's query for it took about 10 ms to compile, on every rating.
_LOCK_EXAMS = """SELECT {columns}, ({first_target}){along}
 FROM {examples} JOIN {pairs} ON p.id = e.pair_id JOIN {studies} ON s.id = e.study_id
 WHERE e.pair_id IN ({same_exam}) ORDER BY e.id {lock}"""

# One column of the target example's pair, by scalar subqueries.
_OF_TARGET = (
    "(SELECT t.{column} FROM {pairs} t WHERE t.id = (SELECT v.pair_id FROM {examples} v WHERE v.id = ({target})))"
)
_PAIRS_OF_EXAM = (
    "SELECT x.id FROM {pairs} x"
    " WHERE x.study_id = {study_id} AND x.dataset_id = {dataset_id} AND x.source_study_id = {source_study_id}"
)
_EXAMPLE, _PAIR, _STUDY = Selected(Example, "e"), Selected(CandidatePair, "p"), Selected(Study, "s")


class _LockedExams:
    """The examples of some exams, locked (_lock_exams_of): their rows, and an instance (with its
    study and pair) made only of an example asked for. An exam has a dozen examples or more, and a
    submit needs one or two of them: making the rest cost 0.4 ms per rating."""

    def __init__(self, rows: list[tuple], along: int = 0) -> None:
        self._rows = {row[0]: row for row in rows}
        # The first target's pk and the values read along, the last columns of every row (None when
        # nothing was found).
        last = rows[0][len(rows[0]) - along - 1 :] if rows else (None,) * (along + 1)
        self.first_target: int | None = last[0]
        self.along: tuple = tuple(last[1:])
        self._made: dict[int, Example] = {}

    @property
    def pks(self) -> list[int]:
        return list(self._rows)

    def example(self, pk: int | None) -> Example | None:
        """The locked example of this pk, with its study and pair (one instance per pk); None if not locked."""
        if pk not in self._rows:
            return None
        if pk not in self._made:
            example, study, pair = instances(self._rows[pk], connection, _EXAMPLE, _STUDY, _PAIR)
            attach(example, study=study, pair=pair)
            self._made[pk] = example
        return self._made[pk]


def _lock_exams_of(targets: list[tuple[str, list]], along: list[tuple[str, list]] = ()) -> _LockedExams:
    """Every example of the exams of the target examples, locked in primary-key order.
    targets: (SQL giving one example's pk, its parameters); the first one's pk is read along, and so
    is each of `along` (SQL giving one value, its parameters)."""
    if connection.features.has_select_for_update and connection.get_autocommit():
        raise TransactionManagementError("Examples are locked inside a transaction.")
    quote = connection.ops.quote_name
    tables = {"pairs": quote(CandidatePair._meta.db_table), "examples": quote(Example._meta.db_table)}
    same_exam, params = [], list(targets[0][1])
    for _, along_params in along:
        params += along_params
    for sql, target_params in targets:
        columns = ("study_id", "dataset_id", "source_study_id")
        of_target = {column: _OF_TARGET.format(column=column, target=sql, **tables) for column in columns}
        same_exam.append(_PAIRS_OF_EXAM.format(pairs=tables["pairs"], **of_target))
        params += target_params * len(columns)
    lock = ""
    if connection.features.has_select_for_update:
        lock = connection.ops.for_update_sql(of=(quote("e"),), no_key=connection.features.has_select_for_no_key_update)
    statement = _LOCK_EXAMS.format(
        # The example's pk first: _LockedExams finds rows by it.
        columns=select_list(connection, _EXAMPLE, _STUDY, _PAIR),
        first_target=targets[0][0],
        along="".join(f", ({sql})" for sql, _ in along),
        examples=_EXAMPLE.table(connection),
        pairs=_PAIR.table(connection),
        studies=_STUDY.table(connection),
        same_exam=" UNION ALL ".join(same_exam),
        lock=lock,
    )
    with connection.cursor() as cursor:
        cursor.execute(statement, params)
        return _LockedExams(cursor.fetchall(), along=len(along))


def submit_annotation(
    *,
    reader: AbstractBaseUser,
    assignment_id: uuid.UUID,
    rating: str,
    rationale: str,
    form_token: uuid.UUID,
    require_shown: bool = False,
) -> SubmitResult:
    """Store a reader's rating of their own open assignment; route the example once it settles.

    It settles at once when the study's undo window is 0, else at the reader's next submit (this
    function settles their previous rating first) or by the worker once its settle_by has passed
    (settle_due_ratings). The
    same form_token twice (a double click, a retry, concurrent requests) stores one
    annotation and answers every call with it. Another submission of an assignment that is
    already rated raises AlreadySubmitted. With require_shown, an assignment that was never
    shown (show_assignment) is refused with NotShownYet.
    """
    assignment_id = uuid.UUID(str(assignment_id))
    for attempt in range(SUBMIT_ATTEMPTS):
        try:
            with transaction.atomic(), queues.counting():
                return _store_annotation(reader, assignment_id, rating, rationale, form_token, require_shown)
        except _UnsettledRatingMoved:
            continue  # the reader's unsettled rating changed before its example was locked: again
        except IntegrityError:
            # The token is unique: it was used before, on another assignment (refused) or, by a
            # concurrent request that committed first, on this one (answered with its annotation).
            previous = Annotation.objects.filter(form_token=form_token).select_related("assignment").first()
            if previous is None and attempt + 1 < SUBMIT_ATTEMPTS:
                # Another tab of this reader stored an unsettled rating first (one per reader): again.
                continue
            if previous is None or previous.assignment.public_id != assignment_id:
                if previous is not None:
                    raise SubmissionRefused(
                        "This form was already used for another example. Reload the page."
                    ) from None
                raise
            return SubmitResult(previous, created=False)
    raise SubmissionRefused("Your rating could not be stored: another of your tabs was saving at once. Submit again.")


def _store_annotation(
    reader, assignment_id: uuid.UUID, rating: str, rationale: str, form_token: uuid.UUID, require_shown: bool
) -> SubmitResult:
    read = ReadOf(assignment_id, reader.pk)
    example, unsettled, unsettled_example = _lock_with_unsettled(read)
    # Read after the lock: a concurrent submit, void or withdrawal of this example has finished.
    assignment = _own_assignment_with_rating(read, unsettled) if example else None
    if assignment is None:
        raise NoSuchWork
    stored = getattr(assignment, "annotation", None)
    if stored is not None and stored.form_token == form_token:
        return SubmitResult(stored, created=False)
    if assignment.status == AssignmentStatus.DONE:
        raise AlreadySubmitted(stored)
    if assignment.status in (AssignmentStatus.VOIDED, AssignmentStatus.WITHDRAWN) or assignment.held:
        raise NoSuchWork
    if require_shown and assignment.first_shown_at is None:
        raise NotShownYet
    rationale = validate_rating(example.task, rating, rationale)
    if example.task == Task.EQUIVALENCE and not assignment.report_a_type:
        # Rated without being shown through a page or the API's fetch (an API client that
        # kept the item from an earlier session): fix the order now, as showing would have.
        assignment.report_a_type = _draw_report_a(example, assignment)
        Assignment.objects.filter(pk=assignment.pk).update(report_a_type=assignment.report_a_type)
    if assignment.resumed_at is not None and _was_taken_back(assignment, form_token):
        raise SubmissionRefused("You took this rating back. Choose your rating again and submit it.")
    now = timezone.now()
    if unsettled is not None:
        # The reader's next submit closes the undo window of their previous rating.
        _settle(unsettled[0], unsettled_example, now=now)
    # No savepoint around the insert: a reused token fails the whole transaction, and the
    # caller answers from what is stored.
    window = example.study.undo_window
    annotation = Annotation(
        assignment=assignment,
        example=example,
        reader=reader,
        task=example.task,
        rating=rating,
        rationale=rationale,
        form_token=form_token,
        report_a_type=assignment.report_a_type,
        duration_ms=_time_on_task(assignment, now),
        settle_by=now + window,
        settled_at=None if window else now,
        guide_version_id=confirmed_version_id(reader, example.study),
    )
    # Without the ORM's query compilation (annotation.rows), as the statements above: every rating.
    insert(annotation, connection)
    update_row(Assignment, assignment.pk, connection, status=AssignmentStatus.DONE)
    queues.count(reader.pk, example.study_id, example.task, opened=-1, rated=1)
    AuditEvent.objects.record(
        AuditAction.SUBMITTED,
        study=example.study,
        actor=reader,
        example=example,
        subject=reader,
        after={"assignment": str(assignment.public_id), "slot": assignment.slot, "rating": rating},
    )
    if annotation.is_settled:
        route_example(example)
    else:
        transaction.on_commit(lambda: _enqueue_settlement(annotation.settle_by))
    return SubmitResult(annotation, created=True)


def route_example(example: Example, *, actor: AbstractBaseUser | None = None, refill: bool = False) -> None:
    """Move an example along the protocol after a change to its ratings. Caller holds its lock.

    Two agreeing reads -> consensus (unanimous). Two disagreeing -> one more reader. Three with a
    majority -> consensus (majority). Three all different -> one adjudicator, whose rating is
    the consensus (adjudicated). With refill (after a void), free initial slots get readers too.
    Only settled ratings count; a rating still in its undo window is a read under way.
    """
    settled = _settled_ratings(example.pk)
    ratings = [rating for rating, _ in settled]
    count = len(ratings)
    if count == 2 and example.state == ExampleState.WAITING:
        # Its two first reads are in: the reserve's estimate of how often readers disagree counts it.
        queues.count(settled[-1][1], example.study_id, example.task, second_reads=1)

    if count == 2 and ratings[0] == ratings[1]:
        _decide(example, ratings[0], LabelSource.UNANIMOUS, count, actor=actor)
        return
    if count == 3:
        adjudication = example.adjudications.active().first()
        (top, votes), *_ = Counter(ratings).most_common(1)
        if votes >= 2:
            _decide(example, top, LabelSource.MAJORITY, count, actor=actor)
        elif adjudication is not None and adjudication.status == AdjudicationStatus.DONE:
            _decide(example, adjudication.rating, LabelSource.ADJUDICATED, count, actor=actor)
        else:
            _set_state(example, ExampleState.ADJUDICATION)
            if adjudication is None:
                _route_adjudication(example, actor=actor)
        return

    if count == 2:
        _set_state(example, ExampleState.THIRD_READ)
        if not _reads_under_way(example, count):
            _route_reads(example, 1, action=AuditAction.THIRD_READ_ROUTED, actor=actor)
        return

    if not refill:
        # A first read came in. An example still waiting for someone to take its other read (nobody
        # was eligible after a void) stays on the Unrouted list until someone does.
        _keep_waiting(example)
        return
    missing = 2 - count - _reads_under_way(example, count)
    if missing > 0:
        # Still unrouted until _route_reads finds someone: a retry that finds nobody for the same
        # reason changes nothing (and writes no audit row).
        _keep_waiting(example)
        _route_reads(example, missing, action=AuditAction.ASSIGNED, actor=actor)
    else:
        _set_state(example, ExampleState.WAITING)


def _keep_waiting(example: Example) -> None:
    """WAITING, with the Unrouted flag and its reason as they are."""
    _set_state(example, ExampleState.WAITING, unrouted=example.unrouted, reason=example.unrouted_reason)


def _reads_under_way(example: Example, settled: int) -> int:
    """Open reads of the example, and ratings of it still in their undo window (the active
    assignments that have no settled rating)."""
    return len(_active_slots(example.pk)) - settled


def _active_slots(example_pk: int) -> list[int]:
    """The slots of the example's active assignments (open or rated)."""
    table = connection.ops.quote_name(Assignment._meta.db_table)
    with connection.cursor() as cursor:
        cursor.execute(_ACTIVE_SLOTS.format(assignments=table), [example_pk, *ACTIVE_STATUSES])
        return [slot for (slot,) in cursor.fetchall()]


# Written once (annotation.rows): asked on every second read, and again when a third is routed.
_ACTIVE_SLOTS = "SELECT a.slot FROM {assignments} a WHERE a.example_id = %s AND a.status IN (%s, %s)"


def _set_state(example: Example, state: str, *, unrouted: bool | None = None, reason: str = "") -> None:
    fields = {"state": state}
    if unrouted is not None:
        fields["unrouted"] = unrouted
    elif state in (ExampleState.CONSENSUS, ExampleState.WAITING):
        fields["unrouted"] = False
    if "unrouted" in fields:
        fields["unrouted_reason"] = reason if fields["unrouted"] else ""
    changed = {k: v for k, v in fields.items() if getattr(example, k) != v}
    if changed:
        update_row(Example, example.pk, connection, **changed)
        for key, value in changed.items():
            setattr(example, key, value)


# What deciding an example's consensus asks first, in one statement (most decisions follow a rating):
# whether it has one already, an open read, an open adjudication.
_DECIDING = """SELECT EXISTS(SELECT 1 FROM {consensus} c WHERE c.example_id = %s),
 EXISTS(SELECT 1 FROM {assignments} a WHERE a.example_id = %s AND a.status = %s),
 EXISTS(SELECT 1 FROM {adjudications} j WHERE j.example_id = %s AND j.status = %s)"""


def _decide(example: Example, rating: str, source: str, count: int, *, actor: AbstractBaseUser | None) -> None:
    quote = connection.ops.quote_name
    statement = _DECIDING.format(
        consensus=quote(ConsensusLabel._meta.db_table),
        assignments=quote(Assignment._meta.db_table),
        adjudications=quote(Adjudication._meta.db_table),
    )
    with connection.cursor() as cursor:
        pk = example.pk
        cursor.execute(statement, [pk, pk, AssignmentStatus.OPEN, pk, AdjudicationStatus.OPEN])
        decided, open_reads, open_adjudications = (bool(value) for value in cursor.fetchone())
    if not decided:
        label = ConsensusLabel(
            example=example, task=example.task, rating=rating, label_source=source, n_annotations=count
        )
        insert(label, connection)
        AuditEvent.objects.record(
            AuditAction.CONSENSUS,
            study=example.study,
            actor=actor,
            example=example,
            after={"rating": rating, "label_source": source, "n_annotations": count},
        )
    _set_state(example, ExampleState.CONSENSUS)
    # Reads or an adjudication that are no longer needed leave the queues.
    for assignment in example.assignments.open().select_related("reader") if open_reads else ():
        withdraw_open_assignment(example, assignment, actor=actor, reason="consensus reached")
    for adjudication in example.adjudications.filter(status=AdjudicationStatus.OPEN) if open_adjudications else ():
        Adjudication.objects.filter(pk=adjudication.pk).update(status=AdjudicationStatus.VOIDED)
        AuditEvent.objects.record(
            AuditAction.WITHDRAWN,
            study=example.study,
            actor=actor,
            example=example,
            subject=adjudication.adjudicator,
            before={"adjudication": str(adjudication.public_id)},
            after={"reason": "consensus reached"},
        )


def withdraw_open_assignment(
    example: Example, assignment: Assignment, *, actor: AbstractBaseUser | None, reason: str
) -> None:
    """Take an unrated assignment out of a queue. Caller holds the lock.

    Never shown, it is deleted (the audit row keeps it) and the reader may be given the example
    again. Shown, it is kept as WITHDRAWN: the reader has read the text, so, like a voided read,
    it bars them from the example and, when versions are kept apart, from its other version.
    """
    shown = assignment.first_shown_at is not None
    if assignment.held:
        # A reserve is released without the example's lock (consensus.reserve, under the row's lock):
        # read whether it still is held once that release has finished.
        assignment.held = (
            Assignment.objects.select_for_update(of=("self",))
            .filter(pk=assignment.pk)
            .values_list("held", flat=True)
            .get()
        )
    AuditEvent.objects.record(
        AuditAction.WITHDRAWN,
        study=example.study,
        actor=actor,
        example=example,
        subject=assignment.reader,
        before={"assignment": str(assignment.public_id), "slot": assignment.slot},
        after={"reason": reason, "shown": shown},
    )
    if shown:
        Assignment.objects.filter(pk=assignment.pk).update(status=AssignmentStatus.WITHDRAWN)
        assignment.status = AssignmentStatus.WITHDRAWN
    else:
        assignment.delete()
    queues.count(
        assignment.reader_id,
        example.study_id,
        example.task,
        opened=0 if assignment.held else -1,
        held=-1 if assignment.held else 0,
        # A third read that leaves no row was never given: it does not count among the reader's.
        third_reads=-1 if assignment.is_third_read and not shown else 0,
    )


def _route_reads(example: Example, needed: int, *, action: str, actor: AbstractBaseUser | None) -> None:
    """Give the example `needed` more readers, least loaded first; else mark it unrouted."""
    taken = set(_active_slots(example.pk))
    free_slots = [slot for slot in (*INITIAL_SLOTS, THIRD_READ_SLOT) if slot not in taken]
    if action == AuditAction.THIRD_READ_ROUTED and THIRD_READ_SLOT in free_slots:
        free_slots.remove(THIRD_READ_SLOT)
        free_slots.insert(0, THIRD_READ_SLOT)
    readers = eligible_readers(example, limit=needed)
    for reader, slot in zip(readers, free_slots, strict=False):
        assignment = create_routed_assignment(example, reader, slot)
        AuditEvent.objects.record(
            action,
            study=example.study,
            actor=actor,
            example=example,
            subject=reader,
            after={"assignment": str(assignment.public_id), "slot": slot},
        )
    if len(readers) < needed:
        _mark_unrouted(example, actor=actor, missing="reader", reason=_why_no_reader(example))
    else:
        _set_state(example, example.state, unrouted=False)


def create_routed_assignment(example: Example, reader: AbstractBaseUser, slot: int) -> Assignment:
    """Put an example in a reader's queue after the queue was drawn: a third read, a refill after a
    void, a read for a reader who joined late, or one given by hand. Caller holds the example's lock.

    It takes a random place among the reader's open items after the first (which may be on their
    screen), so a read routed because two readers disagreed does not stand out by where it comes
    in the queue; and reads from the reader's reserve come with it (consensus.reserve), so it does
    not stand out at the end of the queue either. Index lookups, whatever the queue's length.
    """
    study = example.study
    first_open = reserve.first_open_place(reader.pk, example.study_id, example.task)
    draw = reserve.place_after(first_open, tiebreak(study.seed, "queue", reader.pk, example.public_id))
    assignment = Assignment(example=example, reader=reader, slot=slot, queue_order=draw)
    # What Assignment.save() writes and counts, without compiling its INSERT (annotation.rows): a third
    # read is routed after about every other second read.
    assignment.take_queue_of_example()
    insert(assignment, connection)
    assignment.count_as_new()
    reserve.release_escorts(study, example.task, reader.pk, example.public_id, first_open=first_open)
    return assignment


def _mark_unrouted(example: Example, *, actor: AbstractBaseUser | None, missing: str, reason: str) -> None:
    if not example.unrouted or example.unrouted_reason != reason:
        AuditEvent.objects.record(
            AuditAction.UNROUTED,
            study=example.study,
            actor=actor,
            example=example,
            after={"waiting_for": missing, "reason": reason},
        )
    _set_state(example, example.state, unrouted=True, reason=reason)


def _why_no_reader(example: Example) -> str:
    """Why eligible_readers found nobody, in the coordinator's words (only asked when it did)."""
    able = StudyMember.objects.able(example.study, MemberRole.READER)
    fresh = able.exclude(Exists(Assignment.objects.filter(example=example, reader=OuterRef("user_id"))))
    if not able.exists():
        return "The study has no active reader."
    if not fresh.exists():
        return "Every active reader of the study has already read (or been given) this example."
    exam = f"{example.pair.dataset.key} {example.pair.source_study_id}"
    return (
        f"Every active reader who has not read this example {blinding.refusal(example.study)} (exam {exam}). "
        "Add a reader to the study."
    )


def eligible_readers(example: Example, *, limit: int | None = None) -> list[AbstractBaseUser]:
    """Readers of the study who may read this example now, best first (the first `limit` of them).

    Never one who has (or had) an assignment on it or on an example it conflicts with (the same
    report text; keeping versions apart, the same exam: consensus.blinding), whatever its status:
    open or rated, voided (the reader saw the text), withdrawn after being shown. Only a withdrawn
    assignment the reader never saw, which is deleted, does not count. Without a reserve,
    least loaded (open items in the study, from the queue counters) first. With one, the most reads
    ahead of them in this task (open and held) first: the read lands among many and their reserve
    can escort it (consensus.reserve). One query, whatever the queues' lengths.

    Written by hand (annotation.rows), the conflicting examples as consensus.blinding writes them: it
    runs on every third read routed, and the ORM took about 2 ms to build and compile it
    (tests/consensus/test_eligible_readers.py holds it equal to the ORM's).
    """
    study = example.study
    conflicting, conflicting_params = blinding.conflicting_examples_sql(example, connection.ops.quote_name)
    statement = _ELIGIBLE_READERS.format(conflicting=conflicting, **_eligible_tables())
    params = [example.task, study.pk, MemberRole.READER, Role(MemberRole.READER).label, example.pk]
    with connection.cursor() as cursor:
        cursor.execute(statement, [*params, *conflicting_params])
        rows = cursor.fetchall()
    user = _eligible_user()
    load, ahead, user_id = len(user), len(user) + 1, user.attnames.index(user.model._meta.pk.attname)
    # With a reserve, the most reads ahead first; without, the least loaded; ties by the study's draw.
    first = (lambda row: -row[ahead]) if study.reserve_percent else (lambda row: row[load])
    if limit is not None and len(rows) > limit:
        # Only rows that rank by `first` among the first `limit` can be among them: the draw (a hash
        # each) is made for those, not for every reader of the study.
        cutoff = sorted(map(first, rows))[limit - 1]
        rows = [row for row in rows if first(row) <= cutoff]
    ranked = sorted(rows, key=lambda row: (first(row), tiebreak(study.seed, "route", example.public_id, row[user_id])))
    return [user.instance(row[:load], connection) for row in ranked[:limit]]


# The study's able readers (as StudyMember.objects.able) without an assignment on the example, each
# with their open items in the study and their reads ahead in its task (queue counters), but for the
# readers of conflicting examples (the last subquery: consensus.blinding.conflicting_examples_sql).
_ELIGIBLE_READERS = """SELECT {user_columns},
 COALESCE((SELECT SUM(q.open_count) FROM {queues} q WHERE q.reader_id = m.user_id AND q.study_id = m.study_id), 0),
 COALESCE((SELECT q.open_count + q.held_count FROM {queues} q
   WHERE q.reader_id = m.user_id AND q.study_id = m.study_id AND q.task = %s), 0)
 FROM {members} m JOIN {users} ON {user_pk} = m.user_id
 WHERE m.study_id = %s AND m.role = %s AND m.active AND {user_active}
 AND EXISTS (SELECT 1 FROM {user_groups} ug JOIN {groups} g ON g.id = ug.group_id
   WHERE ug.user_id = m.user_id AND g.name = %s)
 AND NOT EXISTS (SELECT 1 FROM {assignments} x WHERE x.example_id = %s AND x.reader_id = m.user_id)
 AND NOT (m.user_id IN (SELECT c.reader_id FROM {assignments} c WHERE c.example_id IN ({conflicting})))"""


@functools.cache
def _eligible_user() -> Selected:
    return Selected(get_user_model(), "u")


def _eligible_tables() -> dict[str, str]:
    quote, user = connection.ops.quote_name, _eligible_user()
    meta = user.model._meta
    groups = meta.get_field("groups")
    return {
        "user_columns": select_list(connection, user),
        "users": user.table(connection),
        "user_pk": f"u.{quote(meta.pk.column)}",
        "user_active": f"u.{quote(meta.get_field('is_active').column)}",
        "user_groups": quote(groups.remote_field.through._meta.db_table),
        "groups": quote(groups.related_model._meta.db_table),
        "members": quote(StudyMember._meta.db_table),
        "queues": quote(ReaderQueue._meta.db_table),
        "assignments": quote(Assignment._meta.db_table),
    }


def eligible_adjudicators(example: Example) -> list[AbstractBaseUser]:
    """Adjudicators who read none of the example's reports, cardiothoracic first, then least loaded."""
    study = example.study
    members = (
        StudyMember.objects.able(study, MemberRole.ADJUDICATOR)
        .exclude(Exists(Assignment.objects.filter(example=example, reader=OuterRef("user_id"))))
        .exclude(Exists(Adjudication.objects.filter(example=example, adjudicator=OuterRef("user_id"))))
        .annotate(
            load=Count(
                "user__adjudications",
                filter=Q(
                    user__adjudications__status=AdjudicationStatus.OPEN,
                    user__adjudications__example__study=study,
                ),
            )
        )
        .select_related("user", "user__reader_profile")
    )
    ranked = sorted(
        members,
        key=lambda m: (
            getattr(getattr(m.user, "reader_profile", None), "subspecialty", None) != Subspecialty.CARDIOTHORACIC,
            m.load,
            tiebreak(study.seed, "adjudicate", example.public_id, m.user_id),
        ),
    )
    return [m.user for m in ranked]


def _route_adjudication(example: Example, *, actor: AbstractBaseUser | None) -> None:
    candidates = eligible_adjudicators(example)
    if not candidates:
        _mark_unrouted(
            example,
            actor=actor,
            missing="adjudicator",
            reason="No active adjudicator of the study who has not read this example. Add an adjudicator.",
        )
        return
    adjudicator = candidates[0]
    adjudication = Adjudication.objects.create(example=example, adjudicator=adjudicator, task=example.task)
    AuditEvent.objects.record(
        AuditAction.ADJUDICATION_ROUTED,
        study=example.study,
        actor=actor,
        example=example,
        subject=adjudicator,
        after={"adjudication": str(adjudication.public_id)},
    )
    _set_state(example, example.state, unrouted=False)


def route_unrouted(study_pk: int, *, actor: AbstractBaseUser | None = None) -> None:
    """Try again to route every example of the study waiting for an eligible person."""
    for example_pk in (
        Example.objects.filter(study_id=study_pk, unrouted=True).order_by("pk").values_list("pk", flat=True)
    ):
        with transaction.atomic(), queues.counting():
            example = lock_example(example_pk)
            # Routed meanwhile (another member added at the same moment): nothing left to do.
            if example.unrouted:
                route_example(example, actor=actor, refill=True)


def submit_adjudication(
    *,
    adjudicator: AbstractBaseUser,
    adjudication_id: uuid.UUID,
    rating: str,
    rationale: str,
    form_token: uuid.UUID,
    require_shown: bool = False,
) -> Adjudication:
    """Store the adjudicator's final rating (a rationale is always required) -> consensus.

    With require_shown (the page), an adjudication never shown raises NotShownYet, as a reading does.
    """
    with transaction.atomic(), queues.counting():
        found = Adjudication.objects.filter(public_id=adjudication_id, adjudicator=adjudicator).values_list(
            "pk", "example_id"
        )
        if not found:
            raise NoSuchWork
        adjudication_pk, example_pk = found[0]
        example = lock_example(example_pk)
        adjudication = Adjudication.objects.get(pk=adjudication_pk)
        if adjudication.form_token == form_token:
            return adjudication
        if Adjudication.objects.filter(form_token=form_token).exists():
            raise SubmissionRefused("This form was already used for another example. Reload the page.")
        if adjudication.status == AdjudicationStatus.DONE:
            raise AlreadySubmitted(adjudication)
        if adjudication.status != AdjudicationStatus.OPEN:
            raise NoSuchWork
        if require_shown and adjudication.first_shown_at is None:
            raise NotShownYet
        rationale = validate_rating(example.task, rating, rationale, rationale_always_required=True)
        adjudication.rating = rating
        adjudication.rationale = rationale
        adjudication.form_token = form_token
        adjudication.status = AdjudicationStatus.DONE
        adjudication.decided_at = timezone.now()
        adjudication.save(update_fields=["rating", "rationale", "form_token", "status", "decided_at"])
        AuditEvent.objects.record(
            AuditAction.ADJUDICATED,
            study=example.study,
            actor=adjudicator,
            example=example,
            subject=adjudicator,
            after={"adjudication": str(adjudication.public_id), "rating": rating},
        )
        route_example(example)
    return adjudication


def void_annotation(annotation_id: uuid.UUID, *, actor: AbstractBaseUser, reason: str) -> Annotation:
    """Void a stored rating (coordinators only, with a reason). The example re-opens and is routed again.

    The reader who gave the voided rating never gets the example again.
    """
    reason = reason.strip()
    if not reason:
        raise SubmissionRefused("Give a reason for voiding this rating.", field="reason")
    with transaction.atomic(), queues.counting():
        found = Annotation.objects.filter(public_id=annotation_id).values_list("pk", "example_id")
        if not found:
            raise NoSuchWork
        annotation_pk, example_pk = found[0]
        example = lock_example(example_pk)
        annotation = Annotation.objects.select_related("reader").get(pk=annotation_pk)
        if annotation.is_voided:
            raise SubmissionRefused("This rating was already voided.")
        if not annotation.is_settled:
            # Until it settles only its reader (undo) and the clock decide what becomes of it.
            raise SubmissionRefused(
                "Its reader can still take this rating back (its undo window is open, or closed a moment ago "
                "and it is about to settle). Void it once it has settled."
            )
        annotation.voided_at = timezone.now()
        annotation.voided_by = actor
        annotation.void_reason = reason
        annotation.save(update_fields=["voided_at", "voided_by", "void_reason"])
        Assignment.objects.filter(pk=annotation.assignment_id).update(status=AssignmentStatus.VOIDED)
        AuditEvent.objects.record(
            AuditAction.VOIDED,
            study=example.study,
            actor=actor,
            example=example,
            subject=annotation.reader,
            before={"annotation": str(annotation.public_id), "rating": annotation.rating},
            after={"reason": reason},
        )
        consensus = ConsensusLabel.objects.filter(example=example).first()
        if consensus is not None:
            AuditEvent.objects.record(
                AuditAction.CONSENSUS_WITHDRAWN,
                study=example.study,
                actor=actor,
                example=example,
                before={"rating": consensus.rating, "label_source": consensus.label_source},
            )
            consensus.delete()
        for adjudication in example.adjudications.active().select_related("adjudicator"):
            Adjudication.objects.filter(pk=adjudication.pk).update(status=AdjudicationStatus.VOIDED)
            AuditEvent.objects.record(
                AuditAction.WITHDRAWN,
                study=example.study,
                actor=actor,
                example=example,
                subject=adjudication.adjudicator,
                before={"adjudication": str(adjudication.public_id), "rating": adjudication.rating},
                after={"reason": "a rating it rested on was voided"},
            )
        # A third read that was routed for a disagreement that no longer exists leaves the queue.
        remaining = example.annotations.filter(voided_at__isnull=True).count()
        if remaining < 2:
            for assignment in example.assignments.open().filter(slot=THIRD_READ_SLOT).select_related("reader"):
                withdraw_open_assignment(example, assignment, actor=actor, reason="its disagreement was voided")
        route_example(example, actor=actor, refill=True)
    return annotation


def show_assignment(assignment: Assignment) -> Assignment:
    """Mark an assignment as shown (time on task starts) and, for Task 2, fix which report is A.

    A/B is fixed when the assignment is first shown, and counterbalanced across the two initial
    readers: a seeded coin per example gives slot 1 its order and slot 2 the other one, so if
    the first reader saw the original as Report A, the second sees it as Report B, whoever
    opens first. Third readers get their own seeded coin. Pass the assignment with its example
    and study loaded; it is updated in place.
    """
    return _show(assignment, _draw_report_a)


def show_adjudication(adjudication: Adjudication) -> Adjudication:
    """Mark an adjudication as shown and, for Task 2, draw its own random A/B order."""
    return _show(adjudication, _coin_report_a)


_SHOWN = "UPDATE {table} SET {changes} WHERE id = %s"


def _show(shown: Assignment | Adjudication, draw_report_a) -> Assignment | Adjudication:
    # One UPDATE and no lock: each value is written only while still unset, and the A/B order is
    # a pure function of the study's seed and the example, so two tabs (or two readers) opening
    # at the same moment store the same values whichever runs first. Written by hand: it runs on
    # every item shown, and the ORM's UPDATE with its two conditional expressions cost about a
    # millisecond to compile.
    changes, params = [], []
    if shown.first_shown_at is None:
        shown.first_shown_at = timezone.now()
        changes.append("first_shown_at = COALESCE(first_shown_at, %s)")
        params.append(connection.ops.adapt_datetimefield_value(shown.first_shown_at))
    if shown.task == Task.EQUIVALENCE and not shown.report_a_type:
        shown.report_a_type = draw_report_a(shown.example, shown)
        changes.append("report_a_type = CASE WHEN report_a_type = '' THEN %s ELSE report_a_type END")
        params.append(shown.report_a_type)
    if changes:
        table = connection.ops.quote_name(type(shown)._meta.db_table)
        with connection.cursor() as cursor:
            cursor.execute(_SHOWN.format(table=table, changes=", ".join(changes)), [*params, shown.pk])
    return shown


def _draw_report_a(example: Example, assignment: Assignment) -> str:
    if assignment.slot in INITIAL_SLOTS:
        coin = tiebreak(example.study.seed, "report-a", example.public_id) % 2
        if assignment.slot == INITIAL_SLOTS[1]:
            coin = 1 - coin
        return ReportType.ORIGINAL if coin == 0 else ReportType.ALTERNATIVE
    return _coin_report_a(example, assignment)


def _coin_report_a(example: Example, shown: Assignment | Adjudication) -> str:
    coin = tiebreak(example.study.seed, "report-a", shown.public_id) % 2
    return ReportType.ORIGINAL if coin == 0 else ReportType.ALTERNATIVE


# --- The undo window: a rating settles before routing acts on it -------------------------------
#
# A rating is stored at once and settles when its undo window closes: at its reader's next submit
# (_store_annotation) or at its settle_by, whichever comes first. Routing counts settled ratings
# only. Until it settles its reader may take it back (undo_last_rating), so whether undo is allowed
# depends on the reader's own actions and the clock alone. Settling and taking back both change
# the rating's row only while it is unsettled, so when they race exactly one of them happens.


# A submit asks for these on every rating: written by hand, they cost no query compilation. A column of
# the reader's one unsettled rating (a partial unique index allows one per reader), as a scalar subquery:
# the lock reads it along, and so does the assignment's row, after the lock.
_UNSETTLED_RATING = "SELECT u.{column} FROM {annotations} u WHERE u.reader_id = %s AND u.settled_at IS NULL"
_OWN_ASSIGNMENT = """SELECT {columns}, ({unsettled_id}), ({unsettled_example}) FROM {assignments}
 LEFT OUTER JOIN {annotations} ON n.assignment_id = a.id WHERE a.public_id = %s AND a.reader_id = %s"""
_ASSIGNMENT, _ANNOTATION = Selected(Assignment, "a"), Selected(Annotation, "n")
# And these on most: settling the reader's previous rating, reading the example's ratings to route it,
# marking the assignment rated.
_SETTLE = "UPDATE {annotations} SET settled_at = %s WHERE id = %s AND settled_at IS NULL"
_DUE_ONLY = " AND settle_by <= %s"
_SETTLED_AT = Annotation._meta.get_field("settled_at")
_SETTLED_RATINGS = (
    "SELECT rating, reader_id FROM {annotations}"
    " WHERE example_id = %s AND settled_at IS NOT NULL AND voided_at IS NULL ORDER BY id"
)


def _unsettled_rating(column: str) -> str:
    """SQL giving one column of the reader's unsettled rating (its parameter: the reader's pk)."""
    return _UNSETTLED_RATING.format(column=column, annotations=connection.ops.quote_name(Annotation._meta.db_table))


def _own_assignment_with_rating(read: ReadOf, unsettled: tuple[int, int] | None) -> Assignment | None:
    """The reader's assignment, with its rating (annotation) read along as select_related would.

    Read once the examples are locked (_lock_with_unsettled), with the reader's unsettled rating as it
    is now: if they have one and it is not `unsettled`, the one the lock saw (another tab stored a
    rating meanwhile), its example is not locked: raises _UnsettledRatingMoved, and the submit starts
    again."""
    public_id = Assignment._meta.get_field("public_id").get_db_prep_value(read.assignment_id, connection)
    statement = _OWN_ASSIGNMENT.format(
        columns=select_list(connection, _ASSIGNMENT, _ANNOTATION),
        unsettled_id=_unsettled_rating("id"),
        unsettled_example=_unsettled_rating("example_id"),
        assignments=_ASSIGNMENT.table(connection),
        annotations=_ANNOTATION.table(connection),
    )
    with connection.cursor() as cursor:
        cursor.execute(statement, [read.reader_pk, read.reader_pk, public_id, read.reader_pk])
        row = cursor.fetchone()
    if row is None:
        return None
    *row, unsettled_pk, unsettled_example_pk = row
    if unsettled_pk is not None and (unsettled_pk, unsettled_example_pk) != unsettled:
        raise _UnsettledRatingMoved
    assignment = _ASSIGNMENT.instance(row[: len(_ASSIGNMENT)], connection)
    rating = None
    if row[len(_ASSIGNMENT)] is not None:
        rating = _ANNOTATION.instance(row[len(_ASSIGNMENT) :], connection)
        attach(rating, assignment=assignment)
    Assignment._meta.get_field("annotation").set_cached_value(assignment, rating)
    return assignment


def _lock_with_unsettled(read: ReadOf) -> tuple[Example | None, tuple[int, int] | None, Example | None]:
    """Lock the example being rated and that of the reader's unsettled rating (if they have one), with
    the other examples of their exams (as lock_example), in primary-key order, in one query.

    Returns the rated example (None if the reader has no such read), the unsettled rating as the query
    saw it ((annotation pk, example pk), or None) and its example. The query may have waited for a
    lock, and what it read of the unsettled rating is from before: _own_assignment_with_rating looks
    again once everything is locked.
    """
    of_reader = [read.reader_pk]
    locked = _lock_exams_of(
        [_example_of(read), (_unsettled_rating("example_id"), of_reader)],
        along=[(_unsettled_rating("id"), of_reader), (_unsettled_rating("example_id"), of_reader)],
    )
    unsettled_pk, unsettled_example_pk = locked.along
    if unsettled_pk is None:
        return locked.example(locked.first_target), None, None
    unsettled_example = locked.example(unsettled_example_pk)
    assert unsettled_example is not None, "a rating's example is never deleted"
    return locked.example(locked.first_target), (unsettled_pk, unsettled_example_pk), unsettled_example


def _settle(annotation_pk: int, example: Example, *, now: datetime, due_only: bool = False) -> bool:
    """Settle one rating and route its example, if it is still unsettled (and, due_only, its window has
    closed). Caller holds the example's lock. False if it was settled or taken back meanwhile."""
    at = _SETTLED_AT.get_db_prep_save(now, connection)
    statement, params = (_SETTLE + _DUE_ONLY, [at, annotation_pk, at]) if due_only else (_SETTLE, [at, annotation_pk])
    with connection.cursor() as cursor:
        cursor.execute(statement.format(annotations=connection.ops.quote_name(Annotation._meta.db_table)), params)
        if not cursor.rowcount:
            return False
    route_example(example)
    return True


def _settled_ratings(example_pk: int) -> list[tuple[str, int]]:
    """(rating, reader pk) of the example's settled ratings that stand, oldest first."""
    with connection.cursor() as cursor:
        cursor.execute(
            _SETTLED_RATINGS.format(annotations=connection.ops.quote_name(Annotation._meta.db_table)), [example_pk]
        )
        return [tuple(row) for row in cursor.fetchall()]


def _time_on_task(assignment: Assignment, now: datetime) -> int | None:
    """First shown -> now, in ms; after an undo, the time on task of the rating taken back plus the time since."""
    started = assignment.resumed_at or assignment.first_shown_at
    if started is None:
        return None
    return assignment.time_before_undo_ms + max(0, int((now - started).total_seconds() * 1000))


def _was_taken_back(assignment: Assignment, form_token: uuid.UUID) -> bool:
    """Whether this form's rating of the assignment was stored and then taken back (a late retry of it)."""
    return AuditEvent.objects.filter(
        study_id=assignment.study_id,
        example_id=assignment.example_id,
        subject_id=assignment.reader_id,
        action=AuditAction.UNDONE,
        before__form_token=str(form_token),
    ).exists()


def _enqueue_settlement(settle_by: datetime) -> None:
    """Have the worker settle the ratings due by settle_by, at the end of that second: one task per second
    of deadlines, not one per rating (a failure to queue is logged: the next rating's task, the
    reader's next submit or `manage.py settle_ratings` settles them).

    At a study's pace of ratings, one task each would add a queued row to every submit and a run of
    the worker (that finds nothing to do, the reader's next submit having settled it) per rating.
    """
    run_after = settlement_run_after(settle_by)
    try:
        backend = settle_ratings_task.get_backend()
        if _settlement_queued.get(backend) == run_after:
            return  # this process has queued that second's task
        settle_ratings_task.using(run_after=run_after).enqueue()
    except Exception:
        logger.exception("Could not queue the settlement of the ratings due at %s", settle_by.isoformat())
    else:
        _settlement_queued[backend] = run_after


def settlement_run_after(settle_by: datetime) -> datetime:
    """When the worker settles a rating due at settle_by: at the next whole second (settle_by itself
    if it is one)."""
    whole = settle_by.replace(microsecond=0)
    return whole if whole == settle_by else whole + timedelta(seconds=1)


# The last settlement each task backend (each thread has its own) was given by this process.
_settlement_queued: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def settle_due_ratings(*, now: datetime | None = None) -> int:
    """Settle every rating whose undo window has closed and route its example. Returns how many.

    The worker runs it at the end of the second of each rating's settle_by (settle_ratings_task),
    `manage.py settle_ratings` on demand. Each rating settles in its own transaction under its
    example's lock; one its reader took back, or that settled meanwhile (their next submit, a second
    worker), is left alone.
    """
    now = now or timezone.now()
    due = list(
        Annotation.objects.filter(settled_at__isnull=True, settle_by__lte=now)
        .order_by("settle_by", "pk")
        .values_list("pk", "example_id")
    )
    settled = 0
    for annotation_pk, example_pk in due:
        with transaction.atomic(), queues.counting():
            settled += _settle(annotation_pk, lock_example(example_pk), now=now, due_only=True)
    return settled


@task()
def settle_ratings_task() -> dict:
    """Settle the ratings whose undo window has closed (queued for the end of the second of a rating's settle_by).

    It settles every due rating, not only the one that queued it, so a task that was lost or ran
    late is made up for by the next. Run by `manage.py db_worker` (the worker that builds releases).
    """
    return {"settled": settle_due_ratings()}


@dataclass(frozen=True)
class UndoResult:
    """The read back in the reader's queue (first in it), and the rating they took back."""

    assignment: Assignment
    rating: str
    rationale: str


def undo_last_rating(reader: AbstractBaseUser, *, now: datetime | None = None) -> UndoResult:
    """Take back the reader's last rating while its undo window is open.

    The rating is deleted (the audit trail keeps who, when and what it was, and the form's token,
    so a late retry of that form cannot store it again), its read is open again and first in the
    reader's queue, and the time on task so far carries over to the next rating. Otherwise raises
    UndoRefused saying why. Only the rating's own row is locked, never an example: neither the
    answer nor how long it takes depends on what another reader is doing.
    """
    now = now or timezone.now()
    with transaction.atomic(), queues.counting():
        annotation = (
            Annotation.objects.select_for_update(of=("self",))
            .filter(reader=reader, settled_at__isnull=True, settle_by__gt=now)
            .select_related("assignment", "example__study")
            .first()
        )
        if annotation is None:
            raise UndoRefused(_why_not_undoable(reader))
        assignment = annotation.assignment
        annotation.delete()
        first_open = reserve.first_open_place(reader.pk, assignment.study_id, assignment.task)
        assignment.status = AssignmentStatus.OPEN
        assignment.queue_order = assignment.queue_order if first_open is None else first_open - 1
        assignment.time_before_undo_ms = annotation.duration_ms or 0
        assignment.resumed_at = now
        assignment.save(update_fields=["status", "queue_order", "time_before_undo_ms", "resumed_at"])
        queues.count(reader.pk, assignment.study_id, assignment.task, opened=1, rated=-1)
        AuditEvent.objects.record(
            AuditAction.UNDONE,
            study=annotation.example.study,
            actor=reader,
            example=annotation.example,
            subject=reader,
            before={
                "annotation": str(annotation.public_id),
                "assignment": str(assignment.public_id),
                "slot": assignment.slot,
                "rating": annotation.rating,
                "rationale": annotation.rationale,
                "submitted_at": annotation.created_at.isoformat(),
                "duration_ms": annotation.duration_ms,
                "form_token": str(annotation.form_token),
            },
        )
    return UndoResult(assignment, annotation.rating, annotation.rationale)


def _why_not_undoable(reader: AbstractBaseUser) -> str:
    last = Annotation.objects.filter(reader=reader).order_by("-pk").first()
    if last is None:
        return "You have no rating to take back."
    return (
        f"Your last rating ({last.get_rating_display()}) can no longer be taken back: it settled when its undo "
        "window closed or when you submitted another rating. A coordinator can void it if you ask, with a reason."
    )
