"""The reserve: initial reads held back, so that third reads do not gather at the end of a queue.

A third read exists only once two colleagues have rated an example and disagreed, so it reaches a
reader late. At a random place among their open items it is hidden while they have many; but a
queue shrinks as it is read, and what arrives late crowds its last places: without a reserve,
the last item before a queue runs out is a third read far more often than the base rate, and an
item that arrives after it ran out nearly always is one. "My queue is about to run out" would say
"colleagues disagreed on this".

So when a queue is drawn, a share of each reader's initial reads (the study's reserve_percent) is
held back (Assignment.held): open and theirs, but not given to them yet. Then:

- Escorts. A read routed to a reader after their queue was drawn (a third read, a refill after a
  void, a late joiner's read, one given by hand) brings reads from their reserve with it, each at
  a random place after the first open item: on average (1 - p) / p of them, p being the study's
  share of third reads so far. Whatever comes in, comes in a batch in which a third read is as
  rare as it is in the study.
- Pacing. A reader whose queue is empty gets reads from their reserve only while the study's
  task is quiet: no colleague with items to read has rated in the last
  READINGROOM_RESERVE_QUIET_SECONDS, and no colleague's rating waits to settle. While colleagues
  read, their disagreements bring third reads, with escorts; when everyone has stopped, the
  reserve is given out in batches the size of a routed read's (its escorts and one), so that the
  runs of reads that end a queue are alike in length whatever started them.

Routing (consensus.services.eligible_readers) sends a read to the eligible reader with the most
reads ahead of them (open and held), where it lands among many. The reserve then lasts as long as
third reads can come, and the items that end a queue are a mix like any other.

The cost is time: nobody reads far ahead of the others; a reader whose queue is empty waits while
colleagues read. A reserve of 0 turns all of this off.
"""

import uuid
from datetime import datetime, timedelta

from django.conf import settings
from django.contrib.auth.models import AbstractBaseUser
from django.db import connection, transaction
from django.utils import timezone

from annotation import queues, reading
from annotation.models import Annotation, Assignment, AssignmentStatus, Example, ReaderQueue, Study, tiebreak
from annotation.rows import as_uuid

# queue_order values are drawn from [0, 2**63): tiebreak() keeps 63 bits.
QUEUE_ORDER_END = 2**63
# Before the study has disagreements of its own, its share of third reads is taken to be 15% (the
# weight of that guess: 20 reads), so the first reads routed bring escorts too.
PRIOR_THIRD_READS = 3
PRIOR_READS = 20
# Escorts per routed read at most (a study whose readers almost never disagree).
MAX_ESCORTS = 20


def place_after(first_open: int | None, draw: int) -> int:
    """A queue place for a draw in [0, QUEUE_ORDER_END): uniform after the first open item.

    The open items' places are uniform draws above the first, so a place drawn the same way is at
    any of their ranks with equal chance. Scaled, not reduced modulo the span: a modulo would
    favour the span's lower part. With no place left after the first open item, the draw itself.
    """
    if first_open is not None and first_open + 1 < QUEUE_ORDER_END:
        return first_open + 1 + draw * (QUEUE_ORDER_END - first_open - 1) // QUEUE_ORDER_END
    return draw


def first_open_place(reader_pk: int, study_pk: int, task: str) -> int | None:
    """The place of the first item the reader can be given in a queue (the one that may be on their
    screen), or None. One index lookup."""
    table = connection.ops.quote_name(Assignment._meta.db_table)
    with connection.cursor() as cursor:
        cursor.execute(_FIRST_OPEN_PLACE.format(assignments=table), [reader_pk, study_pk, task, AssignmentStatus.OPEN])
        row = cursor.fetchone()
    return row[0] if row else None


# Written once (annotation.rows), as the statements of escort_count: both run on every read routed to
# a reader after their queue was drawn.
_FIRST_OPEN_PLACE = """SELECT a.queue_order FROM {assignments} a
 WHERE a.reader_id = %s AND a.study_id = %s AND a.task = %s AND a.status = %s AND NOT a.held
 ORDER BY a.queue_order LIMIT 1"""
_ESCORT_TOTALS = """SELECT COALESCE(SUM(q.third_read_count), 0), COALESCE(SUM(q.second_read_count), 0)
 FROM {queues} q WHERE q.study_id = %s AND q.task = %s"""


def release_escorts(study: Study, task: str, reader_pk: int, routed_public_id, *, first_open: int | None) -> int:
    """Release reads from the reader's reserve to come with a read just routed to them; how many.

    Caller holds the routed example's lock, inside queues.counting().
    """
    if not study.reserve_percent:
        return 0
    return _release(study, task, reader_pk, escort_count(study, task, reader_pk, routed_public_id), first_open)


def escort_count(study: Study, task: str, reader_pk: int, routed_public_id) -> int:
    """How many reserve reads come with a routed read: (1 - p) / p on average, rounded up or down by a
    seeded coin. p is the share of third reads among the reads of the examples whose two first reads
    are in (each brought 2 reads, and a third one if they disagreed), with a prior. One query over the
    task's queue counters (one row per reader)."""
    with connection.cursor() as cursor:
        cursor.execute(
            _ESCORT_TOTALS.format(queues=connection.ops.quote_name(ReaderQueue._meta.db_table)), [study.pk, task]
        )
        third_reads, second_reads = (int(total) for total in cursor.fetchone())
    reads = 2 * second_reads + third_reads
    share = (third_reads + PRIOR_THIRD_READS) / (reads + PRIOR_READS)
    mean = min((1 - share) / share, MAX_ESCORTS) if share < 1 else 0.0
    whole = int(mean)
    coin = tiebreak(study.seed, "escorts", reader_pk, routed_public_id) / QUEUE_ORDER_END
    return whole + (coin < mean - whole)


def _release(
    study: Study, task: str, reader_pk: int, limit: int, first_open: int | None, *, only: list[int] | None = None
) -> int:
    """Move up to `limit` reads from the reserve into the queue, each at a random place after the
    first open item; how many moved. Two queries.

    The reserve is released in its own (seeded, shuffled) order. On PostgreSQL rows another
    transaction is releasing are skipped; the UPDATE moves only reads still held, and the counters
    count what it moved, so two releases at once never move one read twice.
    """
    if limit <= 0:
        return 0
    quote = connection.ops.quote_name
    assignments, examples = quote(Assignment._meta.db_table), quote(Example._meta.db_table)
    only_these, params = "", [reader_pk, study.pk, task, AssignmentStatus.OPEN]
    if only is not None:
        only_these = f" AND a.id IN ({', '.join(['%s'] * len(only))})" if only else " AND 1 = 0"
        params += only
    lock = ""
    if connection.vendor == "postgresql":
        lock = " " + connection.ops.for_update_sql(skip_locked=True, of=(quote("a"),))
    with connection.cursor() as cursor:
        statement = _HELD.format(assignments=assignments, examples=examples, only=only_these, lock=lock)
        cursor.execute(statement, [*params, limit])
        rows = [(pk, as_uuid(public_id)) for pk, public_id in cursor.fetchall()]
        if not rows:
            return 0
        # A draw of its own: the reserve is released in the order of the reads' first draws ("queue"), so
        # placing them by those again would put the first released first.
        places, pks = [], []
        for pk, example_id in rows:
            places += [pk, place_after(first_open, tiebreak(study.seed, "released", reader_pk, example_id))]
            pks.append(pk)
        statement = _RELEASE.format(
            assignments=assignments,
            places=" ".join(["WHEN %s THEN CAST(%s AS BIGINT)"] * len(rows)),
            pks=", ".join(["%s"] * len(rows)),
        )
        cursor.execute(statement, [*places, *pks])
        moved = cursor.rowcount
    queues.count(reader_pk, study.pk, task, opened=moved, held=-moved)
    return moved


# Written once (annotation.rows): run on most reads routed to a reader after their queue was drawn.
_HELD = """SELECT a.id, e.public_id FROM {assignments} a JOIN {examples} e ON e.id = a.example_id
 WHERE a.reader_id = %s AND a.study_id = %s AND a.task = %s AND a.status = %s AND a.held{only}
 ORDER BY a.queue_order LIMIT %s{lock}"""
_RELEASE = """UPDATE {assignments} SET held = FALSE, queue_order = CASE id {places} END
 WHERE id IN ({pks}) AND held"""


def release_read(assignment: Assignment) -> bool:
    """Give one read held in its reader's reserve to them now, at a random place after their first
    open item, as a release from the reserve places it; whether it was held. For the demo, which reads
    one example to a split before anybody reads (reading.management.commands.load_demo)."""
    study = Study.objects.get(pk=assignment.study_id)
    with transaction.atomic(), queues.counting():
        first_open = first_open_place(assignment.reader_id, study.pk, assignment.task)
        return _release(study, assignment.task, assignment.reader_id, 1, first_open, only=[assignment.pk]) > 0


def open_empty_queues(study: Study) -> int:
    """After a queue was drawn: give every reader of the study whose queue is all reserve one read
    from it, so that nobody starts with nothing to read. How many queues."""
    opened = 0
    empty = ReaderQueue.objects.filter(study=study, open_count=0, held_count__gt=0).values_list("reader_id", "task")
    for reader_pk, task in list(empty):
        opened += _release(study, task, reader_pk, 1, None) > 0
    return opened


def release_when_quiet(
    reader: AbstractBaseUser,
    *,
    task: str | None = None,
    study_id: int | None = None,
    study_slug: str | None = None,
    now: datetime | None = None,
) -> bool:
    """Give the reader one read from their reserve in each of their empty queues (of the task and
    study, if given) whose study is quiet (see the module's docstring). Whether any was given.

    One query when the reader has no empty queue with a reserve; four more per such queue.
    """
    condition, params = "", [reader.pk]
    if task is not None:
        condition += " AND q.task = %s"
        params.append(task)
    in_study, study_params = reading.of_study("q", study_id=study_id, study_slug=study_slug)
    statement = _EMPTY_WITH_A_RESERVE.format(
        queues=connection.ops.quote_name(ReaderQueue._meta.db_table), condition=condition + in_study
    )
    params += study_params
    with connection.cursor() as cursor:
        cursor.execute(statement, params)
        empty = cursor.fetchall()
    return _release_in(reader, empty, now)


# The reader's empty queues with a reserve, by hand: every request for a next item that finds
# nothing asks it, and the ORM took about 3 ms to compile it.
_EMPTY_WITH_A_RESERVE = """SELECT q.study_id, q.task, q.held_count FROM {queues} q
 WHERE q.reader_id = %s AND q.open_count = 0 AND q.held_count > 0{condition}
 ORDER BY q.study_id, q.task"""


def _release_in(reader: AbstractBaseUser, empty: list[tuple[int, str, int]], now: datetime | None) -> bool:
    """Release a batch from the reserve of each (study, task, reads held) whose study is quiet."""
    now = now or timezone.now()
    released = False
    for study_id, task, held in empty:
        study = Study.objects.get(pk=study_id)
        if not _quiet(study, task, reader.pk, now):
            continue
        # As many as a routed read brings, and one: its coin drawn for the reserve's current size.
        batch = escort_count(study, task, reader.pk, f"paced:{held}") + 1
        with transaction.atomic(), queues.counting():
            released |= _release(study, task, reader.pk, batch, None) > 0
    return released


def reader_queues(reader: AbstractBaseUser, *, now: datetime | None = None) -> list[dict]:
    """annotation.reading.reader_queues, after releasing a read from the reserve of each empty queue
    whose study is quiet. One query when no queue of the reader's is empty with a reserve."""
    rows = reading.queue_counts(reader)
    empty = [
        (row["study_id"], row["task"], row["held_count"]) for row in rows if not row["open_count"] and row["held_count"]
    ]
    if empty and _release_in(reader, empty, now):
        rows = reading.queue_counts(reader)
    return reading.queues_shown(rows)


def _quiet(study: Study, task: str, reader_pk: int, now: datetime) -> bool:
    """No colleague with items to read in the study's task rated lately, and no colleague's rating of
    it waits to settle (either may yet route a read to this reader). One query."""
    since = connection.ops.adapt_datetimefield_value(now - timedelta(seconds=quiet_seconds()))
    quote = connection.ops.quote_name
    statement = _BUSY.format(
        queues=quote(ReaderQueue._meta.db_table),
        annotations=quote(Annotation._meta.db_table),
        examples=quote(Example._meta.db_table),
    )
    with connection.cursor() as cursor:
        cursor.execute(statement, [study.pk, task, since, reader_pk, task, study.pk, reader_pk])
        (busy,) = cursor.fetchone()
    return not busy


# Whether a colleague is reading the study's task or has a rating of it waiting to settle, by hand:
# every request for a next item that finds an empty queue with a reserve asks it.
_BUSY = """SELECT EXISTS(SELECT 1 FROM {queues} q
   WHERE q.study_id = %s AND q.task = %s AND q.open_count > 0 AND q.last_rated_at > %s AND q.reader_id <> %s)
 OR EXISTS(SELECT 1 FROM {annotations} a JOIN {examples} e ON e.id = a.example_id
   WHERE a.settled_at IS NULL AND a.task = %s AND e.study_id = %s AND a.reader_id <> %s)"""


def quiet_seconds() -> int:
    return settings.READINGROOM_RESERVE_QUIET_SECONDS


def next_assignment(
    reader: AbstractBaseUser, *, task: str, study_id: int | None = None, study_slug: str | None = None
) -> Assignment | None:
    """annotation.reading.next_assignment, after releasing a read from the reserve when the queue is
    empty and the study quiet. One query when an item waits."""
    found = reading.next_assignment(reader, task=task, study_id=study_id, study_slug=study_slug)
    if found is None and release_when_quiet(reader, task=task, study_id=study_id, study_slug=study_slug):
        found = reading.next_assignment(reader, task=task, study_id=study_id, study_slug=study_slug)
    return found


def next_assignment_id(reader: AbstractBaseUser, *, task: str, study_id: int) -> uuid.UUID | None:
    """annotation.reading.next_assignment_id, after a release as next_assignment makes: the public id of
    the item next_assignment would give. One query when an item waits."""
    found = reading.next_assignment_id(reader, task=task, study_id=study_id)
    if found is None and release_when_quiet(reader, task=task, study_id=study_id):
        found = reading.next_assignment_id(reader, task=task, study_id=study_id)
    return found
