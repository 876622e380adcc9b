"""What a reader is shown, and nothing more.

A ReadingItem is built without the report type, the variation or the dataset, so no template
can leak them: for a pair, the original's and the alternative's Task 1 items differ only in
their text.
"""

import math
import uuid
from dataclasses import dataclass
from datetime import datetime

from django.db import connection
from django.db.models import Q
from django.utils import timezone

from annotation.models import (
    RATINGS_WITHOUT_RATIONALE,
    TASK_RATINGS,
    Annotation,
    Assignment,
    AssignmentStatus,
    AuditAction,
    AuditEvent,
    CandidatePair,
    Example,
    RatingChoice,
    ReaderQueue,
    ReportType,
    Study,
    Task,
)
from annotation.rows import Selected, as_uuid, attach, instances, select_list

# The protocol's definitions, shown next to the labels.
RATING_DEFINITIONS: dict[str, str] = {
    RatingChoice.REALISTIC: "Reads as written by a practicing radiologist in routine care.",
    RatingChoice.MINOR_ISSUES: "Mostly realistic, with subtle unusual phrasing or formatting; clinically correct.",
    RatingChoice.MAJOR_ISSUES: "Major errors, incoherent phrasing, or unnatural elements a radiologist would "
    "not write.",
    RatingChoice.EQUIVALENT: "A treating physician would find the same findings and make the same decisions.",
    RatingChoice.MINOR_DISCREPANCY: "Differences in style, structure, terminology or detail that do not change "
    "clinical actions.",
    RatingChoice.MAJOR_DISCREPANCY: "Differences that could change clinical decisions.",
}

TASK_QUESTIONS: dict[str, str] = {
    Task.REALISM: "Is this report realistic? Rate the Findings and Impression only.",
    Task.EQUIVALENCE: "Are Report A and Report B clinically equivalent?",
}


@dataclass(frozen=True)
class ShownReport:
    heading: str
    findings: str
    impression: str


@dataclass(frozen=True)
class ShownLabel:
    value: str
    label: str
    definition: str
    key: int
    needs_rationale: bool


@dataclass(frozen=True)
class ReadingItem:
    task: str
    task_label: str
    question: str
    context: tuple[tuple[str, str], ...]
    reports: tuple[ShownReport, ...]
    labels: tuple[ShownLabel, ...]


def reading_item(example: Example, *, report_a_type: str = "") -> ReadingItem:
    """The blinded presentation of an example. Task 2 needs the drawn A/B order."""
    return present(example.task, example.pair, report_type=example.report_type, report_a_type=report_a_type)


def present(task: str, source, *, report_type: str = "", report_a_type: str = "") -> ReadingItem:
    """What a reader is shown of a pair's text (a CandidatePair, or a PracticeItem shown the same way)."""
    if task == Task.REALISM:
        findings, impression = source.report(report_type)
        reports: tuple[ShownReport, ...] = (ShownReport("Report", findings, impression),)
    else:
        first = report_a_type or ReportType.ORIGINAL
        second = ReportType.ALTERNATIVE if first == ReportType.ORIGINAL else ReportType.ORIGINAL
        reports = (ShownReport("Report A", *source.report(first)), ShownReport("Report B", *source.report(second)))
    labels = tuple(
        ShownLabel(
            value=rating,
            label=RatingChoice(rating).label,
            definition=RATING_DEFINITIONS[rating],
            key=position,
            needs_rationale=rating not in RATINGS_WITHOUT_RATIONALE,
        )
        for position, rating in enumerate(TASK_RATINGS[task], start=1)
    )
    return ReadingItem(
        task=task,
        task_label=Task(task).label,
        question=TASK_QUESTIONS[task],
        context=(
            ("Indication", source.indication),
            ("Comparison", source.comparison),
            ("Technique", source.technique),
        ),
        reports=reports,
        labels=labels,
    )


def api_payload(
    item: ReadingItem, public_id, study: Study, *, rating: str | None = None, rationale: str | None = None, **extra
) -> dict:
    """An item as the API hands it to a reader, a judge or a reader practising: the blinded item and
    its public id, the study it belongs to (as the reading page names it), plus what the caller adds
    (position and status, or what practice still needs), and the stored rating once there is one.
    The one builder of every reading payload, so that a field cannot reach one of them and not the
    others; the serializers choose what is sent."""
    return {
        "id": public_id,
        "study": {"slug": study.slug, "name": study.name},
        "task": item.task,
        "question": item.question,
        "context": {name.lower(): text for name, text in item.context},
        "reports": item.reports,
        "labels": item.labels,
        "rating": rating,
        "rationale": rationale,
        **extra,
    }


def reader_queues(reader) -> list[dict]:
    """The reader's queues, one per (study, task): how many they have rated, and whether an item waits.

    Never a total: a total grows when a third read is routed to the reader, and would tell them
    that two colleagues disagreed. One query, on the queue counters.
    """
    return queues_shown(queue_counts(reader))


def queue_counts(reader) -> list[dict]:
    """The counters of the reader's queues that have or had work (one query)."""
    return list(
        ReaderQueue.objects.filter(reader=reader)
        .filter(Q(open_count__gt=0) | Q(rated_count__gt=0) | Q(held_count__gt=0))
        .values("study_id", "study__slug", "study__name", "task", "open_count", "rated_count", "held_count")
        .order_by("study__name", "task")
    )


def queues_shown(rows: list[dict]) -> list[dict]:
    """What the reader is shown of their queue counters: nothing of their reserve (consensus.reserve)."""
    return [
        {
            "study_slug": row["study__slug"],
            "study_name": row["study__name"],
            "task": row["task"],
            "task_label": Task(row["task"]).label,
            "done": row["rated_count"],
            "waiting": row["open_count"] > 0,
        }
        for row in rows
        if row["open_count"] or row["rated_count"]
    ]


def home_studies(queues: list[dict], adjudications: list[dict]) -> list[dict]:
    """The reader's home, one entry per study: its reading queues (Task 1 first) and adjudications.

    Studies with something waiting come first, then by name.
    """
    studies: dict[str, dict] = {}
    for queue in [*queues, *adjudications]:
        study = studies.setdefault(
            queue["study_slug"],
            {"slug": queue["study_slug"], "name": queue["study_name"], "queues": [], "adjudication": None},
        )
        if "task" in queue:
            study["queues"].append(queue)
        else:
            study["adjudication"] = queue
    task_order = {task: position for position, task in enumerate(Task.values)}
    for study in studies.values():
        study["queues"].sort(key=lambda queue: task_order[queue["task"]])
        study["waiting"] = any(queue["waiting"] for queue in study["queues"]) or bool(
            study["adjudication"] and study["adjudication"]["waiting"]
        )
    return sorted(studies.values(), key=lambda study: (not study["waiting"], study["name"], study["slug"]))


def queue_position(assignment: Assignment) -> int | None:
    """N in "Item N": the reader's ratings in this study and task so far, plus one for an open item.

    None for an item that is no longer open. Read from the queue's counters: one row, whatever
    the queue's length.
    """
    if assignment.status != AssignmentStatus.OPEN:
        return None
    if RATED_IN_QUEUE in assignment.__dict__:
        rated = assignment.__dict__[RATED_IN_QUEUE]  # read along by next_assignment
    else:
        rated = (
            ReaderQueue.objects.filter(
                reader_id=assignment.reader_id, study_id=assignment.study_id, task=assignment.task
            )
            .values_list("rated_count", flat=True)
            .first()
        )
    return (rated or 0) + 1


# The reader's rated count in the assignment's queue, as next_assignment reads it along.
RATED_IN_QUEUE = "_rated_in_queue"


def next_assignment(
    reader, *, task: str, study_id: int | None = None, study_slug: str | None = None
) -> Assignment | None:
    """The reader's first open assignment of a task, loaded with its example, pair and study.

    In one study if given, else in the lowest-numbered study with open work. Not a read in the
    reader's reserve (consensus.reserve): it is not theirs to be given yet. One query: the inner
    SELECT walks the reader-queue index (reader, study, task, status, queue_order) and stops at the
    first entry; the joins apply to that one row only. The queue's rated count (queue_position) is
    read along. Written by hand (annotation.rows): it runs on every request for the next item, and
    the ORM took about 5 ms to compile it.
    """
    first, params = _first_open(reader, task=task, study_id=study_id, study_slug=study_slug, column="id")
    statement = _NEXT_ASSIGNMENT.format(
        columns=select_list(connection, _ASSIGNMENT, _EXAMPLE, _PAIR, _STUDY),
        assignments=_ASSIGNMENT.table(connection),
        examples=_EXAMPLE.table(connection),
        pairs=_PAIR.table(connection),
        studies=_STUDY.table(connection),
        reader_queues=connection.ops.quote_name(ReaderQueue._meta.db_table),
        first=first,
    )
    with connection.cursor() as cursor:
        cursor.execute(statement, params)
        row = cursor.fetchone()
    if row is None:
        return None
    assignment, example, pair, study = instances(row, connection, _ASSIGNMENT, _EXAMPLE, _PAIR, _STUDY)
    attach(example, pair=pair, study=study)
    attach(assignment, example=example)
    assignment.__dict__[RATED_IN_QUEUE] = row[-1]
    return assignment


def next_assignment_id(reader, *, task: str, study_id: int | None = None) -> uuid.UUID | None:
    """The public id of the assignment next_assignment would give, alone: what the API's answer to a
    rating names as the reader's next item. One query on the reader-queue index, nothing joined."""
    statement, params = _first_open(reader, task=task, study_id=study_id, study_slug=None, column="public_id")
    with connection.cursor() as cursor:
        cursor.execute(statement, params)
        row = cursor.fetchone()
    return None if row is None else as_uuid(row[0])


def _first_open(reader, *, task: str, study_id: int | None, study_slug: str | None, column: str) -> tuple[str, list]:
    """SQL giving one column of the reader's first open assignment of the task (not in their reserve),
    in one study if given, else in the lowest-numbered study with open work; and its parameters."""
    quote = connection.ops.quote_name
    in_study, study_params = of_study("q", study_id=study_id, study_slug=study_slug)
    statement = _FIRST_OPEN.format(column=quote(column), queue=quote(Assignment._meta.db_table), in_study=in_study)
    return statement, [reader.pk, task, AssignmentStatus.OPEN, *study_params]


def of_study(alias: str, *, study_id: int | None, study_slug: str | None) -> tuple[str, list]:
    """SQL conditions (each led by AND) keeping the rows under alias, which have a study_id, of one
    study, by its pk and/or its slug; and their parameters. Empty when neither is given."""
    condition, params = "", []
    if study_id is not None:
        condition += _BY_STUDY_ID.format(alias=alias)
        params.append(study_id)
    if study_slug is not None:
        condition += _BY_STUDY_SLUG.format(alias=alias, studies=connection.ops.quote_name(Study._meta.db_table))
        params.append(study_slug)
    return condition, params


_BY_STUDY_ID = " AND {alias}.study_id = %s"
_BY_STUDY_SLUG = " AND {alias}.study_id = (SELECT {alias}s.id FROM {studies} {alias}s WHERE {alias}s.slug = %s)"


_FIRST_OPEN = """SELECT q.{column} FROM {queue} q
   WHERE q.reader_id = %s AND q.task = %s AND q.status = %s AND NOT q.held{in_study}
   ORDER BY q.study_id, q.queue_order, q.id LIMIT 1"""
_NEXT_ASSIGNMENT = """SELECT {columns},
 (SELECT rq.rated_count FROM {reader_queues} rq WHERE rq.reader_id = a.reader_id AND rq.study_id = a.study_id
  AND rq.task = a.task)
 FROM {assignments} JOIN {examples} ON e.id = a.example_id
 JOIN {pairs} ON p.id = e.pair_id JOIN {studies} ON s.id = e.study_id
 WHERE a.id = ({first})"""
_ASSIGNMENT, _EXAMPLE = Selected(Assignment, "a"), Selected(Example, "e")
_PAIR, _STUDY = Selected(CandidatePair, "p"), Selected(Study, "s")


@dataclass(frozen=True)
class SavedNotice:
    """What a reader is told about their last rating: "Saved: Item 6, Minor Issues", and whether they can
    still take it back and for how many seconds. Made of their own rating and the clock, nothing else."""

    item: int
    rating_label: str
    task: str
    task_label: str
    study_slug: str
    undoable: bool
    seconds_left: int
    window_seconds: int


def saved_notice(reader, *, saved: Annotation | None = None, now: datetime | None = None) -> SavedNotice | None:
    """The notice about the rating just stored (saved), else about the reader's rating that can still be
    taken back (None if there is none). Two queries."""
    now = now or timezone.now()
    if saved is None:
        saved = (
            Annotation.objects.filter(reader=reader, settled_at__isnull=True, settle_by__gt=now)
            .select_related("example__study")
            .first()
        )
        if saved is None:
            return None
    study = saved.example.study
    # Its item number: the ratings in its queue, this one included (it is the reader's newest).
    item = (
        ReaderQueue.objects.filter(reader=reader, study_id=study.pk, task=saved.task)
        .values_list("rated_count", flat=True)
        .first()
    )
    seconds_left = undo_seconds_left(saved, now=now)
    return SavedNotice(
        item=item or 1,
        rating_label=RatingChoice(saved.rating).label,
        task=saved.task,
        task_label=Task(saved.task).label,
        study_slug=study.slug,
        undoable=seconds_left > 0,
        seconds_left=seconds_left,
        window_seconds=study.undo_window_seconds,
    )


def undo_seconds_left(annotation: Annotation, *, now: datetime | None = None) -> int:
    """For how many more seconds the reader can take this rating back (0 once it has settled or its window closed)."""
    if annotation.settled_at is not None:
        return 0
    return max(0, math.ceil((annotation.settle_by - (now or timezone.now())).total_seconds()))


def taken_back_rating(assignment: Assignment) -> dict[str, str] | None:
    """{"rating", "rationale"} of the reader's last rating of this read that they took back, if any (to
    fill the form with). One query, only for a read that was taken back."""
    if assignment.resumed_at is None:
        return None
    before = (
        AuditEvent.objects.filter(
            study_id=assignment.study_id,
            example_id=assignment.example_id,
            subject_id=assignment.reader_id,
            action=AuditAction.UNDONE,
        )
        .order_by("-pk")
        .values_list("before", flat=True)
        .first()
    )
    if not before:
        return None
    return {"rating": before.get("rating", ""), "rationale": before.get("rationale", "")}
