"""What follows the ratings: adjudications of three-way splits and consensus labels."""

import uuid

from django.conf import settings
from django.db import models
from django.db.models import Q

from annotation.models import Example, RatingChoice, ReportType, Task, rating_fits_task, rationale_fits


class AdjudicationStatus(models.TextChoices):
    OPEN = "open", "Open"
    DONE = "done", "Decided"
    VOIDED = "voided", "Voided"


ACTIVE_ADJUDICATION = Q(status__in=[AdjudicationStatus.OPEN, AdjudicationStatus.DONE])


class AdjudicationQuerySet(models.QuerySet):
    def active(self) -> "AdjudicationQuerySet":
        return self.filter(ACTIVE_ADJUDICATION)


class Adjudication(models.Model):
    """The final rating of an example whose three reads all differ, by a fourth radiologist."""

    public_id = models.UUIDField(default=uuid.uuid4, unique=True, editable=False)
    example = models.ForeignKey(Example, on_delete=models.PROTECT, related_name="adjudications")
    adjudicator = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.PROTECT, related_name="adjudications")
    status = models.CharField(max_length=8, choices=AdjudicationStatus.choices, default=AdjudicationStatus.OPEN)
    task = models.CharField(max_length=16, choices=Task.choices)
    rating = models.CharField(max_length=24, choices=RatingChoice.choices, blank=True)
    rationale = models.TextField(blank=True)
    form_token = models.UUIDField(unique=True, null=True, blank=True)
    report_a_type = models.CharField(max_length=16, choices=ReportType.choices, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    first_shown_at = models.DateTimeField(null=True, blank=True)
    decided_at = models.DateTimeField(null=True, blank=True)

    objects = AdjudicationQuerySet.as_manager()

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["example"], condition=ACTIVE_ADJUDICATION, name="adjudication_one_active_per_example"
            ),
            # Undecided (open, or voided before a decision) has no rating yet; decided fits the task.
            models.CheckConstraint(
                condition=Q(status__in=[AdjudicationStatus.OPEN, AdjudicationStatus.VOIDED], rating="")
                | rating_fits_task(),
                name="adjudication_rating_fits_task",
            ),
            # The adjudicator's rationale is always required with a decision.
            models.CheckConstraint(
                condition=~Q(status=AdjudicationStatus.DONE) | ~Q(rationale=""), name="adjudication_has_rationale"
            ),
            models.CheckConstraint(condition=rationale_fits(), name="adjudication_rationale_max_length"),
        ]

    def __str__(self) -> str:
        return f"adjudication of {self.example_id} ({self.status})"


class LabelSource(models.TextChoices):
    UNANIMOUS = "unanimous", "unanimous"
    MAJORITY = "majority", "majority"
    ADJUDICATED = "adjudicated", "adjudicated"


class ConsensusLabel(models.Model):
    """The consensus rating of an example. Removed again if a rating it rests on is voided."""

    example = models.OneToOneField(Example, on_delete=models.PROTECT, related_name="consensus")
    task = models.CharField(max_length=16, choices=Task.choices)
    rating = models.CharField(max_length=24, choices=RatingChoice.choices)
    label_source = models.CharField(max_length=16, choices=LabelSource.choices)
    n_annotations = models.PositiveSmallIntegerField()
    decided_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        constraints = [
            models.CheckConstraint(condition=rating_fits_task(), name="consensus_rating_fits_task"),
            models.CheckConstraint(
                condition=(Q(label_source=LabelSource.UNANIMOUS) & Q(n_annotations=2))
                | (Q(label_source__in=[LabelSource.MAJORITY, LabelSource.ADJUDICATED]) & Q(n_annotations=3)),
                name="consensus_source_matches_count",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.get_rating_display()} ({self.label_source})"
