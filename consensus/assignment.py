"""Reading queues: building them, and putting examples in and out of them by hand.

Automatic assignment of the initial reads (assign_readers), assignment, withdrawal and
reassignment by hand, and enrolling readers and adjudicators, which routes the examples that
were waiting for someone. They follow the same eligibility rules as routing
(consensus.services), and write under the same locks.
"""

import hashlib
import uuid
from array import array
from collections import Counter, defaultdict
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field

from django.contrib.auth.models import AbstractBaseUser
from django.db import connection, models, transaction
from django.db.models import Count, Exists, OuterRef
from django.utils import timezone

from annotation import queues
from annotation.models import (
    Assignment,
    AssignmentStatus,
    AuditAction,
    AuditEvent,
    CandidatePair,
    Example,
    ExampleState,
    MemberRole,
    Role,
    Study,
    StudyMember,
    Task,
)
from annotation.roles import has_role
from annotation.services import BATCH_SIZE, Progress
from consensus import blinding, reserve
from consensus.services import create_routed_assignment, lock_example, route_unrouted, withdraw_open_assignment


class QueueRefused(Exception):
    """A queue change that the protocol or the study's settings do not allow."""


@dataclass
class AssignReport:
    assigned: int = 0
    unfilled: int = 0
    notes: list[str] = field(default_factory=list)
    readers: str = ""  # what the study's exams need, said before the work (consensus.blinding)

    @property
    def summary(self) -> str:
        text = f"Assigned {self.assigned} reads."
        if self.unfilled:
            text += f" {self.unfilled} reads could not be assigned."
        return text

    def as_dict(self) -> dict:
        return {
            "assigned": self.assigned,
            "unfilled": self.unfilled,
            "summary": self.summary,
            "notes": self.notes,
            "readers": self.readers,
        }


def assign_readers(
    study: Study,
    *,
    actor: AbstractBaseUser | None,
    tasks: list[str] | None = None,
    progress: Progress | None = None,
) -> AssignReport:
    """Give every sampled example that still needs initial reads distinct readers, load balanced.

    Readers get the examples' free initial slots in turn, least loaded first (per task, so with
    equal caps the counts differ by at most one), never an example they have or had (an
    assignment row of any status), nor one that conflicts with it (the same report text; keeping
    versions apart, the same exam: consensus.blinding). Loads and caps count open and done initial
    reads. Each reader's queue is shuffled from the study seed. Refuses, changing nothing, if the
    reader pool is smaller than the exam with the most items needs. actor is recorded in the audit
    rows (None: run from the shell).

    Works through the examples chunk by chunk, in a seeded order that keeps the examples of an exam
    together: memory stays flat in study size. progress(done, total) counts examples.
    """
    tasks = tasks or [Task.REALISM, Task.EQUIVALENCE]
    with transaction.atomic(), queues.counting():
        # NO KEY UPDATE: assignment runs (and sampling) exclude each other, but a reader's submit, which
        # writes rows that refer to the study, never waits for it while holding its exam's rows.
        study = Study.objects.select_for_update(no_key=True).get(pk=study.pk)
        members = list(StudyMember.objects.able(study, MemberRole.READER).values_list("user_id", "max_assignments"))
        if len(members) < 2:
            raise QueueRefused(
                f"Study {study.slug} has {len(members)} active reader(s); every example needs 2 distinct readers. "
                "Add readers to the study first."
            )
        needed = blinding.readers_needed(study, tasks)
        if len(members) < needed.initial:
            raise QueueRefused(
                f"Study {study.slug} has {len(members)} active readers and needs at least {needed.initial}. "
                f"{needed.explanation} Add readers"
                + (
                    ", sample at most one pair per exam, or turn off 'keep versions apart' for this study"
                    if study.keep_versions_apart
                    else ", or sample at most one pair per exam"
                )
                + ". Nothing was assigned."
            )
        if connection.vendor == "postgresql":
            # Routing (a third read, a refill) decides what a reader may have of an exam under the
            # exam's row locks (consensus.services.lock_example). Taking the study's example rows
            # here, in one statement in primary-key order as lock_example does, makes the two wait
            # for each other instead of both giving one reader two items of an exam. (SQLite runs
            # one writing transaction at a time.)
            locked = Example.objects.filter(study=study).select_for_update(of=("self",), no_key=True)
            for _ in locked.order_by("pk").values_list("pk", flat=True).iterator(chunk_size=BATCH_SIZE * 10):
                pass
        pool = _ReaderPool(study, members)
        order = _AssignmentOrder(study, tasks)
        writer = _AssignmentWriter(study, actor)
        report = AssignReport(
            readers=f"This study needs at least {needed.initial} active readers, {needed.with_third_reads} to give "
            f"every third read; it has {len(members)}. {needed.explanation}"
        )
        done = 0
        if progress:
            progress(0, order.total)
        for chunk, pairs_with_history in order.chunks():
            report.unfilled += _assign_chunk(study, chunk, pairs_with_history, pool, writer)
            done += len(chunk)
            if progress:
                progress(done, order.total)
        report.assigned = writer.written
        if report.unfilled:
            report.notes.append(
                f"{report.unfilled} reads found no eligible reader (caps reached, or too few readers who have "
                "not read the example or another item it is kept apart from). Add readers or raise caps, then "
                "assign again."
            )
    if study.reserve_percent:
        # Nobody starts with everything in their reserve (the counters are written now).
        with transaction.atomic(), queues.counting():
            reserve.open_empty_queues(study)
    return report


# An assignment in one of these holds its slot and counts in its reader's load. Any other status
# (voided, or one added later) frees the slot, but its reader still counts as having seen the example.
SLOT_HOLDING_STATUSES = (AssignmentStatus.OPEN, AssignmentStatus.DONE)
ASSIGN_CHUNK = 6000  # examples per chunk of assign_readers


class _SeededHash:
    """consensus.services.tiebreak(*parts, last) for many values of last, the shared parts hashed once."""

    def __init__(self, *parts: object) -> None:
        self.prefix = hashlib.sha256((":".join(str(p) for p in parts) + ":").encode())

    def __call__(self, last: object) -> int:
        digest = self.prefix.copy()
        digest.update(str(last).encode())
        return int.from_bytes(digest.digest()[:8], "big") >> 1


class _ReaderPool:
    """The study's able readers and their initial-read loads, as a few lists of ints."""

    def __init__(self, study: Study, members: list[tuple[int, int | None]]) -> None:
        self.seed = study.seed
        self.ids = [user_id for user_id, _ in members]
        self.caps = [cap for _, cap in members]
        self.total = [0] * len(members)
        self.by_task = {task: [0] * len(members) for task in Task.values}
        self.queue_hash = {user_id: _SeededHash(study.seed, "queue", user_id) for user_id in self.ids}
        self.reserve_percent = study.reserve_percent
        self.reserve_hash = {user_id: _SeededHash(study.seed, "reserve", user_id) for user_id in self.ids}
        index = {user_id: i for i, user_id in enumerate(self.ids)}
        loads = (
            Assignment.objects.filter(
                study=study, reader_id__in=self.ids, slot__in=(1, 2), status__in=SLOT_HOLDING_STATUSES
            )
            .values("reader_id", "task")
            .annotate(n=Count("pk"))
            .values_list("reader_id", "task", "n")
            .order_by()
        )
        for reader_id, task, n in loads:
            self.total[index[reader_id]] += n
            self.by_task[task][index[reader_id]] += n

    def take(self, task: str, example_public_id: uuid.UUID, excluded: set[int]) -> int | None:
        """The reader who gets this read, now counted in: the least loaded in this task, then
        overall, then by a tie-break seeded per example and reader. None if nobody is eligible.

        A Task 2 read (filled first of its exam, whose Task 1 items its readers are then kept
        from) goes, among the readers least loaded in Task 2, to those with the most Task 1 reads
        rather than the fewest: the readers behind in Task 1 stay free for the exam's Task 1 items,
        and both tasks stay balanced.
        """
        task_load, total, caps = self.by_task[task], self.total, self.caps
        other = self.by_task[Task.REALISM] if task == Task.EQUIVALENCE else None
        lowest: tuple[int, int] | None = None
        tied: list[int] = []
        for i, user_id in enumerate(self.ids):
            if user_id in excluded or (caps[i] is not None and total[i] >= caps[i]):
                continue
            load = (task_load[i], -other[i]) if other is not None else (task_load[i], total[i])
            if lowest is None or load < lowest:
                lowest, tied = load, [i]
            elif load == lowest:
                tied.append(i)
        if not tied:
            return None
        if len(tied) == 1:
            chosen = tied[0]
        else:
            tiebreak = _SeededHash(self.seed, "assign", example_public_id)
            chosen = min(tied, key=lambda i: tiebreak(self.ids[i]))
        task_load[chosen] += 1
        total[chosen] += 1
        return self.ids[chosen]

    def queue_order(self, reader_pk: int, example_public_id: uuid.UUID) -> int:
        """Where the example goes in the reader's queue: a shuffle seeded by the study, as for every queue."""
        return self.queue_hash[reader_pk](example_public_id)

    def holds(self, reader_pk: int, example_public_id: uuid.UUID) -> bool:
        """Whether the read goes to the reader's reserve (consensus.reserve): a seeded draw per read,
        true for about the study's reserve_percent of them."""
        return (
            bool(self.reserve_percent) and self.reserve_hash[reader_pk](example_public_id) % 100 < self.reserve_percent
        )


ChunkRow = tuple[int, int, int, str, str, tuple[int, str], uuid.UUID]
# (sort key, pk, pair pk, task, report type, exam, public id)


class _AssignmentOrder:
    """The study's waiting examples in the seeded order in which they are filled.

    The examples of one exam share one sort key, so they are filled one right after the other:
    their reads go to the least-loaded readers. (Filled at different times, a later one may find
    only busier readers left, the exam's first readers being kept apart, and the counts drift by
    2 or more.) Holds two arrays of ints and a bytearray, not the rows.
    """

    def __init__(self, study: Study, tasks: list[str]) -> None:
        sort_key = _SeededHash(study.seed, "assign-order")
        # Whether a reader has or had an example of the same exam: asked once, before anything is
        # written, so that the chunks need not look up the rest.
        exam_rows = Assignment.objects.filter(
            study_id=study.pk,
            example__pair__dataset_id=OuterRef("pair__dataset_id"),
            example__pair__source_study_id=OuterRef("pair__source_study_id"),
        )
        examples = (
            Example.objects.filter(study=study, task__in=tasks, state=ExampleState.WAITING)
            .annotate(exam_rows=Exists(exam_rows))
            .values_list("pk", "pair__dataset_id", "pair__source_study_id", "exam_rows")
            .order_by("pk")
        )
        keys, pks, history = array("Q"), array("q"), bytearray()
        for pk, dataset_pk, study_id, exam_history in examples.iterator(chunk_size=BATCH_SIZE * 10):
            keys.append(sort_key(f"exam-{dataset_pk}-{study_id}"))
            pks.append(pk)
            history.append(exam_history)
        self.keys, self.pks, self.history, self.total = keys, pks, history, len(pks)
        self.study_pk = study.pk

    def chunks(self) -> Iterator[tuple[list[ChunkRow], set[int]]]:
        """Chunks of about ASSIGN_CHUNK examples in order, each row (sort key, pk, pair pk, task,
        report type, exam, public id), with the pairs whose earlier assignments matter to them: every
        pair of an exam that has some (usually none).

        A chunk never splits the examples that share a sort key.
        """
        keys = self.keys
        order = array("q", sorted(range(self.total), key=keys.__getitem__))
        start = 0
        while start < len(order):
            end = min(start + ASSIGN_CHUNK, len(order))
            while end < len(order) and keys[order[end]] == keys[order[end - 1]]:
                end += 1
            key_of = {self.pks[i]: keys[i] for i in order[start:end]}
            with_history = {self.pks[i] for i in order[start:end] if self.history[i]}
            rows = Example.objects.filter(pk__in=list(key_of)).values_list(
                "pk", "pair_id", "task", "report_type", "pair__dataset_id", "pair__source_study_id", "public_id"
            )
            # Within an exam, Task 2 first (it shows both texts: the most constrained, which a
            # greedy fill must place first to need no more readers than readers_needed says), then
            # in the order of the public ids.
            chunk = sorted(
                (
                    (key_of[pk], pk, pair_pk, task, report_type, (dataset_pk, study_id), public_id)
                    for pk, pair_pk, task, report_type, dataset_pk, study_id, public_id in rows
                ),
                key=lambda e: (e[0], e[3] != Task.EQUIVALENCE, e[6]),
            )
            exams = {row[5] for row in chunk if row[1] in with_history}
            yield chunk, _pairs_of_exams(self.study_pk, exams) if exams else set()
            start = end


def _pairs_of_exams(study_pk: int, exams: set[tuple[int, str]]) -> set[int]:
    """Every pair of the study in one of the exams."""
    found = set()
    study_ids = sorted({study_id for _, study_id in exams})
    for start in range(0, len(study_ids), BATCH_SIZE):
        for pair_pk, dataset_pk, study_id in CandidatePair.objects.filter(
            study_id=study_pk, source_study_id__in=study_ids[start : start + BATCH_SIZE]
        ).values_list("pk", "dataset_id", "source_study_id"):
            if (dataset_pk, study_id) in exams:
                found.add(pair_pk)
    return found


def _assign_chunk(
    study: Study,
    chunk: list[ChunkRow],
    pairs_with_history: set[int],
    pool: _ReaderPool,
    writer: "_AssignmentWriter",
) -> int:
    """Fill the free initial slots of one chunk's examples; return the number of reads left unfilled."""
    keep_apart = study.keep_versions_apart
    seen: dict[int, set[int]] = defaultdict(set)  # example -> every reader it has or had
    free: dict[int, list[int]] = {row[1]: [1, 2] for row in chunk}
    key_seen: dict[tuple, set[int]] = defaultdict(set)  # conflict key -> every reader of an example with it
    existing = Assignment.objects.filter(example__pair_id__in=pairs_with_history)
    for example_pk, pair_pk, task, report_type, dataset_pk, study_id, reader_pk, slot, status in (
        existing.values_list(
            "example_id",
            "example__pair_id",
            "task",
            "example__report_type",
            "example__pair__dataset_id",
            "example__pair__source_study_id",
            "reader_id",
            "slot",
            "status",
        ).order_by()
        if pairs_with_history
        else ()
    ):
        seen[example_pk].add(reader_pk)
        for key in blinding.conflict_keys(keep_apart, (dataset_pk, study_id), pair_pk, task, report_type):
            key_seen[key].add(reader_pk)
        if status in SLOT_HOLDING_STATUSES and example_pk in free and slot in free[example_pk]:
            free[example_pk].remove(slot)

    unfilled = 0
    new: list[tuple[int, str, int, int, int, bool]] = []
    for _, example_pk, pair_pk, task, report_type, exam, public_id in chunk:
        keys = blinding.conflict_keys(keep_apart, exam, pair_pk, task, report_type)
        for slot in free[example_pk]:
            excluded = seen[example_pk].union(*(key_seen[key] for key in keys))
            reader_pk = pool.take(task, public_id, excluded)
            if reader_pk is None:
                unfilled += 1
                continue
            queue_order = pool.queue_order(reader_pk, public_id)
            new.append((reader_pk, task, queue_order, example_pk, slot, pool.holds(reader_pk, public_id)))
            seen[example_pk].add(reader_pk)
            for key in keys:
                key_seen[key].add(reader_pk)
    # Stored queue by queue, in reading order: a reader's queue then sits on few table pages,
    # so walking and counting it stays cheap while other readers' ratings change theirs.
    new.sort()
    writer.write(new)
    return unfilled


class _AssignmentWriter:
    """Inserts new open assignments and their 'assigned' audit rows from tuples, not model instances."""

    ASSIGNMENT_FIELDS = (
        "public_id",
        "example",
        "reader",
        "study",
        "task",
        "slot",
        "status",
        "queue_order",
        "created_at",
        "report_a_type",
        "held",
    )
    AUDIT_FIELDS = ("created_at", "study", "action", "actor", "example", "subject", "before", "after")

    def __init__(self, study: Study, actor: AbstractBaseUser | None) -> None:
        self.study_pk = study.pk
        self.actor_pk = actor.pk if actor is not None and actor.is_authenticated else None
        self.now = Assignment._meta.get_field("created_at").get_db_prep_value(timezone.now(), connection)
        self.empty = AuditEvent._meta.get_field("before").get_db_prep_value({}, connection)
        self.written = 0

    def write(self, new: list[tuple[int, str, int, int, int, bool]]) -> None:
        """new: (reader pk, task, queue order, example pk, slot, held) per assignment, in storage order."""
        if not new:
            return
        uuid_value = Assignment._meta.get_field("public_id").get_db_prep_value
        json_value = AuditEvent._meta.get_field("after").get_db_prep_value
        public_ids = [uuid.uuid4() for _ in new]
        _insert_rows(
            Assignment,
            self.ASSIGNMENT_FIELDS,
            (
                (
                    uuid_value(public_id, connection),
                    example_pk,
                    reader_pk,
                    self.study_pk,
                    task,
                    slot,
                    AssignmentStatus.OPEN.value,
                    queue_order,
                    self.now,
                    "",
                    held,
                )
                for public_id, (reader_pk, task, queue_order, example_pk, slot, held) in zip(
                    public_ids, new, strict=True
                )
            ),
        )
        _insert_rows(
            AuditEvent,
            self.AUDIT_FIELDS,
            (
                (
                    self.now,
                    self.study_pk,
                    AuditAction.ASSIGNED.value,
                    self.actor_pk,
                    example_pk,
                    reader_pk,
                    self.empty,
                    json_value({"assignment": str(public_id), "slot": slot, "how": "automatic"}, connection),
                )
                for public_id, (reader_pk, _, _, example_pk, slot, _) in zip(public_ids, new, strict=True)
            ),
        )
        # Written past Assignment.save(): count the new open items in their readers' queues here.
        queues.count_opened(Counter((reader_pk, self.study_pk, task) for reader_pk, task, *_, held in new if not held))
        queues.count_held(Counter((reader_pk, self.study_pk, task) for reader_pk, task, *_, held in new if held))
        self.written += len(new)


def _insert_rows(model: type[models.Model], fields: tuple[str, ...], rows: Iterable[tuple]) -> None:
    """Insert rows of values already prepared for the database (in the order of fields), without
    a model instance per row: COPY on PostgreSQL, executemany elsewhere."""
    quote = connection.ops.quote_name
    table = quote(model._meta.db_table)
    model_fields = [model._meta.get_field(name) for name in fields]
    columns = ", ".join(quote(field.column) for field in model_fields)
    with connection.cursor() as cursor:
        if connection.vendor == "postgresql":
            with cursor.copy(f"COPY {table} ({columns}) FROM STDIN (FORMAT BINARY)") as copy:
                # Binary needs each column's exact type: the one the model gave it ("varchar(16)" -> varchar).
                copy.set_types([field.db_type(connection).split("(")[0] for field in model_fields])
                for row in rows:
                    copy.write_row(row)
        else:
            placeholders = ", ".join(["%s"] * len(fields))
            # The table and columns are the model's own, quoted; the values go as parameters.
            sql = f"INSERT INTO {table} ({columns}) VALUES ({placeholders})"  # noqa: S608
            cursor.executemany(sql, rows)


def _member_reader(study: Study, user: AbstractBaseUser) -> None:
    """The same rule as automatic assignment and routing: an active account, the Reader role, enrolled."""
    if not StudyMember.objects.able(study, MemberRole.READER).filter(user=user).exists():
        raise QueueRefused(
            f"{user.get_username()} is not an active reader of study {study.slug} (enrolled, with the Reader "
            "role and an active account). Add them first."
        )


def _check_blinding(example: Example, user: AbstractBaseUser) -> None:
    # The same rule as routing (consensus.services.eligible_readers): any assignment of a conflicting
    # example counts, voided or withdrawn after being shown included.
    conflicting = Assignment.objects.filter(reader=user, example__in=blinding.conflicting_examples(example))
    if conflicting.exclude(example=example).exists():
        raise QueueRefused(f"{user.get_username()} {blinding.refusal(example.study)}. Choose another reader.")


def assign_example(
    example_id: uuid.UUID, reader: AbstractBaseUser, *, actor: AbstractBaseUser, slot: int | None = None
) -> Assignment:
    """Put one example in one reader's queue by hand, in its first free slot (or the one given)."""
    with transaction.atomic(), queues.counting():
        example_pk = Example.objects.filter(public_id=example_id).values_list("pk", flat=True).first()
        if example_pk is None:
            raise QueueRefused("No such example.")
        example = lock_example(example_pk)
        _member_reader(example.study, reader)
        if Assignment.objects.filter(example=example, reader=reader).exists():
            raise QueueRefused(
                f"{reader.get_username()} already has (or had) this example. A reader never gets it twice."
            )
        _check_blinding(example, reader)
        taken = set(example.assignments.active().values_list("slot", flat=True))
        if example.state == ExampleState.WAITING:
            free = [slot for slot in (1, 2) if slot not in taken]
        elif example.state == ExampleState.THIRD_READ and not example.assignments.open().exists():
            free = [slot for slot in (3, 1, 2) if slot not in taken]
        else:
            free = []
        if not free:
            raise QueueRefused("This example already has all the readers it needs.")
        # Both initial reads missing and one given: the example stays listed for the other.
        still_missing = example.state == ExampleState.WAITING and len(free) > 1
        if slot is not None and slot in free:
            free = [slot]
        assignment = create_routed_assignment(example, reader, free[0])
        if example.unrouted and not still_missing:
            Example.objects.filter(pk=example.pk).update(unrouted=False, unrouted_reason="")
        AuditEvent.objects.record(
            AuditAction.ASSIGNED,
            study=example.study,
            actor=actor,
            example=example,
            subject=reader,
            after={"assignment": str(assignment.public_id), "slot": assignment.slot, "how": "by hand"},
        )
    return assignment


def withdraw_assignment(assignment_id: uuid.UUID, *, actor: AbstractBaseUser) -> Example:
    """Take an unrated assignment out of its reader's queue."""
    with transaction.atomic(), queues.counting():
        found = Assignment.objects.filter(public_id=assignment_id).values_list("example_id", flat=True).first()
        if found is None:
            raise QueueRefused("No such assignment.")
        example = lock_example(found)
        assignment = Assignment.objects.select_related("reader").get(public_id=assignment_id)
        if assignment.status == AssignmentStatus.WITHDRAWN:
            raise QueueRefused("This assignment was already withdrawn.")
        if assignment.status != AssignmentStatus.OPEN:
            raise QueueRefused("This assignment has a rating; it cannot be withdrawn (void the rating instead).")
        withdraw_open_assignment(example, assignment, actor=actor, reason="withdrawn by a coordinator")
        if example.state == ExampleState.THIRD_READ and not example.assignments.open().exists():
            # A needed third read now has nobody: list it for the coordinator.
            reason = "Its third reader was withdrawn by a coordinator. Assign a reader by hand."
            Example.objects.filter(pk=example.pk).update(unrouted=True, unrouted_reason=reason)
            example.unrouted, example.unrouted_reason = True, reason
    return example


def reassign_assignment(assignment_id: uuid.UUID, reader: AbstractBaseUser, *, actor: AbstractBaseUser) -> Assignment:
    """Move an unrated assignment to another reader (same slot), in one transaction."""
    with transaction.atomic(), queues.counting():
        slot = Assignment.objects.filter(public_id=assignment_id).values_list("slot", flat=True).first()
        example = withdraw_assignment(assignment_id, actor=actor)
        return assign_example(example.public_id, reader, actor=actor, slot=slot)


def add_study_member(
    study: Study,
    user: AbstractBaseUser,
    role: str,
    *,
    actor: AbstractBaseUser,
    max_assignments: int | None = None,
) -> StudyMember:
    """Enrol a reader or adjudicator in a study (or re-activate them), then route waiting examples."""
    required = Role.READER if role == MemberRole.READER else Role.ADJUDICATOR
    if not has_role(user, required):
        raise QueueRefused(f"{user.get_username()} does not have the {required.label} role. Give it to them first.")
    with transaction.atomic():
        member, created = StudyMember.objects.get_or_create(
            study=study, user=user, role=role, defaults={"max_assignments": max_assignments}
        )
        before = {} if created else {"active": member.active, "max_assignments": member.max_assignments}
        member.active = True
        member.max_assignments = max_assignments
        member.save(update_fields=["active", "max_assignments"])
        AuditEvent.objects.record(
            AuditAction.MEMBER_ADDED if created else AuditAction.MEMBER_CHANGED,
            study=study,
            actor=actor,
            subject=user,
            before=before,
            after={"role": role, "active": True, "max_assignments": max_assignments},
        )
    route_unrouted(study.pk, actor=actor)
    return member
