"""Release builds: what was asked for, how it went, and the zip it produced."""

import uuid

from django.conf import settings
from django.db import models
from django.db.models import Q

from annotation.models import Study


class ReleaseStatus(models.TextChoices):
    QUEUED = "queued", "Queued"
    RUNNING = "running", "Building"
    DONE = "done", "Done"
    FAILED = "failed", "Failed"


class Release(models.Model):
    public_id = models.UUIDField(default=uuid.uuid4, unique=True, editable=False)
    study = models.ForeignKey(Study, on_delete=models.PROTECT, related_name="releases")
    requested_by = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.PROTECT, related_name="+")
    created_at = models.DateTimeField(auto_now_add=True)
    finished_at = models.DateTimeField(null=True, blank=True)
    version = models.CharField(max_length=32)
    datasets = models.JSONField(default=list, blank=True, help_text="Empty: every dataset of the study.")
    include_unfinished = models.BooleanField(default=False)
    license_text = models.TextField()
    status = models.CharField(max_length=8, choices=ReleaseStatus.choices, default=ReleaseStatus.QUEUED)
    progress = models.PositiveSmallIntegerField(default=0, help_text="Percent done while building.")
    error = models.TextField(blank=True)
    row_counts = models.JSONField(default=dict, blank=True)
    sha256 = models.CharField(max_length=64, blank=True, help_text="Of the zip file.")
    zip_path = models.CharField(max_length=500, blank=True)

    class Meta:
        ordering = ["-created_at", "-pk"]
        constraints = [
            models.CheckConstraint(condition=Q(status__in=ReleaseStatus.values), name="release_status_valid"),
            models.CheckConstraint(condition=Q(progress__lte=100), name="release_progress_at_most_100"),
        ]

    def __str__(self) -> str:
        return f"{self.study.slug} {self.version} ({self.status})"

    @property
    def filename(self) -> str:
        return f"{self.study.slug}-{self.version}.zip"
