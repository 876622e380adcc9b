"""Taking back a slip in a real browser, by keyboard alone: U undoes, the item comes back filled in,
and once the window has closed the notice says so and the server refuses."""

import re

import pytest
from django.contrib.auth.models import AbstractBaseUser
from playwright.sync_api import Page, expect

from annotation.models import Annotation, AuditAction, AuditEvent, Preferences, RatingChoice, Study
from tests.browser.a11y import THEMES, axe_violations
from tests.browser.conftest import ConsoleWatch, log_in, open_queue, queue, reading_path

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def at_path(path: str) -> re.Pattern:
    return re.compile(re.escape(path) + "$")


def _window(reader: AbstractBaseUser, seconds: int) -> None:
    Study.objects.filter(pk=queue(reader)[0].study_id).update(undo_window_seconds=seconds)


def _save_the_first_item(page: Page, reader: AbstractBaseUser, window: int) -> tuple:
    """Log in, rate the first Task 1 item Realistic by keyboard, and land on the second; (first, second)."""
    _window(reader, window)
    first, second, *_ = queue(reader)
    log_in(page, reader)
    page.goto(reading_path(first))
    page.keyboard.press("1")
    page.keyboard.press("Control+Enter")
    expect(page).to_have_url(at_path(reading_path(second)))
    return first, second


def test_a_reader_takes_back_a_slip_and_corrects_it_by_keyboard_alone(
    page: Page, console: ConsoleWatch, queue_reader: AbstractBaseUser
) -> None:
    _window(queue_reader, 120)
    first, second, *_ = queue(queue_reader)
    log_in(page, queue_reader)
    open_queue(page)

    page.keyboard.press("2")
    page.keyboard.press("Tab")
    expect(page.locator("#rationale")).to_be_focused()
    page.keyboard.type("Half-written")
    page.keyboard.press("Control+Enter")

    expect(page).to_have_url(at_path(reading_path(second)))
    notice = page.locator("#saved-notice")
    expect(notice).to_contain_text("Saved: Item 1, Minor Issues.")
    expect(page.locator("#undo-button")).to_be_visible()
    # The next item's heading is focused; the live region names it and what was saved.
    expect(page.locator("#reading-heading")).to_be_focused()
    expect(page.locator("#announcer")).to_have_text("Item 2, Task 1: Realism. Saved: Item 1, Minor Issues")
    # U while typing is text, not a shortcut.
    page.locator("#rationale").focus()
    page.keyboard.press("u")
    expect(page.locator("#rationale")).to_have_value("u")
    page.locator("#rationale").fill("")
    page.locator("#reading-heading").focus()

    page.keyboard.press("u")

    expect(page).to_have_url(at_path(reading_path(first)))
    expect(page.locator(".position")).to_have_text("Item 1")
    expect(page.locator("#rating-2")).to_be_checked()
    expect(page.locator("#rationale")).to_have_value("Half-written")
    # Main's rules after a swap: the item's named heading focused and in view, and announced.
    heading = page.get_by_role("heading", name="Item 1, Task 1: Realism", exact=True)
    expect(heading).to_be_focused()
    expect(heading).to_be_in_viewport()
    expect(page.locator("#announcer")).to_have_text(re.compile(r"^Item 1, Task 1: Realism\. You took your rating back"))
    assert not Annotation.objects.exists()

    page.keyboard.press("3")
    page.locator("#rationale").fill("Incoherent impression.")
    page.keyboard.press("Control+Enter")

    expect(page).to_have_url(at_path(reading_path(second)))
    expect(page.locator("#saved-notice")).to_contain_text("Saved: Item 1, Major Issues.")
    annotation = Annotation.objects.get()
    assert (annotation.assignment_id, annotation.rating) == (first.pk, RatingChoice.MAJOR_ISSUES)
    undone = AuditEvent.objects.get(action=AuditAction.UNDONE)
    assert (undone.before["rating"], undone.before["rationale"]) == (RatingChoice.MINOR_ISSUES, "Half-written")
    assert console.problems() == []


def test_when_the_window_closes_the_notice_says_so_and_undo_is_refused(
    page: Page, console: ConsoleWatch, queue_reader: AbstractBaseUser
) -> None:
    first, second = _save_the_first_item(page, queue_reader, 2)
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


def test_u_follows_the_single_key_setting_and_acts_only_on_the_item(
    page: Page, console: ConsoleWatch, queue_reader: AbstractBaseUser
) -> None:
    _window(queue_reader, 120)
    Preferences.objects.create(user=queue_reader, single_key_shortcuts=False)
    first, second, *_ = queue(queue_reader)
    log_in(page, queue_reader)
    page.goto(reading_path(first))
    page.get_by_role("radio", name="Minor Issues").check()
    page.locator("#rationale").fill("A slip.")
    page.keyboard.press("Control+Enter")
    expect(page).to_have_url(at_path(reading_path(second)))
    expect(page.locator("body")).to_have_attribute("data-single-key-shortcuts", "off")
    expect(page.locator("#undo-button")).to_be_visible()

    # Single keys are off: U does nothing, on the item or anywhere else.
    page.locator("#reading-heading").focus()
    page.keyboard.press("u")
    # Outside the item (the menu) U would do nothing even with the keys on.
    page.locator("header a[href]").first.focus()
    page.keyboard.press("u")
    expect(page).to_have_url(at_path(reading_path(second)))
    assert Annotation.objects.get().assignment_id == first.pk

    # The button still works by keyboard.
    page.locator("#undo-button").focus()
    page.keyboard.press("Enter")
    expect(page).to_have_url(at_path(reading_path(first)))
    expect(page.locator("#reading-heading")).to_be_focused()
    assert not Annotation.objects.exists()
    assert console.problems() == []


def test_the_undo_notice_states_pass_axe_in_both_themes(page: Page, queue_reader: AbstractBaseUser) -> None:
    _window(queue_reader, 120)
    first, second, *_ = queue(queue_reader)
    log_in(page, queue_reader)
    page.goto(reading_path(first))
    page.keyboard.press("1")
    page.keyboard.press("Control+Enter")
    expect(page.locator("#undo-button")).to_be_visible()
    problems = []
    for theme in THEMES:
        page.emulate_media(color_scheme=theme)
        problems += [f"notice with Undo [{theme}]: {line}" for line in axe_violations(page)]
    page.goto("/read/")
    expect(page.locator("#undo-button")).to_be_visible()
    problems += [f"home with Undo: {line}" for line in axe_violations(page)]
    page.goto(reading_path(second))
    page.keyboard.press("u")
    expect(page).to_have_url(at_path(reading_path(first)))
    for theme in THEMES:
        page.emulate_media(color_scheme=theme)
        problems += [f"taken back [{theme}]: {line}" for line in axe_violations(page)]
    assert problems == []


def test_single_keys_pressed_on_the_undo_button_do_not_rate_the_next_item(
    page: Page, console: ConsoleWatch, queue_reader: AbstractBaseUser
) -> None:
    first, second = _save_the_first_item(page, queue_reader, 120)

    undo = page.locator("#undo-button")
    undo.focus()
    page.keyboard.press("3")
    page.keyboard.press("u")

    expect(undo).to_be_focused()
    expect(page.locator("input[name=rating]:checked")).to_have_count(0)
    expect(page).to_have_url(at_path(reading_path(second)))
    assert Annotation.objects.get().assignment_id == first.pk
    # In the rating form, or with focus on the item's heading, the same keys act.
    page.locator("#reading-heading").focus()
    page.keyboard.press("3")
    expect(page.locator("#rating-3")).to_be_checked()
    assert console.problems() == []
