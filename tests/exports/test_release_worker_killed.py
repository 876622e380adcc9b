"""kill -9 of a real `manage.py db_worker` mid-build: the release ends Failed, its files removed, and can be retried.

PostgreSQL only: the test holds the build still half-way (an ACCESS EXCLUSIVE lock on the
annotations, which its first query waits for) while a worker process of its own builds it.
"""

import io
import time
from datetime import timedelta
from pathlib import Path

import pytest
from django.core.management import call_command
from django.tasks import TaskResultStatus
from django.test import override_settings
from django.urls import reverse
from django_tasks_db.models import DBTaskResult

from annotation.models import Role
from exports import models
from exports.building import build_dir
from exports.models import Release, ReleaseAction, ReleaseStatus
from exports.services import request_release
from tests.exports.release_helpers import ROW_COUNTS, rated_study
from tests.factories import make_user
from tests.workers import kill_a_worker_held_at_its_first_read

pytestmark = [pytest.mark.postgres, pytest.mark.django_db(transaction=True)]

ROOT = Path(__file__).resolve().parents[2]
DATABASE = {"default": {"BACKEND": "django_tasks_db.DatabaseBackend", "QUEUES": ["default"]}}
POLL = {"HTTP_HX_REQUEST": "true", "HTTP_HX_TARGET": "releases"}


def test_a_worker_killed_mid_build_leaves_a_failed_release_that_can_be_retried(client, settings, tmp_path, monkeypatch):
    releases_dir = settings.RELEASES_DIR = tmp_path / "releases"
    study = rated_study()
    data_manager = make_user(Role.DATA_MANAGER)
    with override_settings(TASKS=DATABASE):
        release = request_release(
            study, user=data_manager, version="1.0.0", datasets=None, include_unfinished=False, license_text="CC0\n"
        )

    kill_a_worker_held_at_its_first_read(
        lambda: Release.objects.get(pk=release.pk).status == ReleaseStatus.RUNNING and build_dir(release).is_dir(),
        READINGROOM_RELEASES_DIR=str(releases_dir),
    )

    # What the review found: "Building" for ever, the task running, a partial folder.
    release.refresh_from_db()
    task = DBTaskResult.objects.get(id=release.task_id)
    assert (release.status, task.status) == (ReleaseStatus.RUNNING, TaskResultStatus.RUNNING)
    assert build_dir(release).is_dir()

    # The heartbeat timeout passes (shortened here: the worker beat every 10 s while it lived).
    monkeypatch.setattr(models, "HEARTBEAT_TIMEOUT", timedelta(seconds=1))
    time.sleep(1.5)
    client.force_login(data_manager)
    html = client.get(reverse("release_list", args=[study.slug]), **POLL).content.decode()

    release.refresh_from_db()
    task.refresh_from_db()
    assert release.status == ReleaseStatus.FAILED
    assert "worker building this release stopped" in release.error
    assert "hx-trigger" not in html
    assert task.status == TaskResultStatus.FAILED
    assert not build_dir(release).exists()
    assert list(releases_dir.iterdir()) == []
    assert release.events.filter(action=ReleaseAction.WORKER_LOST).exists()

    # The data manager builds it again, same version, and a worker finishes it.
    with override_settings(TASKS=DATABASE):
        assert client.post(f"/api/releases/{release.public_id}/retry/").status_code == 202
        call_command(
            "db_worker", batch=True, reload=False, startup_delay=False, interval=0, verbosity=0, stdout=io.StringIO()
        )
    release.refresh_from_db()
    assert (release.status, release.version, release.row_counts) == (ReleaseStatus.DONE, "1.0.0", ROW_COUNTS)
    assert release.zip_file().is_file()
