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
from consensus.services import create_routed_assignment, lock_example, route_unrouted, withdraw_open_assignment


class QueueRefused(Exception):
    """A queue change that the protocol or the study's settings do not allow."""


@dataclass
class AssignReport:
    assigned: int = 0
    unfilled: int = 0
    notes: list[str] = field(default_factory=list)

    @property
    def summary(self) -> str:
        text = f"Assigned {self.assigned} reads."
        if self.unfilled:
            text += f" {self.unfilled} reads could not be assigned."
        return text

    def as_dict(self) -> dict:
        return {"assigned": self.assigned, "unfilled": self.unfilled, "summary": self.summary, "notes": self.notes}


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
    assignment row of any status), and, if the study keeps versions apart, never a Task 1
    example whose other version they have or had. Loads and caps count open and done initial
    reads. Each reader's queue is shuffled from the study seed. Refuses, changing nothing, if the
    reader pool is too small. actor is recorded in the audit rows (None: run from the shell).

    Works through the examples chunk by chunk, in a seeded order that keeps a pair's two Task 1
    versions together: memory stays flat in study size. progress(done, total) counts examples.
    """
    tasks = tasks or [Task.REALISM, Task.EQUIVALENCE]
    with transaction.atomic(), queues.counting():
        study = Study.objects.select_for_update().get(pk=study.pk)
        members = list(StudyMember.objects.able(study, MemberRole.READER).values_list("user_id", "max_assignments"))
        if len(members) < 2:
            raise QueueRefused(
                f"Study {study.slug} has {len(members)} active reader(s); every example needs 2 distinct readers. "
                "Add readers to the study first."
            )
        if Task.REALISM in tasks and study.keep_versions_apart and len(members) < 4:
            raise QueueRefused(
                f"Keeping the two Task 1 versions of a pair apart needs at least 4 readers; study {study.slug} has "
                f"{len(members)}. Add readers, or turn off 'keep versions apart' for this study. Nothing was assigned."
            )
        pool = _ReaderPool(study, members)
        order = _AssignmentOrder(study, tasks)
        writer = _AssignmentWriter(study, actor)
        report = AssignReport()
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
                "not read the example or its other version). Add readers or raise caps, then assign again."
            )
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
        overall, then by a tie-break seeded per example and reader. None if nobody is eligible."""
        task_load, total, caps = self.by_task[task], self.total, self.caps
        lowest: tuple[int, int] | None = None
        tied: list[int] = []
        for i, user_id in enumerate(self.ids):
            if user_id in excluded or (caps[i] is not None and total[i] >= caps[i]):
                continue
            load = (task_load[i], total[i])
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


class _AssignmentOrder:
    """The study's waiting examples in the seeded order in which they are filled.

    The two Task 1 versions of a pair share one sort key, so they are filled one right after
    the other: their four reads go to the four least-loaded readers. (Filled at different times,
    the second version may find only busier readers left, its first version's readers being
    kept apart, and the counts drift by 2 or more.) Holds two arrays of ints, not the rows.
    """

    def __init__(self, study: Study, tasks: list[str]) -> None:
        sort_key = _SeededHash(study.seed, "assign-order")
        # Whether a reader has or had the example (or, in Task 1, the pair's other version): asked
        # once, before anything is written, so that the chunks need not look up the rest.
        own_rows = Assignment.objects.filter(example_id=OuterRef("pk"))
        pair_rows = Assignment.objects.filter(example__pair_id=OuterRef("pair_id"), task=Task.REALISM)
        examples = (
            Example.objects.filter(study=study, task__in=tasks, state=ExampleState.WAITING)
            .annotate(own_rows=Exists(own_rows), pair_rows=Exists(pair_rows))
            .values_list("pk", "pair_id", "task", "public_id", "own_rows", "pair_rows")
            .order_by("pk")
        )
        keys, pks, history = array("Q"), array("q"), bytearray()
        for pk, pair_pk, task, public_id, own, pair in examples.iterator(chunk_size=BATCH_SIZE * 10):
            realism = task == Task.REALISM
            keys.append(sort_key(f"pair-{pair_pk}" if realism else public_id))
            pks.append(pk)
            history.append(own or (realism and pair))
        self.keys, self.pks, self.history, self.total = keys, pks, history, len(pks)

    def chunks(self) -> Iterator[tuple[list[tuple[int, int, int, str, uuid.UUID]], set[int]]]:
        """Chunks of about ASSIGN_CHUNK examples, each (sort key, pk, pair pk, task, public id), in
        order, with the pairs whose earlier assignments matter to them (usually none).

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
            rows = Example.objects.filter(pk__in=list(key_of)).values_list("pk", "pair_id", "task", "public_id")
            # Versions that share a key go in the order of their public ids.
            chunk = sorted(((key_of[pk], pk, *rest) for pk, *rest in rows), key=lambda e: (e[0], e[4]))
            yield chunk, {pair_pk for _, pk, pair_pk, _, _ in chunk if pk in with_history}
            start = end


def _assign_chunk(
    study: Study,
    chunk: list[tuple[int, int, int, str, uuid.UUID]],
    pairs_with_history: set[int],
    pool: _ReaderPool,
    writer: "_AssignmentWriter",
) -> int:
    """Fill the free initial slots of one chunk's examples; return the number of reads left unfilled."""
    seen: dict[int, set[int]] = defaultdict(set)  # example -> every reader it has or had
    free: dict[int, list[int]] = {pk: [1, 2] for _, pk, _, _, _ in chunk}
    pair_seen: dict[int, set[int]] = defaultdict(set)  # pair -> every reader of its Task 1 examples
    existing = Assignment.objects.filter(example__pair_id__in=pairs_with_history)
    for example_pk, pair_pk, task, reader_pk, slot, status in (
        existing.values_list("example_id", "example__pair_id", "task", "reader_id", "slot", "status").order_by()
        if pairs_with_history
        else ()
    ):
        seen[example_pk].add(reader_pk)
        if task == Task.REALISM:
            pair_seen[pair_pk].add(reader_pk)
        if status in SLOT_HOLDING_STATUSES and example_pk in free and slot in free[example_pk]:
            free[example_pk].remove(slot)

    unfilled = 0
    new: list[tuple[int, str, int, int, int]] = []
    for _, example_pk, pair_pk, task, public_id in chunk:
        keep_apart = study.keep_versions_apart and task == Task.REALISM
        for slot in free[example_pk]:
            excluded = seen[example_pk] | pair_seen[pair_pk] if keep_apart else seen[example_pk]
            reader_pk = pool.take(task, public_id, excluded)
            if reader_pk is None:
                unfilled += 1
                continue
            new.append((reader_pk, task, pool.queue_order(reader_pk, public_id), example_pk, slot))
            seen[example_pk].add(reader_pk)
            if task == Task.REALISM:
                pair_seen[pair_pk].add(reader_pk)
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
    )
    AUDIT_FIELDS = ("created_at", "study", "action", "actor", "example", "subject", "before", "after")

    def __init__(self, study: Study, actor: AbstractBaseUser | None) -> None:
        self.study_pk = study.pk
        self.actor_pk = actor.pk if actor is not None and actor.is_authenticated else None
        self.now = Assignment._meta.get_field("created_at").get_db_prep_value(timezone.now(), connection)
        self.empty = AuditEvent._meta.get_field("before").get_db_prep_value({}, connection)
        self.written = 0

    def write(self, new: list[tuple[int, str, int, int, int]]) -> None:
        """new: (reader pk, task, queue order, example pk, slot) per assignment, in storage order."""
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
                )
                for public_id, (reader_pk, task, queue_order, example_pk, slot) in zip(public_ids, new, strict=True)
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
                for public_id, (reader_pk, _, _, example_pk, slot) in zip(public_ids, new, strict=True)
            ),
        )
        # Written past Assignment.save(): count the new open items in their readers' queues here.
        queues.count_opened(Counter((reader_pk, self.study_pk, task) for reader_pk, task, *_ in new))
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


def _check_versions_apart(example: Example, user: AbstractBaseUser) -> None:
    # The same rule as routing (consensus.services.eligible_readers): any assignment of the other
    # version counts, voided or withdrawn after being shown included.
    if not (example.study.keep_versions_apart and example.task == Task.REALISM):
        return
    sibling = Assignment.objects.filter(
        reader=user, example__pair_id=example.pair_id, example__task=Task.REALISM
    ).exclude(example=example)
    if sibling.exists():
        raise QueueRefused(
            f"{user.get_username()} has or had the other version of this pair, and the study keeps the two "
            "versions apart. Choose another reader."
        )


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
        _check_versions_apart(example, reader)
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
