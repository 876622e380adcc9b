"""Report text is data: markup, htmx attributes and bidi controls in it are shown, never run."""

import re

import pytest
from django.contrib.auth.models import AbstractBaseUser
from playwright.sync_api import Dialog, Page, Request, expect

from annotation.models import Annotation, Assignment, CandidatePair, RatingChoice, Task
from annotation.reading import reading_item
from tests.browser.conftest import ConsoleWatch, log_in, queue, reading_path

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

SCRIPT = "<script>window.__pwned=1</script>"
IMG = '<img src=x onerror="window.__pwned=1">'
SVG = '<svg onload="window.__pwned=1">'
HX_GET = '<div hx-get="/admin/" hx-trigger="load">x</div>'
HX_ON = '<button hx-on:click="window.__pwned=1">'
JS_LINK = '<a href="javascript:window.__pwned=1">link</a>'
DIALOG = '<details open ontoggle="alert(1)">'
# An unterminated RIGHT-TO-LEFT OVERRIDE, and a ZERO WIDTH SPACE inside a word.
BIDI = "Right \u202elung base clear; pneumo\u200bthorax absent"
LINES = "a\nb"
CORPUS = (SCRIPT, IMG, SVG, HX_GET, HX_ON, JS_LINK, DIALOG, BIDI, LINES)

HOSTILE_PAIR = {
    "indication": JS_LINK,
    "comparison": HX_GET,
    "technique": HX_ON,
    "original_findings": "\n".join(CORPUS),
    "original_impression": LINES,
    "alternative_findings": f"{IMG}\n{SVG}\n{DIALOG}",
    "alternative_impression": f"{BIDI}\n{SCRIPT}",
}

# What the escaped text must not have turned into.
LIVE_MARKUP = "script, img, svg, details, [hx-get], [hx-trigger], [hx-on\\:click], a[href^='javascript:']"


class HostileWatch(ConsoleWatch):
    """Also records dialogs (dismissed) and the requests only live markup would make."""

    def __init__(self, page: Page) -> None:
        super().__init__(page)
        self.dialogs: list[str] = []
        self.requests: list[str] = []
        page.on("dialog", self._on_dialog)
        page.on("request", self._on_request)

    def _on_dialog(self, dialog: Dialog) -> None:
        self.dialogs.append(f"{dialog.type}: {dialog.message}")
        dialog.dismiss()

    def _on_request(self, request: Request) -> None:
        if "/admin/" in request.url or request.resource_type == "image":
            self.requests.append(request.url)

    def assert_quiet(self) -> None:
        assert self.dialogs == [], "hostile text opened a dialog"
        assert self.requests == [], "hostile text made requests"
        assert self.problems() == []
        assert self.page.evaluate("typeof window.__pwned") == "undefined"


@pytest.fixture
def watch(page: Page) -> HostileWatch:
    return HostileWatch(page)


def assert_shown_literally_and_inert(watch: HostileWatch, assignment: Assignment) -> None:
    page = watch.page
    assignment.refresh_from_db()
    item = reading_item(assignment.example, report_a_type=assignment.report_a_type)
    shown = [text for _name, text in item.context]
    shown += [text for report in item.reports for text in (report.findings, report.impression)]

    expect(page.locator("#reading")).to_have_attribute("data-item", str(assignment.public_id))
    # innerText follows the rendering: every text, line breaks and all, is on screen as stored.
    assert sorted(page.locator("#reading .report-text").all_inner_texts()) == sorted(shown)
    assert "<script>" in page.inner_text("#reading")
    assert page.locator("#reading").locator(LIVE_MARKUP).count() == 0

    url = page.url
    page.locator("#reading .report-text", has_text="javascript:").first.click()
    page.locator("#reading .report-text", has_text="hx-on:click").first.click()
    expect(page).to_have_url(url)
    watch.assert_quiet()


def test_hostile_text_is_shown_literally_and_stays_inert(watch: HostileWatch, queue_reader: AbstractBaseUser) -> None:
    CandidatePair.objects.update(**HOSTILE_PAIR)
    page = watch.page
    task_2 = queue(queue_reader, Task.EQUIVALENCE)[0]
    first, second, *_ = queue(queue_reader)
    log_in(page, queue_reader)

    response = page.goto(reading_path(task_2))

    assert response is not None and response.status == 200
    assert "content-security-policy-report-only" not in response.headers
    policy = response.headers["content-security-policy"]
    directives = {name: values for name, *values in (part.split() for part in policy.split(";") if part.strip())}
    assert directives["script-src"] == ["'self'"]
    assert_shown_literally_and_inert(watch, task_2)
    # Report A or B shows the two-line impression alone: on two lines.
    two_lines = page.locator("#reading .report-text").filter(has_text=re.compile(r"^a\s+b$"))
    assert two_lines.inner_text().split("\n") == ["a", "b"]

    # An item swapped in by htmx goes through the same escaping.
    page.goto(reading_path(first))
    assert_shown_literally_and_inert(watch, first)
    page.keyboard.press("2")
    # Choosing keeps focus on the choice (WCAG 3.2.2): Tab goes on to the rationale.
    page.keyboard.press("Tab")
    page.keyboard.type(IMG)
    page.keyboard.press("Control+Enter")
    assert_shown_literally_and_inert(watch, second)
    assert Annotation.objects.get().rationale == IMG

    # So does the stored rationale, shown read-only on the way back.
    page.go_back()
    stored = page.locator(".stored")
    expect(stored).to_contain_text(RatingChoice.MINOR_ISSUES.label)
    expect(stored).to_contain_text(IMG)
    assert stored.locator(LIVE_MARKUP).count() == 0
    watch.assert_quiet()
