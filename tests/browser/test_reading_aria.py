"""What a screen reader hears on the reading pages, as Playwright ARIA snapshots kept in aria/.

A change to the reading page's headings, landmarks, names, choices or descriptions changes these
files, so it shows up in review. Regenerate after an intended change with
READINGROOM_UPDATE_ARIA=1 (then read the diff).
"""

import os
from pathlib import Path

import pytest
from django.urls import reverse
from playwright.sync_api import Page, expect

from annotation.models import Preferences, ReportType, Role, Task
from tests.browser.conftest import log_in
from tests.factories import make_assignment, make_example, make_pair, make_study, make_user

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

SNAPSHOTS = Path(__file__).parent / "aria"
TEXTS = {
    "indication": "Cough and fever.",
    "comparison": "",
    "technique": "PA and lateral chest.",
    "original_findings": "Lungs are clear.\nNo effusion.",
    "original_impression": "No acute process.",
    "alternative_findings": "The lungs are clear. There is no pleural effusion.",
    "alternative_impression": "No acute cardiopulmonary process.",
}


def _reading_page(task: str) -> tuple:
    reader = make_user(Role.READER, username="aria-reader")
    pair = make_pair(make_study("aria-study", name="Chest study"), **TEXTS)
    if task == Task.REALISM:
        example = make_example(pair, task=Task.REALISM, report_type=ReportType.ALTERNATIVE)
        assignment = make_assignment(example, reader)
    else:
        # Report A drawn in advance, so the page is the same on every run.
        assignment = make_assignment(make_example(pair), reader, report_a_type=ReportType.ORIGINAL)
    return reader, reverse("reading_page", args=[assignment.public_id])


def _check(page: Page, name: str) -> None:
    path = SNAPSHOTS / f"{name}.yml"
    actual = page.locator("main").aria_snapshot()
    if os.environ.get("READINGROOM_UPDATE_ARIA") or not path.exists():
        path.write_text(actual + "\n", encoding="utf-8")
        assert os.environ.get("READINGROOM_UPDATE_ARIA"), f"{path} was missing and has been written: review it"
    expect(page.locator("main")).to_match_aria_snapshot(path.read_text(encoding="utf-8"))


@pytest.mark.parametrize("task", [Task.REALISM, Task.EQUIVALENCE])
def test_what_a_screen_reader_hears_on_the_reading_page(page: Page, task: str) -> None:
    reader, url = _reading_page(task)
    log_in(page, reader)
    page.goto(url)
    _check(page, f"reading_{task}")


def test_what_a_screen_reader_hears_without_single_key_shortcuts(page: Page) -> None:
    reader, url = _reading_page(Task.REALISM)
    Preferences.objects.create(user=reader, single_key_shortcuts=False)
    log_in(page, reader)
    page.goto(url)
    _check(page, "reading_realism_without_shortcuts")


def test_what_a_screen_reader_hears_when_a_rating_is_refused(page: Page) -> None:
    reader, url = _reading_page(Task.REALISM)
    log_in(page, reader)
    page.goto(url)
    page.get_by_role("heading", level=1).focus()
    page.keyboard.press("3")
    page.keyboard.press("Control+Enter")
    expect(page.get_by_role("textbox", name="Rationale (required unless Realistic)")).to_be_focused()
    _check(page, "reading_realism_rationale_missing")
