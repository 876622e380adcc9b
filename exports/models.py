"""Release builds: what was asked for, how it went, and the zip it produced."""

import uuid
from datetime import timedelta
from pathlib import Path

from django.conf import settings
from django.db import models
from django.db.models import Q
from django.db.models.functions import Coalesce
from django.urls import reverse
from django.utils import timezone

from annotation.models import AppendOnlyModel, AppendOnlyQuerySet, Study

# A build writes a heartbeat every HEARTBEAT_INTERVAL while its worker lives. A build whose last
# heartbeat is older than HEARTBEAT_TIMEOUT has lost its worker (killed, machine down): the next
# read of the releases (page, API) or the next build marks it Failed.
HEARTBEAT_INTERVAL = timedelta(seconds=10)
HEARTBEAT_TIMEOUT = timedelta(minutes=2)


class ReleaseStatus(models.TextChoices):
    QUEUED = "queued", "Queued"
    RUNNING = "running", "Building"
    DONE = "done", "Done"
    FAILED = "failed", "Failed"


class ReleaseQuerySet(models.QuerySet):
    def building(self) -> "ReleaseQuerySet":
        """Queued or running: the page keeps polling while there are any."""
        return self.filter(status__in=[ReleaseStatus.QUEUED, ReleaseStatus.RUNNING])

    def stale(self) -> "ReleaseQuerySet":
        """Building, but without a heartbeat for HEARTBEAT_TIMEOUT: the worker is gone."""
        # A build claimed before heartbeats existed has none: its request time stands in.
        last_sign = Coalesce("heartbeat_at", "created_at")
        return self.alias(last_sign=last_sign).filter(
            status=ReleaseStatus.RUNNING, last_sign__lt=timezone.now() - HEARTBEAT_TIMEOUT
        )

    def holding_version(self, study: Study, version: str) -> "ReleaseQuerySet":
        """The build that owns a version: every status but Failed (a deleted zip keeps its version)."""
        return self.filter(study=study, version=version).exclude(status=ReleaseStatus.FAILED)


class Release(models.Model):
    public_id = models.UUIDField(default=uuid.uuid4, unique=True, editable=False)
    study = models.ForeignKey(Study, on_delete=models.PROTECT, related_name="releases")
    requested_by = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        on_delete=models.PROTECT,
        null=True,
        blank=True,
        related_name="+",
        help_text="Empty: built with the export_release command.",
    )
    created_at = models.DateTimeField(auto_now_add=True)
    finished_at = models.DateTimeField(null=True, blank=True)
    version = models.CharField(max_length=32)
    datasets = models.JSONField(default=list, blank=True, help_text="Empty: every dataset of the study.")
    include_unfinished = models.BooleanField(default=False)
    include_guide = models.BooleanField(
        default=False, help_text="Add the study's reader guide (its newest version) as guide.md."
    )
    include_judges = models.BooleanField(
        default=False, help_text="Adds judges/task1_judges.csv and judges/task2_judges.csv (automated judges)."
    )
    license_text = models.TextField()
    status = models.CharField(max_length=8, choices=ReleaseStatus.choices, default=ReleaseStatus.QUEUED)
    progress = models.PositiveSmallIntegerField(default=0, help_text="Percent done while building.")
    error = models.TextField(blank=True)
    row_counts = models.JSONField(default=dict, blank=True)
    sha256 = models.CharField(max_length=64, blank=True, help_text="Of the zip file.")
    zip_path = models.CharField(max_length=500, blank=True)
    heartbeat_at = models.DateTimeField(null=True, blank=True, help_text="Last sign of life of the build's worker.")
    task_id = models.CharField(max_length=64, blank=True, help_text="The build's task on the task queue.")
    deleted_at = models.DateTimeField(null=True, blank=True, help_text="When the zip was deleted; the row stays.")
    deleted_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.PROTECT, null=True, blank=True, related_name="+"
    )

    objects = ReleaseQuerySet.as_manager()

    class Meta:
        ordering = ["-created_at", "-pk"]
        constraints = [
            models.CheckConstraint(condition=Q(status__in=ReleaseStatus.values), name="release_status_valid"),
            models.CheckConstraint(condition=Q(progress__lte=100), name="release_progress_at_most_100"),
            # A version names one content for ever: only a failed build gives its version back.
            models.UniqueConstraint(
                fields=["study", "version"],
                condition=~Q(status=ReleaseStatus.FAILED),
                name="release_version_once_per_study",
                violation_error_message="This version of the study is already built or building.",
            ),
            models.CheckConstraint(
                condition=Q(deleted_at__isnull=True) | Q(status__in=[ReleaseStatus.DONE, ReleaseStatus.FAILED]),
                name="release_deleted_only_when_finished",
            ),
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
    def is_deleted(self) -> bool:
        return self.deleted_at is not None

    @property
    def can_download(self) -> bool:
        """Done, with a zip (export_release writes a folder instead), not deleted."""
        return self.is_done and bool(self.zip_path) and not self.is_deleted

    @property
    def can_retry(self) -> bool:
        return self.status == ReleaseStatus.FAILED and not self.is_deleted

    @property
    def can_delete(self) -> bool:
        return self.status in (ReleaseStatus.DONE, ReleaseStatus.FAILED) and not self.is_deleted

    @property
    def row_count_items(self) -> list[tuple[str, int]]:
        """(file, rows) by task, then full, disagreed, consensus (the JSON column keeps no order)."""
        kinds = ("_full.csv", "_disagreed.csv", "_consensus.csv")

        def position(name: str) -> tuple:
            kind = next((i for i, suffix in enumerate(kinds) if name.endswith(suffix)), len(kinds))
            return (name.split("/")[0], kind, name)

        return sorted(self.row_counts.items(), key=lambda item: position(item[0]))

    def zip_file(self) -> Path | None:
        """Where the zip is on this host's disk, when releases are kept in a local folder
        (READINGROOM_STORAGE=local). zip_path is its name in the releases storage, relative to
        RELEASES_DIR there, so the folder can move."""
        if not self.zip_path:
            return None
        return Path(settings.RELEASES_DIR) / self.zip_path


class ReleaseAction(models.TextChoices):
    REQUESTED = "requested", "Build requested"
    RETRIED = "retried", "Build retried"
    DELETED = "deleted", "Deleted"
    WORKER_LOST = "worker_lost", "Failed: worker lost"


class ReleaseEvent(AppendOnlyModel):
    """Who did what to a release build, when: written in the same transaction as the change. Append-only."""

    created_at = models.DateTimeField(auto_now_add=True, db_index=True)
    release = models.ForeignKey(Release, on_delete=models.PROTECT, related_name="events")
    action = models.CharField(max_length=16, choices=ReleaseAction.choices)
    actor = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        on_delete=models.PROTECT,
        null=True,
        blank=True,
        related_name="+",
        help_text="Empty: the system (or the export_release command).",
    )
    detail = models.TextField(blank=True)

    objects = AppendOnlyQuerySet.as_manager()

    class Meta:
        ordering = ["created_at", "pk"]
        constraints = [
            models.CheckConstraint(condition=Q(action__in=ReleaseAction.values), name="release_event_action_valid"),
        ]

    def __str__(self) -> str:
        return f"{self.created_at:%Y-%m-%d %H:%M:%S} {self.action}"
