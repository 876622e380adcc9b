"""Enrolling automated judges and storing their ratings: never routed, never counted for people.

A judge reads through the reader API (reading.api), which hands a judge's requests to the
functions here: the same blinded payloads as a radiologist's client, built by the same code
(annotation.reading), from the judge's own queue (JudgeRead). Nothing here touches an
assignment, an annotation, a consensus, an example's state or the readers' queue counters.
"""

import uuid
from collections import defaultdict
from dataclasses import dataclass

from django.contrib.auth.models import AbstractBaseUser
from django.db import IntegrityError, transaction
from django.db.models import Case, Count, F, Q, QuerySet, Subquery, Value, When
from django.db.models.functions import Coalesce
from django.utils import timezone

from annotation.models import (
    RATINGS_WITHOUT_RATIONALE,
    RATIONALE_MAX_LENGTH,
    TASK_RATINGS,
    AuditAction,
    AuditEvent,
    Example,
    GuideVersion,
    RatingChoice,
    ReportType,
    Role,
    Study,
    Task,
    tiebreak,
)
from annotation.practice import PendingStep, pending_step
from annotation.roles import has_role
from judges.models import JudgeEnrolment, JudgeRead

# In the audit trail and on every coordinator page: a judge is not a person.
JUDGE_MARK = "automated judge"


class EnrolmentRefused(Exception):
    """The enrolment cannot be made; the message says why and what to do. Nothing was written."""


class JudgeRatingRefused(Exception):
    """A judge's rating cannot be stored. field names the request field at fault, if any."""

    def __init__(self, message: str, *, field: str | None = None) -> None:
        super().__init__(message)
        self.field = field


class JudgeAlreadyRated(JudgeRatingRefused):
    def __init__(self, read: JudgeRead) -> None:
        super().__init__("This example was already rated. Ratings are final and cannot be changed.")
        self.read = read


class JudgeNotShownYet(JudgeRatingRefused):
    def __init__(self) -> None:
        super().__init__("Open the item before rating it.")


class JudgeReadNotFound(Exception):
    """No such read of this judge."""


def is_judge(user: AbstractBaseUser) -> bool:
    return has_role(user, Role.JUDGE)


@dataclass(frozen=True)
class EnrolResult:
    enrolment: JudgeEnrolment
    created: bool
    added: int  # reads put in the judge's queue by this call
    message: str


def select_examples(study: Study, tasks: list[str], per_variation: int | None, seed: int) -> list[Example]:
    """The examples a judge reads: every sampled example of the tasks, or those of N pairs per variation.

    The N pairs of a variation (across datasets) are the first N in the order of a seeded hash of
    each pair's public id: reproducible from the seed and the study's sample, whatever the database order.
    """
    examples = list(
        Example.objects.filter(study=study, task__in=tasks, pair__sampled=True).select_related("pair").order_by("pk")
    )
    if per_variation is None:
        return examples
    pairs_by_variation: dict[int, set] = defaultdict(set)
    for example in examples:
        pairs_by_variation[example.pair.variation_id].add(example.pair.public_id)
    chosen = set()
    for pair_ids in pairs_by_variation.values():
        ranked = sorted(pair_ids, key=lambda public_id: (tiebreak(seed, "judge-subset", public_id), str(public_id)))
        chosen.update(ranked[:per_variation])
    return [example for example in examples if example.pair.public_id in chosen]


def enrol_judge(
    study: Study,
    *,
    judge: AbstractBaseUser,
    tasks: list[str],
    per_variation: int | None = None,
    seed: int | None = None,
    practise: bool | None = None,
    actor: AbstractBaseUser | None = None,
) -> EnrolResult:
    """Enrol an automated judge in a study and put the chosen examples in its queue (one transaction).

    Enrolling it again adds the examples of tasks not chosen before (and of pairs sampled since);
    the subset (per_variation, seed) of an enrolment cannot change. practise: whether the judge
    confirms the study's guide and rates its practice items before its items, as a reader does
    (None: False for a new enrolment, unchanged for an existing one). Audited as a member added.
    """
    tasks = sorted(set(tasks))
    if not tasks or any(task not in Task.values for task in tasks):
        raise EnrolmentRefused(f"tasks: choose {' and/or '.join(Task.values)}.")
    if not is_judge(judge):
        raise EnrolmentRefused(
            f"{judge.get_username()} is not an automated judge. Create one with "
            f"`manage.py create_user <name> --role judge --token`."
        )
    if per_variation is not None and per_variation < 1:
        raise EnrolmentRefused("per_variation: give a number of pairs of at least 1, or leave it out for all.")
    if not Example.objects.filter(study=study).exists():
        raise EnrolmentRefused("The study has no sampled pairs yet. Sample the study first.")
    with transaction.atomic():
        enrolment = JudgeEnrolment.objects.select_for_update().filter(study=study, judge=judge).first()
        created = enrolment is None
        if created:
            enrolment = JudgeEnrolment.objects.create(
                study=study,
                judge=judge,
                realism=Task.REALISM in tasks,
                equivalence=Task.EQUIVALENCE in tasks,
                per_variation=per_variation,
                seed=study.seed if seed is None else seed,
                practise=bool(practise),
                created_by=actor if actor is not None and actor.is_authenticated else None,
            )
        else:
            same_subset = per_variation == enrolment.per_variation and seed in (None, enrolment.seed)
            if not same_subset:
                subset = f"{enrolment.per_variation} pairs per variation, seed {enrolment.seed}"
                raise EnrolmentRefused(
                    f"{judge.get_username()} is already enrolled with "
                    f"{'every sampled pair' if enrolment.per_variation is None else subset}; "
                    "its subset cannot change. Enrol another judge account for another subset."
                )
            enrolment.realism |= Task.REALISM in tasks
            enrolment.equivalence |= Task.EQUIVALENCE in tasks
            if practise is not None:
                enrolment.practise = practise
            enrolment.save(update_fields=["realism", "equivalence", "practise"])
        examples = select_examples(study, enrolment.tasks, enrolment.per_variation, enrolment.seed)
        have = set(JudgeRead.objects.filter(enrolment=enrolment).values_list("example_id", flat=True))
        reads = [
            JudgeRead(
                enrolment=enrolment,
                judge=judge,
                example=example,
                study=study,
                task=example.task,
                queue_order=tiebreak(study.seed, "judge-queue", judge.pk, example.public_id),
            )
            for example in examples
            if example.pk not in have
        ]
        JudgeRead.objects.bulk_create(reads, batch_size=2000)
        AuditEvent.objects.record(
            AuditAction.MEMBER_ADDED if created else AuditAction.MEMBER_CHANGED,
            study=study,
            actor=actor,
            subject=judge,
            after={
                "role": JUDGE_MARK,
                "tasks": enrolment.tasks,
                "per_variation": enrolment.per_variation,
                "seed": enrolment.seed,
                "practise": enrolment.practise,
                "reads_added": len(reads),
            },
        )
    verb = "Enrolled" if created else "Updated"
    message = f"{verb} {judge.get_username()} ({JUDGE_MARK}): {len(reads)} read{'s' if len(reads) != 1 else ''} added."
    return EnrolResult(enrolment, created, len(reads), message)


# --- The judge's side, behind the reader API ------------------------------------------------


def next_judge_read(
    judge: AbstractBaseUser, *, task: str, study_id: int | None = None, study_slug: str | None = None
) -> JudgeRead | None:
    """The judge's first open read of a task (in one study if given), with its example and pair."""
    queue = JudgeRead.objects.open().filter(judge=judge, task=task)
    if study_id is not None:
        queue = queue.filter(study_id=study_id)
    if study_slug is not None:
        queue = queue.filter(study__slug=study_slug)
    first = queue.order_by("study_id", "queue_order", "pk").values("pk")[:1]
    return (
        JudgeRead.objects.select_related("example__pair", "example__study", "enrolment")
        .filter(pk=Subquery(first))
        .first()
    )


def practising_studies(judge: AbstractBaseUser) -> QuerySet[Study]:
    """The studies whose guide and practice round the judge goes through: those it is enrolled in to practise.

    For these, the reader API's guide and practice endpoints answer the judge as they answer a reader.
    """
    return Study.objects.filter(judge_enrolments__judge=judge, judge_enrolments__practise=True)


def judge_pending_step(judge: AbstractBaseUser, read: JudgeRead) -> PendingStep | None:
    """What the judge does before this read, when its enrolment says it practises: confirm the study's
    guide, then rate the practice items the study requires for the task (counted per judge and task).

    None for a judge that skips them, without a query.
    """
    if not read.enrolment.practise:
        return None
    return pending_step(judge, read.example.study, read.task)


def own_judge_read(judge: AbstractBaseUser, read_id: uuid.UUID | str) -> JudgeRead:
    read = (
        JudgeRead.objects.select_related("example__pair", "example__study", "enrolment")
        .filter(public_id=read_id, judge=judge)
        .first()
    )
    if read is None:
        raise JudgeReadNotFound
    return read


def judge_position(read: JudgeRead) -> int | None:
    """N in "Item N", as a reader is shown it: the judge's ratings in this study and task, plus one."""
    if read.is_rated:
        return None
    return JudgeRead.objects.rated().filter(judge_id=read.judge_id, study_id=read.study_id, task=read.task).count() + 1


def judge_queues(judge: AbstractBaseUser) -> list[dict]:
    """The judge's queues in the shape of annotation.reading.reader_queues (one query)."""
    rows = (
        JudgeRead.objects.filter(judge=judge)
        .values("study__slug", "study__name", "task")
        .annotate(
            rated=Count("pk", filter=~Q(rating="")),
            waiting=Count("pk", filter=Q(rating="")),
        )
        .order_by("study__name", "task")
    )
    return [
        {
            "study_slug": row["study__slug"],
            "study_name": row["study__name"],
            "task": row["task"],
            "task_label": Task(row["task"]).label,
            "done": row["rated"],
            "waiting": row["waiting"] > 0,
        }
        for row in rows
    ]


def show_judge_read(read: JudgeRead) -> JudgeRead:
    """Mark the read as shown and, for Task 2, draw and record which report is A for this presentation.

    One UPDATE that writes each value only while unset, so two fetches at once store the same values.
    """
    changes = {}
    if read.first_shown_at is None:
        read.first_shown_at = timezone.now()
        changes["first_shown_at"] = Coalesce(F("first_shown_at"), Value(read.first_shown_at))
    if read.task == Task.EQUIVALENCE and not read.report_a_type:
        coin = tiebreak(read.example.study.seed, "report-a", read.public_id) % 2
        read.report_a_type = ReportType.ORIGINAL if coin == 0 else ReportType.ALTERNATIVE
        changes["report_a_type"] = Case(
            When(report_a_type="", then=Value(read.report_a_type)), default=F("report_a_type")
        )
    if changes:
        JudgeRead.objects.filter(pk=read.pk).update(**changes)
    return read


def _validate(task: str, rating: str, rationale: str) -> str:
    if rating not in TASK_RATINGS[task]:
        labels = ", ".join(RatingChoice(r).label for r in TASK_RATINGS[task])
        raise JudgeRatingRefused(f"Choose one of: {labels}.", field="rating")
    rationale = rationale.strip()
    if len(rationale) > RATIONALE_MAX_LENGTH:
        raise JudgeRatingRefused(
            f"The rationale is {len(rationale):,} characters long; the limit is {RATIONALE_MAX_LENGTH:,}. Shorten it.",
            field="rationale",
        )
    if not rationale and rating not in RATINGS_WITHOUT_RATIONALE:
        raise JudgeRatingRefused(
            f"A rationale is required for {RatingChoice(rating).label}: say what you found.", field="rationale"
        )
    return rationale


def submit_judge_rating(
    *, judge: AbstractBaseUser, read_id: uuid.UUID | str, rating: str, rationale: str, form_token: uuid.UUID
) -> tuple[JudgeRead, bool]:
    """Store a judge's rating of its own read, once, and audit it. Never routes anything.

    The same form_token again answers with the stored rating ((read, False)); another rating of a
    rated read raises JudgeAlreadyRated; a read never fetched raises JudgeNotShownYet. The rating
    is written by one conditional UPDATE (only while unrated): concurrent submissions store one.
    """
    read_id = uuid.UUID(str(read_id))
    read = own_judge_read(judge, read_id)
    if read.is_rated:
        if read.form_token == form_token:
            return read, False
        raise JudgeAlreadyRated(read)
    if read.first_shown_at is None:
        raise JudgeNotShownYet
    rationale = _validate(read.task, rating, rationale)
    now = timezone.now()
    duration = max(0, int((now - read.first_shown_at).total_seconds() * 1000))
    try:
        with transaction.atomic():
            # The guide in force is the study's newest version at this instant, read in the same UPDATE.
            in_force = GuideVersion.objects.filter(study_id=read.study_id).order_by("-number").values("pk")[:1]
            stored = JudgeRead.objects.filter(pk=read.pk, rating="").update(
                rating=rating,
                rationale=rationale,
                form_token=form_token,
                rated_at=now,
                duration_ms=duration,
                guide_version_id=Subquery(in_force),
            )
            if stored:
                AuditEvent.objects.record(
                    AuditAction.SUBMITTED,
                    study=read.example.study,
                    actor=judge,
                    example=read.example,
                    subject=judge,
                    after={"judge_read": str(read.public_id), "rating": rating, "reader": JUDGE_MARK},
                )
    except IntegrityError:
        # The token is unique: it was used on another read of this judge.
        raise JudgeRatingRefused("This form was already used for another example. Fetch the item again.") from None
    read = own_judge_read(judge, read_id)
    if not stored:
        if read.form_token == form_token:
            return read, False
        raise JudgeAlreadyRated(read)
    return read, True
