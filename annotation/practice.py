"""The practice round: items with a reference rating that readers rate, with feedback, first.

Practice items live in tables of their own (PracticeItem, PracticeAttempt): sampling, routing,
progress, analysis and releases read pairs, examples and annotations only, so practice can
never be sampled, routed, counted, analysed or released.

Before a reader's first real item of a study and task, `pending_step` says what comes first:
confirming the study's guide, then the practice items the study requires for that task.
"""

import uuid
from dataclasses import dataclass, field

from django.conf import settings
from django.contrib.auth.models import AbstractBaseUser
from django.db import IntegrityError, transaction
from django.db.models import Count, F, Q
from django.utils import timezone

from annotation import importing
from annotation.guide import guide_status, needs_confirmation
from annotation.importing import ImportProblem, ImportRejected, Layout
from annotation.models import (
    RATINGS_WITHOUT_RATIONALE,
    RATIONALE_MAX_LENGTH,
    TASK_RATINGS,
    AuditAction,
    AuditEvent,
    PracticeAttempt,
    PracticeItem,
    RatingChoice,
    ReaderQueue,
    ReportType,
    Study,
    StudyMember,
    Task,
    tiebreak,
)
from annotation.reading import ReadingItem, present

# (column of the reference rating, column of its explanation, task, report type)
REFERENCE_COLUMNS = (
    ("task1_original_rating", "task1_original_explanation", Task.REALISM, ReportType.ORIGINAL),
    ("task1_alternative_rating", "task1_alternative_explanation", Task.REALISM, ReportType.ALTERNATIVE),
    ("task2_rating", "task2_explanation", Task.EQUIVALENCE, ""),
)
TEXT_COLUMNS = (
    "indication",
    "comparison",
    "technique",
    "original_findings",
    "original_impression",
    "alternative_findings",
    "alternative_impression",
)
PRACTICE_COLUMNS = Layout(
    columns=(
        *importing.KEY_COLUMNS,
        "verdict",
        *TEXT_COLUMNS,
        *(column for rating, explanation, _, _ in REFERENCE_COLUMNS for column in (rating, explanation)),
    ),
    required=importing.REPORT_COLUMNS,
)


class PracticeRefused(Exception):
    """A practice rating cannot be stored. field names the form field at fault, if any."""

    def __init__(self, message: str, *, field: str | None = None) -> None:
        super().__init__(message)
        self.field = field


# --- Import -----------------------------------------------------------------------------------


@dataclass
class PracticeImportReport:
    created: int = 0
    unchanged: int = 0
    dry_run: bool = False
    by_task: dict[str, int] = field(default_factory=dict)

    def as_dict(self) -> dict:
        return {"created": self.created, "unchanged": self.unchanged, "dry_run": self.dry_run, "by_task": self.by_task}


def _parse_rating(value: str, task: str) -> str | None:
    """A rating of the task from its value (minor_issues) or its label (Minor Issues), else None."""
    wanted = value.strip().casefold()
    for rating in TASK_RATINGS[task]:
        if wanted in (rating, RatingChoice(rating).label.casefold()):
            return rating
    return None


def _items_from_row(study: Study, row: importing.ParsedRow, problems: list[ImportProblem]) -> list[PracticeItem]:
    values = row.values
    texts = {name: values.get(name, "") for name in TEXT_COLUMNS}
    source = "/".join(values[k].strip() for k in importing.KEY_COLUMNS if values.get(k, "").strip())
    items = []
    for rating_column, explanation_column, task, report_type in REFERENCE_COLUMNS:
        raw = values.get(rating_column, "").strip()
        explanation = values.get(explanation_column, "").strip()
        if not raw:
            if explanation:
                problems.append(
                    ImportProblem(
                        f"An explanation without a reference rating. Add '{rating_column}' or remove the explanation.",
                        line=row.line,
                        field=rating_column,
                    )
                )
            continue
        rating = _parse_rating(raw, task)
        if rating is None:
            labels = ", ".join(f"{r} ({RatingChoice(r).label})" for r in TASK_RATINGS[task])
            problems.append(
                ImportProblem(f"'{raw}' is not a rating of {Task(task).label}. Use one of: {labels}.", line=row.line,
                              field=rating_column)
            )  # fmt: skip
            continue
        if not explanation:
            problems.append(
                ImportProblem(
                    "A reference rating needs its explanation: say why, for the reader to compare.",
                    line=row.line,
                    field=explanation_column,
                )
            )
            continue
        sides = [report_type] if report_type else [ReportType.ORIGINAL, ReportType.ALTERNATIVE]
        empty = [
            side for side in sides if not any(texts[f"{side}_{section}"] for section in ("findings", "impression"))
        ]
        if empty:
            problems.append(
                ImportProblem(
                    f"The {empty[0]} report is empty (findings and impression). Give the text this item shows.",
                    line=row.line,
                    field=f"{empty[0]}_findings",
                )
            )
            continue
        item = PracticeItem(
            study=study, task=task, report_type=report_type, source=source[:300], reference_rating=rating,
            explanation=explanation, **texts,
        )  # fmt: skip
        item.content_key = item.shown_text_key()
        items.append(item)
    if not items and not any(p.line == row.line for p in problems):
        problems.append(
            ImportProblem(
                "No reference rating on this row. Give at least one of: "
                + ", ".join(rating for rating, _, _, _ in REFERENCE_COLUMNS)
                + ".",
                line=row.line,
            )
        )
    return items


def import_practice_items(
    study: Study, data: bytes, *, filename: str = "", dry_run: bool = False, actor: AbstractBaseUser | None = None
) -> PracticeImportReport:
    """Import practice items from a CSV or JSON Lines file, all or nothing.

    The file has the pair columns (dataset, study_id and reref_variation are optional and shown
    to coordinators only) and, per item, a reference rating and its explanation:
    task1_original_*, task1_alternative_* and task2_*. Importing the same file again changes
    nothing; an item stored with another reference or explanation is refused, naming the line.
    """
    rows = importing.parse(
        data, filename=filename, max_bytes=settings.READINGROOM_IMPORT_MAX_BYTES, layout=PRACTICE_COLUMNS
    )
    problems: list[ImportProblem] = []
    found: dict[tuple[str, str, str], tuple[int, PracticeItem]] = {}
    for row in rows:
        if len(problems) >= importing.MAX_PROBLEMS:
            break
        for item in _items_from_row(study, row, problems):
            key = (item.task, item.report_type, item.content_key)
            if key in found:
                problems.append(
                    ImportProblem(
                        f"The same practice item is already on line {found[key][0]}. Keep one.", line=row.line
                    )
                )
                continue
            found[key] = (row.line, item)
    if problems:
        raise ImportRejected(problems)

    report = PracticeImportReport(dry_run=dry_run)
    with transaction.atomic():
        Study.objects.select_for_update().filter(pk=study.pk).exists()
        stored = {(i.task, i.report_type, i.content_key): i for i in PracticeItem.objects.filter(study=study)}
        position = max((i.position for i in stored.values()), default=0)
        new_items = []
        for key, (line, item) in found.items():
            existing = stored.get(key)
            if existing is None:
                position += 1
                item.position = position
                new_items.append(item)
                continue
            if (existing.reference_rating, existing.explanation) != (item.reference_rating, item.explanation):
                problems.append(
                    ImportProblem(
                        "This practice item is already stored with another reference rating or explanation; "
                        "readers may have been compared with it. Import it with its stored reference, or as a "
                        "new item with changed text.",
                        line=line,
                    )
                )
            else:
                report.unchanged += 1
        if problems:
            raise ImportRejected(problems)
        report.created = len(new_items)
        for item in new_items:
            report.by_task[item.task] = report.by_task.get(item.task, 0) + 1
        if not dry_run and new_items:
            PracticeItem.objects.bulk_create(new_items)
            AuditEvent.objects.record(
                AuditAction.PRACTICE_IMPORTED, study=study, actor=actor, after={"created": report.by_task}
            )
    return report


# --- What comes before a reader's first real item ---------------------------------------------


@dataclass(frozen=True)
class PendingStep:
    """What the reader does before their next real item: confirm the guide, or practise."""

    kind: str  # "guide" or "practice"
    detail: str
    remaining: int = 0

    def refusal(self, study: Study, task: str) -> dict:
        """The reader API's 409 body: what comes first, and where (the same for a reader and a judge)."""
        if self.kind == "guide":
            how = f"GET /api/reading/guide/?study={study.slug}, then POST it back with its version."
        else:
            how = f"GET /api/reading/practice/?study={study.slug}&task={task} and rate the practice items."
        return {"detail": f"{self.detail} {how}", "required": self.kind, "study": study.slug, "task": task}


def practice_required(reader: AbstractBaseUser, study: Study, task: str) -> int:
    """How many practice items of the task the reader still has to rate before real items.

    0 once they rated any real item of the study's task (the round comes before the first), when
    the coordinator lets them skip practice, or when the study asks for none. The study's
    requirement is capped by the practice items it has.
    """
    if study.practice_items_required == 0:
        return 0
    if StudyMember.objects.filter(study=study, user=reader, skip_practice=True).exists():
        return 0
    if ReaderQueue.objects.filter(reader=reader, study=study, task=task, rated_count__gt=0).exists():
        return 0
    counts = PracticeItem.objects.filter(study=study, task=task).aggregate(
        items=Count("pk"),
        rated=Count("attempts", filter=Q(attempts__reader=reader, attempts__rated_at__isnull=False)),
    )
    return max(0, min(study.practice_items_required, counts["items"]) - counts["rated"])


def pending_step(reader: AbstractBaseUser, study: Study, task: str) -> PendingStep | None:
    """The step due before the reader's next real item of this study and task, or None.

    No query for a study without a guide and practice (the study row says so).
    """
    if needs_confirmation(reader, study):
        status = guide_status(reader, study)
        if status.confirmed is None:
            detail = "Read the study's guide and confirm it before your first item."
        else:
            detail = (
                f"The study's guide changed (version {status.confirmed.number} to {status.current.number}). "
                "See what changed and confirm it before your next item."
            )
        return PendingStep("guide", detail)
    if not study.practice_items_required:
        return None
    remaining = practice_required(reader, study, task)
    if remaining:
        return PendingStep(
            "practice",
            f"Rate {remaining} practice item{'s' if remaining != 1 else ''} of {Task(task).label} first: "
            "you will see the reference rating and why after each. Practice ratings are not study data.",
            remaining=remaining,
        )
    return None


# --- The practice flow --------------------------------------------------------------------------


def next_practice(reader: AbstractBaseUser, study: Study, task: str) -> PracticeAttempt | None:
    """The reader's practice item to rate now (an open one first), or None if none is due.

    Items come in the coordinator's order; each reader rates an item once.
    """
    if practice_required(reader, study, task) == 0:
        return None
    attempts = PracticeAttempt.objects.select_related("item", "study")
    open_attempt = attempts.filter(reader=reader, study=study, task=task, rated_at__isnull=True).first()
    if open_attempt is not None:
        return open_attempt
    item = (
        PracticeItem.objects.filter(study=study, task=task)
        .exclude(attempts__reader=reader)
        .order_by("position", "pk")
        .first()
    )
    if item is None:
        return None
    try:
        with transaction.atomic():
            PracticeAttempt.objects.create(item=item, reader=reader, study=study, task=task)
    except IntegrityError:
        pass  # Two tabs asked at once: the other one created it.
    return attempts.get(item=item, reader=reader)


def show_practice(attempt: PracticeAttempt) -> PracticeAttempt:
    """Mark a practice attempt as shown and, for Task 2, draw its A/B order (kept)."""
    changes = {}
    if attempt.first_shown_at is None:
        attempt.first_shown_at = timezone.now()
        changes["first_shown_at"] = attempt.first_shown_at
    if attempt.task == Task.EQUIVALENCE and not attempt.report_a_type:
        coin = tiebreak(attempt.study.seed, "practice-report-a", attempt.public_id) % 2
        attempt.report_a_type = ReportType.ORIGINAL if coin == 0 else ReportType.ALTERNATIVE
        changes["report_a_type"] = attempt.report_a_type
    if changes:
        # Only while unset: two tabs opening at once keep the first values.
        PracticeAttempt.objects.filter(pk=attempt.pk, first_shown_at__isnull=True).update(**changes)
        attempt.refresh_from_db(fields=["first_shown_at", "report_a_type"])
    return attempt


def practice_reading_item(attempt: PracticeAttempt) -> ReadingItem:
    """The practice item exactly as a real item of its task would be shown (same blinding)."""
    item = attempt.item
    return present(item.task, item, report_type=item.report_type, report_a_type=attempt.report_a_type)


def _validated_rationale(task: str, rating: str, rationale: str) -> str:
    # The rules of real ratings (consensus.services.validate_rating), which this module may not import.
    if rating not in TASK_RATINGS[task]:
        labels = ", ".join(RatingChoice(r).label for r in TASK_RATINGS[task])
        raise PracticeRefused(f"Choose one of: {labels}.", field="rating")
    rationale = rationale.strip()
    if len(rationale) > RATIONALE_MAX_LENGTH:
        raise PracticeRefused(
            f"The rationale is {len(rationale):,} characters long; the limit is {RATIONALE_MAX_LENGTH:,}. Shorten it.",
            field="rationale",
        )
    if not rationale and rating not in RATINGS_WITHOUT_RATIONALE:
        raise PracticeRefused(
            f"A rationale is required for {RatingChoice(rating).label}: say what you found.", field="rationale"
        )
    return rationale


def submit_practice(
    *, reader: AbstractBaseUser, attempt_id: uuid.UUID, rating: str, rationale: str, form_token: uuid.UUID
) -> tuple[PracticeAttempt, bool]:
    """Store the reader's rating of their practice item (once), for feedback. Returns (attempt, created).

    The same form_token again answers with the stored rating; another rating of a rated item is
    refused (PracticeRefused). The rules of the rating and rationale are those of real items.
    Raises PracticeAttempt.DoesNotExist for an attempt that is not the reader's.
    """
    with transaction.atomic():
        attempt = (
            PracticeAttempt.objects.select_for_update(of=("self",))
            .select_related("item", "study")
            .get(public_id=attempt_id, reader=reader)
        )
        if attempt.is_rated:
            if attempt.form_token == form_token:
                return attempt, False
            raise PracticeRefused("You rated this practice item already; its feedback is below.")
        if attempt.first_shown_at is None:
            raise PracticeRefused("Open the practice item before rating it.")
        rationale = _validated_rationale(attempt.task, rating, rationale)
        if PracticeAttempt.objects.filter(form_token=form_token).exists():
            raise PracticeRefused("This form was already used for another item. Reload the page.")
        now = timezone.now()
        attempt.rating, attempt.rationale, attempt.form_token, attempt.rated_at = rating, rationale, form_token, now
        attempt.duration_ms = max(0, int((now - attempt.first_shown_at).total_seconds() * 1000))
        attempt.save(update_fields=["rating", "rationale", "form_token", "rated_at", "duration_ms"])
    return attempt, True


def agreement_by_reader(study: Study) -> list[dict]:
    """Per reader: practice items rated per task and how many agree with the reference. One query."""
    rows = (
        PracticeAttempt.objects.filter(study=study, rated_at__isnull=False)
        .values("reader__username", "task")
        .annotate(rated=Count("pk"), agreed=Count("pk", filter=Q(rating=F("item__reference_rating"))))
        .order_by("reader__username", "task")
    )
    readers: dict[str, dict] = {}
    for row in rows:
        entry = readers.setdefault(row["reader__username"], {"username": row["reader__username"], "tasks": {}})
        entry["tasks"][row["task"]] = {
            "rated": row["rated"],
            "agreed": row["agreed"],
            "percent": round(100 * row["agreed"] / row["rated"]),
        }
    return list(readers.values())


# --- The coordinator's settings ------------------------------------------------------------------


def set_practice_requirement(study: Study, required: int, *, actor: AbstractBaseUser | None) -> None:
    """How many practice items per task readers rate before their first real item (0: no practice)."""
    if not 0 <= required <= 100:
        raise PracticeRefused("Give a number of practice items from 0 to 100.", field="practice_items_required")
    study.set_audited(AuditAction.PRACTICE_SETTINGS, actor=actor, practice_items_required=required)


def set_skip_practice(study: Study, username: str, skip: bool, *, actor: AbstractBaseUser | None) -> int:
    """Let a member of the study skip the practice round, or not (an automated judge's enrolment says so itself).

    Returns how many memberships changed; PracticeRefused if the user is not a member.
    """
    with transaction.atomic():
        members = list(StudyMember.objects.select_for_update().filter(study=study, user__username=username))
        if not members:
            raise PracticeRefused(
                f"'{username}' is not a reader or adjudicator of this study. Add them on the readers page first.",
                field="username",
            )
        changed = [m for m in members if m.skip_practice != skip]
        for member in changed:
            member.skip_practice = skip
            member.save(update_fields=["skip_practice"])
            AuditEvent.objects.record(
                AuditAction.MEMBER_CHANGED,
                study=study,
                actor=actor,
                subject=member.user,
                before={"skip_practice": not skip},
                after={"skip_practice": skip},
            )
    return len(changed)
