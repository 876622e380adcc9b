"""What a coordinator sees: read-only questions about a study's progress, people and history.

Every function here asks the database a fixed number of questions whatever the size of the
study (the tests hold the pages and the API to it): counts are aggregated in the database with
one grouped query, related rows come with select_related. Nothing here writes.

Coordinators are not blinded: these results name readers and say which report is the original.
Never show them to readers or adjudicators. A coordinator who also reads in the study gets the
rows of the pairs they still have to rate masked (consensus.conflicts): the lists that name a
pair take the viewer and set row.hidden.
"""

from dataclasses import dataclass, field

from django.contrib.auth import get_user_model
from django.contrib.auth.models import AbstractBaseUser
from django.core.paginator import Paginator
from django.db import models
from django.db.models import Count, Exists, OuterRef, Q, QuerySet

from annotation.models import (
    ACTIVE_ASSIGNMENT,
    Annotation,
    Assignment,
    AssignmentStatus,
    AuditEvent,
    Example,
    ExampleState,
    MemberRole,
    ReportType,
    Study,
    StudyMember,
    Task,
)
from annotation.roles import enrolment_warning, roles_by_user, user_roles
from consensus import blinding
from consensus.conflicts import hidden_pair_ids, mark_hidden
from consensus.models import Adjudication, AdjudicationStatus, ConsensusLabel

TASK_ORDER = list(Task.values)


def _state_counts() -> dict[str, Count]:
    counts = {state: Count("pk", filter=Q(state=state)) for state in ExampleState.values}
    counts["unrouted"] = Count("pk", filter=Q(unrouted=True))
    # A rating in its reader's undo window does not count yet (routing waits for it to settle).
    unsettled = Annotation.objects.filter(example=OuterRef("pk"), settled_at__isnull=True, voided_at__isnull=True)
    counts["settling"] = Count("pk", filter=Exists(unsettled))
    return counts


# --- Progress per task and variation ------------------------------------------------------------


@dataclass(kw_only=True)
class ProgressRow:
    """Examples by state in one (task, variation) cell, or summed over a task or the study."""

    variation: str = ""
    variation_label: str = ""
    dimension: str = ""
    waiting: int = 0
    third_read: int = 0
    adjudication: int = 0
    consensus: int = 0
    unrouted: int = 0
    settling: int = 0  # of these, with a rating still in its reader's undo window

    @property
    def total(self) -> int:
        return self.waiting + self.third_read + self.adjudication + self.consensus

    @property
    def percent_done(self) -> int:
        """Share of examples with a consensus label, rounded down (100 only when all have one)."""
        return self.consensus * 100 // self.total if self.total else 0

    @property
    def cells(self) -> list[tuple[str, str, int]]:
        """(state filter, column name, count) of the table's columns, in order: the four states,
        then unrouted. The column name makes each count's link name say what it counts."""
        return [
            *((state, state.label, getattr(self, state.value)) for state in ExampleState),
            ("unrouted", "Unrouted", self.unrouted),
        ]

    def add(self, other: "ProgressRow") -> None:
        for name in ("waiting", "third_read", "adjudication", "consensus", "unrouted", "settling"):
            setattr(self, name, getattr(self, name) + getattr(other, name))


@dataclass(kw_only=True)
class TaskProgress:
    task: str
    variations: list[ProgressRow] = field(default_factory=list)
    total: ProgressRow = field(default_factory=ProgressRow)

    @property
    def label(self) -> str:
        return Task(self.task).label


@dataclass(kw_only=True)
class StudyProgress:
    tasks: list[TaskProgress]
    overall: ProgressRow

    @property
    def unrouted(self) -> int:
        return self.overall.unrouted


def study_progress(study: Study) -> StudyProgress:
    """Examples by state (and how many wait for an eligible person) per task and variation.

    Two queries. Only (task, variation) cells that hold examples are listed.
    """
    cells = (
        Example.objects.filter(study=study).values("task", "pair__variation_id").annotate(**_state_counts()).order_by()
    )
    variations = {v.pk: v for v in study.variations.all()}
    by_task: dict[str, TaskProgress] = {}
    overall = ProgressRow()
    for cell in cells:
        variation = variations[cell["pair__variation_id"]]
        row = ProgressRow(
            variation=variation.key,
            variation_label=variation.label,
            dimension=variation.dimension,
            waiting=cell[ExampleState.WAITING],
            third_read=cell[ExampleState.THIRD_READ],
            adjudication=cell[ExampleState.ADJUDICATION],
            consensus=cell[ExampleState.CONSENSUS],
            unrouted=cell["unrouted"],
            settling=cell["settling"],
        )
        task = by_task.setdefault(cell["task"], TaskProgress(task=cell["task"]))
        task.variations.append(row)
        task.total.add(row)
        overall.add(row)
    positions = {v.key: (v.position, v.key) for v in variations.values()}
    for task in by_task.values():
        task.variations.sort(key=lambda row: positions[row.variation])
    tasks = sorted(by_task.values(), key=lambda t: TASK_ORDER.index(t.task))
    return StudyProgress(tasks=tasks, overall=overall)


@dataclass(frozen=True)
class Unassigned:
    """Examples that nobody was ever given (no open or rated read), and the readers who could be."""

    examples: int
    active_readers: int
    needed: blinding.ReadersNeeded

    @property
    def readers_needed(self) -> int:
        return self.needed.initial

    @property
    def too_few_readers(self) -> bool:
        return self.active_readers < self.readers_needed

    @property
    def too_few_for_third_reads(self) -> bool:
        return self.active_readers < self.needed.with_third_reads


def unassigned_examples(study: Study) -> Unassigned:
    """Examples waiting for initial reads that have no reader at all, e.g. before any assignment.

    Not the same as unrouted: routing never ran for them. Three queries (four when many exams set
    the readers needed).
    """
    examples = (
        Example.objects.filter(study=study, state=ExampleState.WAITING)
        .exclude(assignments__status__in=[AssignmentStatus.OPEN, AssignmentStatus.DONE])
        .count()
    )
    readers = StudyMember.objects.filter(study=study, role=MemberRole.READER, active=True).count()
    return Unassigned(examples=examples, active_readers=readers, needed=blinding.readers_needed(study))


# --- Workload per member --------------------------------------------------------------------------


@dataclass(kw_only=True)
class TaskLoad:
    task: str
    open: int = 0
    done: int = 0

    @property
    def assigned(self) -> int:
        return self.open + self.done


@dataclass(kw_only=True)
class MemberWorkload:
    """One person enrolled in a study (as reader, adjudicator or both) and their work in it."""

    user: AbstractBaseUser
    subspecialty: str = ""
    roles: list[str] = field(default_factory=list)
    inactive_roles: list[str] = field(default_factory=list)
    max_assignments: int | None = None
    initial_reads: int = 0
    tasks: list[TaskLoad] = field(default_factory=list)
    voided: int = 0
    adjudications_open: int = 0
    adjudications_done: int = 0
    warning: str = ""

    @property
    def username(self) -> str:
        return self.user.get_username()

    @property
    def full_name(self) -> str:
        return self.user.get_full_name()

    @property
    def open(self) -> int:
        return sum(t.open for t in self.tasks) + self.adjudications_open

    @property
    def done(self) -> int:
        return sum(t.done for t in self.tasks) + self.adjudications_done

    @property
    def assigned(self) -> int:
        return self.open + self.done

    @property
    def percent_done(self) -> int:
        return self.done * 100 // self.assigned if self.assigned else 0


def study_workload(study: Study) -> list[MemberWorkload]:
    """Every member of the study with open and rated work per task, voided ratings and adjudications.

    initial_reads counts active reads in slots 1 and 2: what the member's cap (max_assignments)
    limits; warning is the conflict-of-interest warning of a member who also coordinates or
    manages data. Five queries.
    """
    members = (
        StudyMember.objects.filter(study=study)
        .select_related("user", "user__reader_profile")
        .order_by("user__username", "role")
    )
    rows: dict[int, MemberWorkload] = {}
    for member in members:
        row = rows.get(member.user_id)
        if row is None:
            profile = getattr(member.user, "reader_profile", None)
            row = rows[member.user_id] = MemberWorkload(
                user=member.user,
                subspecialty=profile.get_subspecialty_display() if profile else "",
                tasks=[TaskLoad(task=task) for task in TASK_ORDER],
            )
        (row.roles if member.active else row.inactive_roles).append(member.role)
        if member.role == MemberRole.READER:
            row.max_assignments = member.max_assignments
    roles = roles_by_user(row.user for row in rows.values())
    for user_id, row in rows.items():
        row.warning = enrolment_warning(row.username, roles[user_id])

    assignments = (
        Assignment.objects.filter(example__study=study, reader_id__in=list(rows))
        .values("reader_id", "example__task")
        .annotate(
            open=Count("pk", filter=Q(status=AssignmentStatus.OPEN)),
            done=Count("pk", filter=Q(status=AssignmentStatus.DONE)),
            voided=Count("pk", filter=Q(status=AssignmentStatus.VOIDED)),
            initial=Count("pk", filter=ACTIVE_ASSIGNMENT & Q(slot__in=[1, 2])),
        )
        .order_by()
    )
    for counts in assignments:
        row = rows[counts["reader_id"]]
        load = row.tasks[TASK_ORDER.index(counts["example__task"])]
        load.open, load.done = counts["open"], counts["done"]
        row.voided += counts["voided"]
        row.initial_reads += counts["initial"]

    adjudications = (
        Adjudication.objects.filter(example__study=study, adjudicator_id__in=list(rows))
        .values("adjudicator_id")
        .annotate(
            open=Count("pk", filter=Q(status=AdjudicationStatus.OPEN)),
            done=Count("pk", filter=Q(status=AdjudicationStatus.DONE)),
        )
        .order_by()
    )
    for counts in adjudications:
        row = rows[counts["adjudicator_id"]]
        row.adjudications_open, row.adjudications_done = counts["open"], counts["done"]
    return list(rows.values())


def reader_choices(study: Study) -> QuerySet:
    """Users who may be given reads in the study by hand: its active reader members."""
    return (
        get_user_model()
        .objects.filter(
            study_memberships__study=study,
            study_memberships__role=MemberRole.READER,
            study_memberships__active=True,
            is_active=True,
        )
        .order_by(get_user_model().USERNAME_FIELD)
    )


# --- Examples waiting for an eligible person ------------------------------------------------------


class WaitingFor(models.TextChoices):
    READER = "reader", "a reader"
    THIRD_READER = "third_reader", "a third reader"
    ADJUDICATOR = "adjudicator", "an adjudicator"


def waiting_for(example: Example) -> str:
    """Whom an unrouted example waits for (a WaitingFor value), from its state; "" if it waits for nobody."""
    if not example.unrouted:
        return ""
    if example.state == ExampleState.ADJUDICATION:
        return WaitingFor.ADJUDICATOR
    if example.state == ExampleState.THIRD_READ:
        return WaitingFor.THIRD_READER
    # A void left initial reads to refill and no reader was eligible.
    return WaitingFor.READER


def unrouted_examples(study: Study, viewer: AbstractBaseUser) -> list[Example]:
    """Examples that need a third reader, an adjudicator or a reader and found nobody eligible.

    Each carries n_ratings (settled ratings not voided), waiting_for (a WaitingFor) and hidden (its pair
    is hidden from viewer). Two queries.
    """
    examples = list(
        Example.objects.filter(study=study, unrouted=True)
        .select_related("pair__dataset", "pair__variation")
        .annotate(
            n_ratings=Count(
                "annotations",
                filter=Q(annotations__voided_at__isnull=True, annotations__settled_at__isnull=False),
            )
        )
        .order_by("task", "pair__dataset__key", "pair__variation__position", "pair__source_study_id", "report_type")
    )
    for example in examples:
        example.waiting_for = waiting_for(example)
    return mark_hidden(examples, hidden_pair_ids(viewer, study), "pair_id")


# --- One example ------------------------------------------------------------------------------------


@dataclass(frozen=True)
class ReportText:
    report_type: str
    findings: str
    impression: str

    @property
    def label(self) -> str:
        return ReportType(self.report_type).label


@dataclass(kw_only=True)
class ExampleDetail:
    example: Example
    assignments: list[Assignment]
    annotations: list[Annotation]
    adjudications: list[Adjudication]
    consensus: ConsensusLabel | None
    history: list[AuditEvent]

    @property
    def reports(self) -> list[ReportText]:
        """The report(s) the readers rate: one for Task 1, both for Task 2."""
        pair = self.example.pair
        types = [self.example.report_type] if self.example.report_type else list(ReportType.values)
        return [ReportText(t, *pair.report(t)) for t in types]

    @property
    def waiting_for(self) -> str:
        return waiting_for(self.example)

    @property
    def waiting_for_label(self) -> str:
        return WaitingFor(self.waiting_for).label if self.waiting_for else ""


def study_examples(study: Study) -> QuerySet:
    """The study's examples with what example_detail() reads of them; look one up by public_id."""
    return Example.objects.filter(study=study).select_related("pair__dataset", "pair__variation", "consensus")


def example_detail(example: Example) -> ExampleDetail:
    """Everything about one example, voided ratings included, and its audit history.

    Expects an example from study_examples(); four more queries.
    """
    try:
        consensus = example.consensus
    except ConsensusLabel.DoesNotExist:
        consensus = None
    return ExampleDetail(
        example=example,
        assignments=list(
            example.assignments.select_related("reader", "annotation").order_by("slot", "created_at", "pk")
        ),
        annotations=list(example.annotations.select_related("reader", "voided_by", "assignment").order_by("pk")),
        adjudications=list(example.adjudications.select_related("adjudicator").order_by("pk")),
        consensus=consensus,
        history=list(example.audit_events.select_related("actor", "subject").order_by("created_at", "pk")),
    )


# --- One reader -------------------------------------------------------------------------------------


@dataclass(kw_only=True)
class ReaderDetail:
    user: AbstractBaseUser
    memberships: list[StudyMember]
    assignments: list[Assignment]
    adjudications: list[Adjudication]
    history: list[AuditEvent]
    warning: str = ""
    pages: dict = field(default_factory=dict)

    @property
    def subspecialty(self) -> str:
        profile = getattr(self.user, "reader_profile", None)
        return profile.get_subspecialty_display() if profile else ""


def study_members(study: Study) -> QuerySet:
    """Users enrolled in the study in any role (active or not); look one up by username."""
    user_model = get_user_model()
    return user_model.objects.filter(pk__in=StudyMember.objects.filter(study=study).values("user_id")).select_related(
        "reader_profile"
    )


def reader_detail(
    study: Study,
    user: AbstractBaseUser,
    viewer: AbstractBaseUser,
    *,
    per_page: int | None = None,
    assignments_page: str | int | None = None,
    history_page: str | int | None = None,
) -> ReaderDetail:
    """One member's memberships, assignments and adjudications in the study, and the audit events
    that concern them (subject = them, whoever the actor). Assignments, adjudications and events
    of pairs hidden from viewer are marked hidden; warning is the member's conflict-of-interest
    warning. Six queries, and two counts with per_page: then the assignments and the history are
    one page each (detail.pages["assignments"], detail.pages["history"] are the Django Pages)."""
    examples = ("example__pair__dataset", "example__pair__variation")
    assignments = (
        Assignment.objects.filter(example__study=study, reader=user)
        .select_related(*examples, "reader", "annotation")
        .order_by("example__task", "created_at", "pk")
    )
    history = (
        AuditEvent.objects.filter(study=study, subject=user)
        .select_related("actor", "subject", "example__pair__variation")
        .order_by("created_at", "pk")
    )
    pages = {}
    if per_page:
        pages["assignments"] = Paginator(assignments, per_page).get_page(assignments_page)
        pages["history"] = Paginator(history, per_page).get_page(history_page)
    detail = ReaderDetail(
        user=user,
        memberships=list(StudyMember.objects.filter(study=study, user=user).order_by("role")),
        assignments=list(pages["assignments"].object_list if pages else assignments),
        adjudications=list(
            Adjudication.objects.filter(example__study=study, adjudicator=user)
            .select_related(*examples, "adjudicator")
            .order_by("created_at", "pk")
        ),
        history=list(pages["history"].object_list if pages else history),
        warning=enrolment_warning(user.get_username(), user_roles(user)),
        pages=pages,
    )
    hidden = hidden_pair_ids(viewer, study)
    for rows in (detail.assignments, detail.adjudications, detail.history):
        mark_hidden(rows, hidden)
    return detail


# --- Examples of a progress cell ----------------------------------------------------------------

EXAMPLE_FILTER_STATES = [*ExampleState.values, "unrouted"]


def filtered_examples(study: Study, *, task: str = "", variation: str = "", state: str = "") -> QuerySet:
    """The examples a progress cell counts: of a task, a variation and a state (or unrouted), each optional.

    Unknown filter values match nothing rather than everything.
    """
    examples = Example.objects.filter(study=study).select_related("pair__dataset", "pair__variation")
    if task:
        examples = examples.filter(task=task)
    if variation:
        examples = examples.filter(pair__variation__key=variation)
    if state == "unrouted":
        examples = examples.filter(unrouted=True)
    elif state:
        examples = examples.filter(state=state)
    return examples.order_by(
        "task", "pair__variation__position", "pair__dataset__key", "pair__source_study_id", "report_type", "pk"
    )
