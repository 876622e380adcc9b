"""The reading room in a real browser: keyboard rating, htmx swaps, drafts, failures, layout, the CSP."""

import re
from collections.abc import Callable

import pytest
from django.contrib.auth.models import AbstractBaseUser
from django.contrib.sessions.models import Session
from playwright.sync_api import BrowserContext, Page, Request, expect

from annotation.context_processors import draft_owner
from annotation.models import (
    Annotation,
    Assignment,
    AssignmentStatus,
    CandidatePair,
    RatingChoice,
    ReportType,
    Role,
    Task,
)
from consensus.assignment import withdraw_assignment
from tests.browser.conftest import ConsoleWatch, fill_login_form, log_in, open_queue, queue, reading_path
from tests.factories import make_user

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

SUBMIT = "#rating-form button[type=submit]"


def at_path(path: str) -> re.Pattern:
    return re.compile(re.escape(path) + "$")


def test_a_reader_rates_with_the_keyboard_and_the_next_item_swaps_in(
    page: Page, console: ConsoleWatch, queue_reader: AbstractBaseUser
) -> None:
    first, second, *_ = queue(queue_reader)
    log_in(page, queue_reader)

    open_queue(page)
    expect(page).to_have_url(at_path(reading_path(first)))
    expect(page.locator(".position")).to_have_text("Item 1")
    page.evaluate("window.__marker = 1")

    page.keyboard.press("2")
    rationale = page.locator("#rationale")
    expect(page.locator("#rating-2")).to_be_checked()
    # Choosing a label leaves focus on the choice (WCAG 3.2.2); Tab goes on to the rationale.
    expect(page.locator("#rating-2")).to_be_focused()
    expect(rationale).to_have_attribute("required", "")
    page.keyboard.press("Tab")
    expect(rationale).to_be_focused()
    page.keyboard.type("Unusual hedging in the impression.")
    page.keyboard.press("Control+Enter")

    expect(page).to_have_url(at_path(reading_path(second)))
    expect(page.locator(".position")).to_have_text("Item 2")
    expect(page.locator("#reading")).to_have_attribute("data-item", str(second.public_id))
    assert page.evaluate("window.__marker") == 1, "the page was reloaded instead of swapped"
    # The next item starts clean (no draft of the previous one) and is wired up like the first.
    expect(page.locator("#rationale")).to_have_value("")
    expect(page.locator("#rationale")).not_to_have_attribute("required", "")
    page.keyboard.press("3")
    expect(page.locator("#rating-3")).to_be_checked()
    expect(page.locator("#rationale")).to_have_attribute("required", "")
    expect(page.locator("#rating-3")).to_be_focused()
    annotation = Annotation.objects.get()
    assert annotation.assignment_id == first.pk
    assert annotation.rating == RatingChoice.MINOR_ISSUES
    assert annotation.rationale == "Unusual hedging in the impression."
    assert annotation.duration_ms is not None and annotation.duration_ms >= 0
    # Nothing on the way logged an error or broke the Content-Security-Policy.
    assert console.problems() == []
    # htmx comes from static files (WhiteNoise serves them in tests, with finders).
    assert page.evaluate("typeof window.htmx.process") == "function"
    htmx = page.request.get("/static/vendor/htmx/htmx.min.js")
    assert htmx.status == 200
    assert "javascript" in htmx.headers["content-type"]


def test_the_server_requires_the_rationale_when_the_browser_does_not(
    page: Page, queue_reader: AbstractBaseUser
) -> None:
    first = queue(queue_reader)[0]
    log_in(page, queue_reader)
    page.goto(reading_path(first))
    page.evaluate("window.__marker = 1")

    page.locator("label[for=rating-2]").click()
    page.evaluate("document.getElementById('rationale').removeAttribute('required')")
    page.locator(SUBMIT).click()

    expect(page.locator("#rationale-error")).to_contain_text("rationale is required")
    expect(page.locator("#rating-2")).to_be_checked()
    expect(page).to_have_url(at_path(reading_path(first)))
    assert page.evaluate("window.__marker") == 1, "the error should be shown in place"
    assert not Annotation.objects.exists()
    first.refresh_from_db()
    assert first.status == AssignmentStatus.OPEN
    # With a rationale, the same form goes through.
    page.locator("#rationale").fill("Reads like a template.")
    page.locator(SUBMIT).click()
    expect(page.locator("#reading")).not_to_have_attribute("data-item", str(first.public_id))
    annotation = Annotation.objects.get()
    assert (annotation.assignment_id, annotation.rating) == (first.pk, RatingChoice.MINOR_ISSUES)
    assert annotation.rationale == "Reads like a template."


def test_a_double_click_stores_one_annotation(page: Page, queue_reader: AbstractBaseUser) -> None:
    first, second, *_ = queue(queue_reader)
    log_in(page, queue_reader)
    page.goto(reading_path(first))
    posts: list[Request] = []
    page.on("request", lambda request: posts.append(request) if request.method == "POST" else None)

    page.keyboard.press("1")
    page.locator(SUBMIT).dblclick()

    expect(page.locator("#reading")).to_have_attribute("data-item", str(second.public_id))
    # The button is disabled while the rating is saved: the second click sends nothing.
    assert [post.response().status for post in posts] == [200]
    expect(page.locator(".notice")).to_have_count(0)
    assert list(Annotation.objects.values_list("assignment_id", flat=True)) == [first.pk]

    # Two clicks in the same tick, before htmx could have seen any response.
    posts.clear()
    page.keyboard.press("1")
    page.evaluate(f"() => {{ const b = document.querySelector('{SUBMIT}'); b.click(); b.click(); }}")

    expect(page.locator(f"#reading[data-item='{second.public_id}']")).to_have_count(0)
    expect(page.locator("#reading")).to_have_count(1)
    assert [post.response().status for post in posts] == [200]
    expect(page.locator(".notice")).to_have_count(0)
    assert Annotation.objects.filter(assignment=second).count() == 1
    assert Annotation.objects.count() == 2


def test_a_second_tab_is_told_the_item_was_already_rated(
    context: BrowserContext, page: Page, queue_reader: AbstractBaseUser
) -> None:
    first = queue(queue_reader)[0]
    log_in(page, queue_reader)
    other_tab = context.new_page()
    for tab in (page, other_tab):
        tab.goto(reading_path(first))

    page.keyboard.press("1")
    page.locator(SUBMIT).click()
    expect(page.locator(".position")).to_have_text("Item 2")
    other_tab.keyboard.press("3")
    other_tab.locator("#rationale").fill("Looks machine-written.")
    other_tab.locator(SUBMIT).click()

    expect(other_tab.locator(".notice")).to_contain_text("already rated")
    expect(other_tab.locator("#rating-form")).to_have_count(0)
    expect(other_tab.locator(".stored")).to_contain_text(RatingChoice.REALISTIC.label)
    annotation = Annotation.objects.get()
    assert annotation.assignment_id == first.pk
    assert annotation.rating == RatingChoice.REALISTIC


def test_back_shows_the_stored_rating_read_only_and_forward_the_open_item(
    page: Page, queue_reader: AbstractBaseUser
) -> None:
    first, second, *_ = queue(queue_reader)
    log_in(page, queue_reader)
    page.goto(reading_path(first))
    page.keyboard.press("3")
    page.keyboard.press("Tab")
    page.keyboard.type("Contradicts itself.")
    page.locator(SUBMIT).click()
    expect(page).to_have_url(at_path(reading_path(second)))

    page.go_back()

    expect(page).to_have_url(at_path(reading_path(first)))
    stored = page.locator(".stored")
    expect(stored).to_contain_text(RatingChoice.MAJOR_ISSUES.label)
    expect(stored).to_contain_text("Contradicts itself.")
    expect(stored).to_contain_text("Ratings are final")
    expect(page.locator("#rating-form")).to_have_count(0)
    # The whole page came back, not only the panel.
    expect(page.locator(".site-header")).to_have_count(1)
    expect(page).to_have_title(re.compile("Reading"))
    assert Annotation.objects.get().rating == RatingChoice.MAJOR_ISSUES

    page.go_forward()

    expect(page).to_have_url(at_path(reading_path(second)))
    expect(page.locator("#rating-form")).to_have_count(1)
    page.keyboard.press("2")
    expect(page.locator("#rationale")).to_have_attribute("required", "")
    expect(page.locator("#rating-2")).to_be_focused()


def test_an_expired_session_keeps_the_draft_through_the_login(page: Page, queue_reader: AbstractBaseUser) -> None:
    first, second, *_ = queue(queue_reader)
    log_in(page, queue_reader)
    page.goto(reading_path(first))
    page.locator("#rationale").fill("Odd abbreviation: 'RLL opac.'")
    page.locator("label[for=rating-2]").click()

    Session.objects.all().delete()
    page.locator(SUBMIT).click()

    expect(page).to_have_url(re.compile(r"/accounts/login/\?next="))
    # The notice in the page (the page-wide live region outside <main> is another status).
    notice = page.locator("main").get_by_role("status")
    expect(notice).to_contain_text("Your session ended, so you were logged out.")
    expect(notice).to_contain_text("kept in this browser")
    assert not Annotation.objects.exists()
    fill_login_form(page, queue_reader)
    expect(page).to_have_url(at_path(reading_path(first)))
    expect(page.locator("#rationale")).to_have_value("Odd abbreviation: 'RLL opac.'")
    expect(page.locator("#rating-2")).to_be_checked()
    expect(page.locator("#rationale")).to_have_attribute("required", "")
    page.locator(SUBMIT).click()
    expect(page).to_have_url(at_path(reading_path(second)))
    annotation = Annotation.objects.get()
    assert annotation.assignment_id == first.pk
    assert annotation.rating == RatingChoice.MINOR_ISSUES
    assert annotation.rationale == "Odd abbreviation: 'RLL opac.'"


def test_a_rating_that_could_not_be_saved_says_why_and_keeps_the_draft(
    context: BrowserContext, page: Page, queue_reader: AbstractBaseUser
) -> None:
    first, second, *_ = queue(queue_reader)
    log_in(page, queue_reader)
    page.goto(reading_path(first))
    page.locator("#rationale").fill("Laterality missing.")
    page.locator("label[for=rating-2]").click()

    # The network fails: no answer at all.
    page.route(f"**{reading_path(first)}", lambda route: route.abort())
    page.locator(SUBMIT).click()
    expect(page.locator("#submit-error")).to_contain_text("could not be reached")
    page.unroute(f"**{reading_path(first)}")
    # Without cookies, the CSRF check refuses the request before any view sees it (403).
    context.clear_cookies()
    page.locator(SUBMIT).click()

    expect(page.locator("#submit-error")).to_contain_text("not saved (the server answered 403)")
    expect(page.locator("#submit-error")).to_contain_text("Reload the page")
    assert not Annotation.objects.exists()
    page.reload()
    fill_login_form(page, queue_reader)
    expect(page).to_have_url(at_path(reading_path(first)))
    expect(page.locator("#rationale")).to_have_value("Laterality missing.")
    expect(page.locator("#rating-2")).to_be_checked()
    page.locator(SUBMIT).click()
    expect(page).to_have_url(at_path(reading_path(second)))
    assert Annotation.objects.get().rationale == "Laterality missing."

    # A coordinator withdraws the next item while it is open (404): it cannot be rated any more.
    page.keyboard.press("1")
    withdraw_assignment(second.public_id, actor=make_user(Role.COORDINATOR))
    page.locator(SUBMIT).click()
    expect(page.locator("#submit-error")).to_contain_text("no longer in your queue")
    assert Annotation.objects.count() == 1
    with page.expect_navigation():
        page.locator("#submit-error").get_by_role("link", name="Back to your queues").click()
    expect(page).to_have_url(at_path("/read/"))


def test_task_2_reports_sit_side_by_side_when_wide_and_stacked_when_narrow(
    page: Page, queue_reader: AbstractBaseUser
) -> None:
    assignment = queue(queue_reader, Task.EQUIVALENCE)[0]
    page.set_viewport_size({"width": 1280, "height": 900})
    log_in(page, queue_reader)
    page.goto(reading_path(assignment))
    report_a, report_b = page.locator(".report").nth(0), page.locator(".report").nth(1)
    expect(report_a.get_by_role("heading", level=2)).to_have_text("Report A")
    expect(report_b.get_by_role("heading", level=2)).to_have_text("Report B")

    a, b = report_a.bounding_box(), report_b.bounding_box()
    assert abs(a["y"] - b["y"]) < 1, (a, b)
    assert b["x"] >= a["x"] + a["width"], (a, b)

    page.set_viewport_size({"width": 400, "height": 900})
    a, b = report_a.bounding_box(), report_b.bounding_box()
    assert b["y"] >= a["y"] + a["height"], (a, b)
    assert abs(a["x"] - b["x"]) < 1, (a, b)

    # Report A is the report drawn for this assignment, on every load.
    assignment.refresh_from_db()
    pair = assignment.example.pair
    expected_a, expected_b = pair.original_findings, pair.alternative_findings
    if assignment.report_a_type == ReportType.ALTERNATIVE:
        expected_a, expected_b = expected_b, expected_a
    expect(report_a.locator(".report-text").first).to_have_text(expected_a)
    expect(report_b.locator(".report-text").first).to_have_text(expected_b)
    page.reload()
    expect(report_a.locator(".report-text").first).to_have_text(expected_a)
    expect(report_b.locator(".report-text").first).to_have_text(expected_b)


def test_the_form_is_usable_at_200_percent_zoom(
    new_context: Callable[..., BrowserContext], queue_reader: AbstractBaseUser
) -> None:
    # A 1280px window at 200% zoom lays out like a 640px one.
    page = new_context(viewport={"width": 640, "height": 720}, device_scale_factor=2).new_page()
    assignment = queue(queue_reader, Task.EQUIVALENCE)[0]
    CandidatePair.objects.filter(pk=assignment.example.pair_id).update(
        original_findings="Tube tip at " + "x" * 300, indication="Shortness of breath; " + "y" * 300
    )
    log_in(page, queue_reader)
    page.goto(reading_path(assignment))

    widths = page.evaluate("[document.documentElement.scrollWidth, document.documentElement.clientWidth]")
    assert widths[0] <= widths[1] + 1, f"horizontal scrolling: scrollWidth {widths[0]} > clientWidth {widths[1]}"
    page.keyboard.press("1")
    submit = page.locator(SUBMIT)
    submit.scroll_into_view_if_needed()
    box = submit.bounding_box()
    assert box["x"] >= 0 and box["x"] + box["width"] <= 640, box
    submit.click()
    expect(page.locator("#reading")).not_to_have_attribute("data-item", str(assignment.public_id))
    assert Annotation.objects.get().assignment_id == assignment.pk


def _draft_keys(page: Page) -> list[str]:
    return page.evaluate("Object.keys(localStorage).filter((key) => key.startsWith('readingroom-draft:'))")


def _wait_for_no_drafts(page: Page) -> None:
    # page.wait_for_function evaluates a string, which the page's CSP forbids: poll instead.
    for _ in range(50):
        if not _draft_keys(page):
            return
        page.wait_for_timeout(100)
    assert _draft_keys(page) == []


def test_a_draft_follows_the_reader_across_tabs_and_is_cleared_on_submit_and_logout(
    context: BrowserContext, page: Page, queue_reader: AbstractBaseUser
) -> None:
    first, second, *_ = queue(queue_reader)
    log_in(page, queue_reader)
    page.goto(reading_path(first))
    page.locator("label[for=rating-3]").click()
    page.locator("#rationale").fill("Laterality is wrong.")

    other_tab = context.new_page()
    other_tab.goto(reading_path(first))
    expect(other_tab.locator("#rationale")).to_have_value("Laterality is wrong.")
    expect(other_tab.locator("#rating-3")).to_be_checked()
    # The key names neither the user nor anything about the item but its public id.
    (key,) = _draft_keys(page)
    assert queue_reader.get_username() not in key
    assert key.endswith(":" + str(first.public_id))
    # The owner part is an opaque digest (24 hex digits), the same for every item of this reader,
    # never the user's id: a digit of the id may well occur in it by chance, so compare it whole.
    owner = key.split(":")[1]
    assert owner == draft_owner(queue_reader) and owner != str(queue_reader.pk)
    assert len(owner) == 24 and set(owner) <= set("0123456789abcdef")

    page.locator(SUBMIT).click()
    expect(page).to_have_url(at_path(reading_path(second)))
    _wait_for_no_drafts(page)

    page.locator("#rationale").fill("Half a thought")
    assert len(_draft_keys(page)) == 1
    with page.expect_navigation():
        page.get_by_role("button", name=re.compile("^Log out")).click()
    _wait_for_no_drafts(page)


def test_a_draft_is_never_shown_to_another_user_of_the_browser(page: Page, queue_reader: AbstractBaseUser) -> None:
    first = queue(queue_reader)[0]
    log_in(page, queue_reader)
    page.goto(reading_path(first))
    page.locator("#rationale").fill("Reader one's draft.")
    owner = page.evaluate("document.body.dataset.draftOwner")
    # The session ends (not a log-out, so the draft stays), and someone else logs in here.
    Session.objects.all().delete()
    other = make_user(Role.READER)
    other_assignment = Assignment.objects.create(example=first.example, reader=other, slot=3, queue_order=1)
    page.goto("/accounts/login/")
    fill_login_form(page, other)
    page.goto(reading_path(other_assignment))

    expect(page.locator("#rationale")).to_have_value("")
    assert page.evaluate("document.body.dataset.draftOwner") != owner
