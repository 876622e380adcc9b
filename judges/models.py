"""Automated judges: programs that read a study's examples beside the radiologists, as shadow readers.

A judge's reads live here, apart from the radiologists' assignments and annotations: routing,
consensus, the readers' queues and counters, progress and the default release never see them.
A JudgeRead is an assignment and its rating in one row: it is put in the judge's queue when a
coordinator enrols the judge, shown through the reader API like any assignment, and rated once.
"""

import uuid

from django.conf import settings
from django.db import models
from django.db.models import Q

from annotation.models import (
    RATINGS_WITHOUT_RATIONALE,
    Example,
    ReportType,
    Study,
    Task,
    rating_fits_task,
    rationale_fits,
)


class JudgeEnrolment(models.Model):
    """A judge enrolled in a study: which tasks it reads, all sampled examples or N pairs per variation, and
    whether it confirms the guide and practises first (practise) or skips both."""

    public_id = models.UUIDField(default=uuid.uuid4, unique=True, editable=False)
    study = models.ForeignKey(Study, on_delete=models.CASCADE, related_name="judge_enrolments")
    judge = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.PROTECT, related_name="judge_enrolments")
    realism = models.BooleanField(default=True, help_text="Reads Task 1 (realism).")
    equivalence = models.BooleanField(default=True, help_text="Reads Task 2 (clinical equivalence).")
    per_variation = models.PositiveIntegerField(
        null=True, blank=True, help_text="Pairs drawn per variation (seeded); empty = every sampled pair."
    )
    seed = models.PositiveIntegerField(help_text="Draws the subset of pairs (with per_variation).")
    practise = models.BooleanField(
        default=False,
        help_text="Goes through the study's guide and practice round before its items, as a reader does "
        "(default: skips them).",
    )
    created_at = models.DateTimeField(auto_now_add=True)
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.PROTECT, null=True, blank=True, related_name="+"
    )

    class Meta:
        ordering = ["study", "judge__username"]
        constraints = [
            models.UniqueConstraint(fields=["study", "judge"], name="judgeenrolment_one_per_study_and_judge"),
            models.CheckConstraint(condition=Q(realism=True) | Q(equivalence=True), name="judgeenrolment_some_task"),
        ]
        permissions = [("rate_as_judge", "Can rate examples as an automated judge (reader API only)")]

    def __str__(self) -> str:
        return f"{self.judge} in {self.study}"

    @property
    def tasks(self) -> list[str]:
        return [task for task, chosen in ((Task.REALISM, self.realism), (Task.EQUIVALENCE, self.equivalence)) if chosen]


class JudgeReadQuerySet(models.QuerySet):
    def open(self) -> "JudgeReadQuerySet":
        return self.filter(rating="")

    def rated(self) -> "JudgeReadQuerySet":
        return self.exclude(rating="")


class JudgeRead(models.Model):
    """One example in a judge's queue and, once rated, the judge's rating of it (stored once, never edited)."""

    public_id = models.UUIDField(default=uuid.uuid4, unique=True, editable=False)
    enrolment = models.ForeignKey(JudgeEnrolment, on_delete=models.PROTECT, related_name="reads")
    judge = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.PROTECT, related_name="judge_reads")
    example = models.ForeignKey(Example, on_delete=models.PROTECT, related_name="judge_reads")
    # The example's study and task, copied: the judge's queue is then one index scan.
    study = models.ForeignKey(Study, on_delete=models.PROTECT, related_name="+")
    task = models.CharField(max_length=16, choices=Task.choices)
    queue_order = models.BigIntegerField(help_text="The judge's queue is sorted on this: a seeded shuffle.")
    created_at = models.DateTimeField(auto_now_add=True)
    first_shown_at = models.DateTimeField(null=True, blank=True)
    report_a_type = models.CharField(
        max_length=16, choices=ReportType.choices, blank=True, help_text="Task 2: which report was shown as A."
    )
    rating = models.CharField(max_length=24, blank=True, help_text="Empty until rated.")
    rationale = models.TextField(blank=True)
    form_token = models.UUIDField(null=True, blank=True, unique=True)
    rated_at = models.DateTimeField(null=True, blank=True)
    duration_ms = models.PositiveIntegerField(null=True, blank=True, help_text="First shown -> submitted.")
    guide_version = models.ForeignKey(
        "annotation.GuideVersion",
        on_delete=models.PROTECT,
        null=True,
        blank=True,
        related_name="+",
        help_text="The study guide's version in force when the judge rated (empty: the study had no guide).",
    )

    objects = JudgeReadQuerySet.as_manager()

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["example", "judge"], name="judgeread_one_per_example_and_judge"),
            models.CheckConstraint(condition=Q(rating="") | rating_fits_task(), name="judgeread_rating_fits_task"),
            models.CheckConstraint(
                condition=Q(rating="") | Q(rating__in=RATINGS_WITHOUT_RATIONALE) | ~Q(rationale=""),
                name="judgeread_rationale_unless_realistic_or_equivalent",
            ),
            models.CheckConstraint(
                condition=Q(rating="", form_token__isnull=True, rated_at__isnull=True)
                | (~Q(rating="") & Q(form_token__isnull=False, rated_at__isnull=False)),
                name="judgeread_rated_with_token_and_time",
            ),
            models.CheckConstraint(condition=rationale_fits(), name="judgeread_rationale_max_length"),
        ]
        indexes = [
            models.Index(
                fields=["judge", "task", "study", "queue_order", "id"],
                condition=Q(rating=""),
                name="judgeread_open_queue",
            ),
            models.Index(fields=["judge", "study", "task"], name="judgeread_judge_study_task"),
        ]

    def __str__(self) -> str:
        return f"{self.judge} -> {self.example} ({self.rating or 'open'})"

    @property
    def is_rated(self) -> bool:
        return bool(self.rating)
