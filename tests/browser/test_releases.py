"""The releases page in a real browser: retry a failed build, delete a zip (with a confirmation), under the CSP."""

import pytest
from django.urls import reverse
from playwright.sync_api import Page, expect

from annotation.models import Role
from exports.models import Release, ReleaseStatus
from exports.tasks import build_release_task
from tests.browser.conftest import ConsoleWatch, log_in
from tests.exports.release_helpers import make_release, rated_study
from tests.factories import make_user

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def test_a_data_manager_retries_a_failed_build_and_deletes_a_zip(page: Page, console: ConsoleWatch, settings, tmp_path):
    settings.RELEASES_DIR = tmp_path / "releases"
    study = rated_study()
    done = make_release(study, version="1.0.0")
    build_release_task.call(str(done.public_id))
    done.refresh_from_db()
    failed = make_release(study, version="2.0.0", status=ReleaseStatus.FAILED, error="The worker stopped.")
    data_manager = make_user(Role.DATA_MANAGER, username="dm")
    log_in(page, data_manager)

    page.goto(reverse("release_list", args=[study.slug]))
    page.evaluate("window.__marker = 1")
    expect(page.locator(f"#release-{failed.public_id}")).to_contain_text("The worker stopped.")
    page.get_by_role("button", name="Build 2.0.0 again").click()

    expect(page.get_by_text("Release 2.0.0 is queued again.")).to_be_visible()
    expect(page.locator(f"#release-{failed.public_id}")).to_contain_text("waiting for the worker")
    expect(page.locator("#releases")).to_have_attribute("hx-trigger", "every 2s")
    assert Release.objects.get(pk=failed.pk).status == ReleaseStatus.QUEUED

    page.once("dialog", lambda dialog: dialog.accept())
    page.locator(f"#release-{done.public_id}").get_by_role("button", name="Delete zip").click()

    expect(page.get_by_text("Release 1.0.0 is deleted; its version stays taken.")).to_be_visible()
    expect(page.locator(f"#release-{done.public_id}")).to_contain_text("deleted by dm on")
    expect(page.locator(f"#release-{done.public_id}").get_by_role("link", name="Download")).to_have_count(0)
    assert not done.zip_file().exists()
    assert page.evaluate("window.__marker") == 1, "the page was reloaded instead of swapped"
    assert console.problems() == []


def test_dismissing_the_confirmation_deletes_nothing(page: Page, settings, tmp_path):
    settings.RELEASES_DIR = tmp_path / "releases"
    study = rated_study()
    done = make_release(study)
    build_release_task.call(str(done.public_id))
    done.refresh_from_db()
    log_in(page, make_user(Role.DATA_MANAGER))

    page.goto(reverse("release_list", args=[study.slug]))
    page.once("dialog", lambda dialog: dialog.dismiss())
    page.get_by_role("button", name="Delete zip").click()

    expect(page.get_by_role("link", name=f"Download {done.filename}")).to_be_visible()
    assert Release.objects.get(pk=done.pk).deleted_at is None
    assert done.zip_file().exists()
