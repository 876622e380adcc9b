"""Release builds: what was asked for, how it went, and the zip it produced."""

import uuid
from pathlib import Path

from django.conf import settings
from django.db import models
from django.db.models import Q
from django.urls import reverse

from annotation.models import Study


class ReleaseStatus(models.TextChoices):
    QUEUED = "queued", "Queued"
    RUNNING = "running", "Building"
    DONE = "done", "Done"
    FAILED = "failed", "Failed"


class ReleaseQuerySet(models.QuerySet):
    def building(self) -> "ReleaseQuerySet":
        """Queued or running: the page keeps polling while there are any."""
        return self.filter(status__in=[ReleaseStatus.QUEUED, ReleaseStatus.RUNNING])


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

    objects = ReleaseQuerySet.as_manager()

    class Meta:
        ordering = ["-created_at", "-pk"]
        constraints = [
            models.CheckConstraint(condition=Q(status__in=ReleaseStatus.values), name="release_status_valid"),
            models.CheckConstraint(condition=Q(progress__lte=100), name="release_progress_at_most_100"),
        ]

    def __str__(self) -> str:
        return f"{self.study.slug} {self.version} ({self.status})"

    def get_absolute_url(self) -> str:
        return reverse("release_download", args=[self.public_id])

    @property
    def filename(self) -> str:
        return f"{self.study.slug}-{self.version}.zip"

    @property
    def root_folder(self) -> str:
        """The one folder inside the zip."""
        return f"{self.study.slug}-{self.version}"

    @property
    def is_building(self) -> bool:
        return self.status in (ReleaseStatus.QUEUED, ReleaseStatus.RUNNING)

    @property
    def is_done(self) -> bool:
        return self.status == ReleaseStatus.DONE

    @property
    def row_count_items(self) -> list[tuple[str, int]]:
        """(file, rows) by task, then full, disagreed, consensus (the JSON column keeps no order)."""
        kinds = ("_full.csv", "_disagreed.csv", "_consensus.csv")

        def position(name: str) -> tuple:
            kind = next((i for i, suffix in enumerate(kinds) if name.endswith(suffix)), len(kinds))
            return (name.split("/")[0], kind, name)

        return sorted(self.row_counts.items(), key=lambda item: position(item[0]))

    def zip_file(self) -> Path | None:
        """Where the zip is on disk. zip_path is relative to RELEASES_DIR, so the folder can move."""
        if not self.zip_path:
            return None
        return Path(settings.RELEASES_DIR) / self.zip_path
