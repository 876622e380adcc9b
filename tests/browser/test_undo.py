"""Taking back a slip in a real browser, by keyboard alone: U undoes, the item comes back filled in,
and once the window has closed the notice says so and the server refuses."""

import re

import pytest
from django.contrib.auth.models import AbstractBaseUser
from playwright.sync_api import Page, expect

from annotation.models import Annotation, AuditAction, AuditEvent, Rating, Study
from tests.browser.conftest import ConsoleWatch, log_in, open_queue, queue, reading_path

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def at_path(path: str) -> re.Pattern:
    return re.compile(re.escape(path) + "$")


def _window(reader: AbstractBaseUser, seconds: int) -> None:
    Study.objects.filter(pk=queue(reader)[0].study_id).update(undo_window_seconds=seconds)


def test_a_reader_takes_back_a_slip_and_corrects_it_by_keyboard_alone(
    page: Page, console: ConsoleWatch, queue_reader: AbstractBaseUser
) -> None:
    _window(queue_reader, 120)
    first, second, *_ = queue(queue_reader)
    log_in(page, queue_reader)
    open_queue(page)

    page.keyboard.press("2")
    page.keyboard.type("Half-written")
    page.keyboard.press("Control+Enter")

    expect(page).to_have_url(at_path(reading_path(second)))
    notice = page.locator("#saved-notice")
    expect(notice).to_contain_text("Saved: Item 1, Minor Issues.")
    expect(page.locator("#undo-button")).to_be_visible()
    # U while typing is text, not a shortcut.
    page.locator("#rationale").focus()
    page.keyboard.press("u")
    expect(page.locator("#rationale")).to_have_value("u")
    page.locator("#rationale").fill("")
    page.locator("#reading").focus()

    page.keyboard.press("u")

    expect(page).to_have_url(at_path(reading_path(first)))
    expect(page.locator(".position")).to_have_text("Item 1")
    expect(page.locator("#rating-2")).to_be_checked()
    expect(page.locator("#rationale")).to_have_value("Half-written")
    expect(page.locator("#reading")).to_be_focused()
    assert not Annotation.objects.exists()

    page.keyboard.press("3")
    page.locator("#rationale").fill("Incoherent impression.")
    page.keyboard.press("Control+Enter")

    expect(page).to_have_url(at_path(reading_path(second)))
    expect(page.locator("#saved-notice")).to_contain_text("Saved: Item 1, Major Issues.")
    annotation = Annotation.objects.get()
    assert (annotation.assignment_id, annotation.rating) == (first.pk, Rating.MAJOR_ISSUES)
    undone = AuditEvent.objects.get(action=AuditAction.UNDONE)
    assert (undone.before["rating"], undone.before["rationale"]) == (Rating.MINOR_ISSUES, "Half-written")
    assert console.problems() == []


def test_when_the_window_closes_the_notice_says_so_and_undo_is_refused(
    page: Page, console: ConsoleWatch, queue_reader: AbstractBaseUser
) -> None:
    _window(queue_reader, 2)
    first, second, *_ = queue(queue_reader)
    log_in(page, queue_reader)
    page.goto(reading_path(first))

    page.keyboard.press("1")
    page.keyboard.press("Control+Enter")
    expect(page).to_have_url(at_path(reading_path(second)))
    expect(page.locator("#undo-button")).to_be_visible()

    # The page counts the window down by itself.
    expect(page.locator("#saved-notice .undo-closed")).to_be_visible()
    expect(page.locator("#saved-notice")).to_contain_text("can no longer be taken back")
    expect(page.locator("#undo-button")).to_have_count(0)
    # The key does nothing now, and the server refuses all the same, saying why.
    page.keyboard.press("u")
    response = page.request.post("/read/undo/", headers={"HX-Request": "true", "X-CSRFToken": _csrf(page)})
    assert response.status == 409
    assert "can no longer be taken back" in response.text()
    expect(page).to_have_url(at_path(reading_path(second)))
    assert Annotation.objects.get().assignment_id == first.pk
    assert console.problems() == []


def _csrf(page: Page) -> str:
    headers = page.locator("body").get_attribute("hx-headers")
    return re.search(r'"X-CSRFToken": "([^"]+)"', headers).group(1)
