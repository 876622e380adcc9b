"""Browser tests: a real Chromium, driven by Playwright's sync API, against pytest-django's live_server.

Debian's chromium at /usr/bin/chromium is used (Playwright's own browser download is not used);
without it every browser test is skipped, saying so.
"""

import os
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from django.contrib.auth.models import AbstractBaseUser
from django.urls import get_resolver, reverse
from playwright.sync_api import Browser, BrowserContext, ConsoleMessage, Page, expect, sync_playwright

from annotation.models import Assignment, Task
from tests.factories import make_reading_study

# Playwright's sync API runs an event loop in this thread, so Django would refuse ORM calls from
# the tests (SynchronousOnlyOperation). The tests are synchronous code: Django documents this
# switch for exactly that case. Django reads it at each ORM call, so setting it here is in time.
os.environ["DJANGO_ALLOW_ASYNC_UNSAFE"] = "true"

CHROMIUM = Path("/usr/bin/chromium")
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-background-networking",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-component-update",
    "--disable-sync",
]
# Short waits: every step here is a local request; a stuck wait should fail fast.
TIMEOUT_MS = 5_000


@pytest.fixture(scope="session")
def browser() -> Iterator[Browser]:
    if not CHROMIUM.exists():
        pytest.skip(f"chromium not found at {CHROMIUM}: apt-get install chromium")
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=str(CHROMIUM), headless=True, args=CHROMIUM_ARGS)
        yield browser
        browser.close()


@pytest.fixture
def new_context(browser: Browser, live_server) -> Iterator[Callable[..., BrowserContext]]:
    """Opens a fresh browser context (own cookies and storage) on the live server; closed after the test."""
    # The URLconf imports the analysis stack (pandas, scipy, matplotlib): seconds on a busy machine.
    # Load it here, in this process (the live server's too), not inside the first page's 5 s wait.
    get_resolver().url_patterns  # noqa: B018
    contexts: list[BrowserContext] = []

    def open_context(**options) -> BrowserContext:
        context = browser.new_context(base_url=live_server.url, **options)
        context.set_default_timeout(TIMEOUT_MS)
        contexts.append(context)
        return context

    yield open_context
    for context in contexts:
        context.close()


@pytest.fixture
def context(new_context: Callable[..., BrowserContext]) -> BrowserContext:
    return new_context()


@pytest.fixture
def page(context: BrowserContext) -> Page:
    return context.new_page()


class ConsoleWatch:
    """Console errors, uncaught exceptions and Content-Security-Policy violations of a page."""

    def __init__(self, page: Page) -> None:
        self.page = page
        self.messages: list[str] = []
        page.on("console", self._on_console)
        page.on("pageerror", lambda error: self.messages.append(f"uncaught: {error}"))
        page.add_init_script(
            "window.__cspViolations = [];"
            "document.addEventListener('securitypolicyviolation',"
            " (event) => window.__cspViolations.push(event.violatedDirective + ' ' + event.blockedURI));"
        )

    def _on_console(self, message: ConsoleMessage) -> None:
        if message.type == "error" or "Refused to" in message.text:
            self.messages.append(f"{message.text} ({message.location.get('url', '')})")

    def problems(self) -> list[str]:
        """What went wrong so far (CSP violations: on the current document only; the console has all)."""
        violations = self.page.evaluate("window.__cspViolations || []")
        return self.messages + [f"CSP violation: {violation}" for violation in violations]


@pytest.fixture
def console(page: Page) -> ConsoleWatch:
    return ConsoleWatch(page)


def log_in(page: Page, user: AbstractBaseUser) -> None:
    """Log in through the real login form (factory users have the password "pw-" + username).

    Whoever was logged in on the page's browser context is logged out first (their cookies
    cleared): the login page shows a logged-in user who they are instead of the form.
    """
    page.context.clear_cookies()
    page.goto("/accounts/login/")
    fill_login_form(page, user)


def fill_login_form(page: Page, user: AbstractBaseUser) -> None:
    """Submit the login form the page is showing, and wait until the login page is left."""
    expect(page.get_by_role("heading", name="Log in")).to_be_visible()
    page.fill("#id_username", user.get_username())
    page.fill("#id_password", "pw-" + user.get_username())
    with page.expect_navigation():
        page.locator("main form button[type=submit]").click()
    expect(page.locator("#id_password")).to_have_count(0)


def open_queue(page: Page, task: str = Task.REALISM) -> None:
    """From the reader home, follow a queue's "Continue" link and wait for the item's page."""
    page.goto("/read/")
    with page.expect_navigation():
        page.locator(".queue", has_text=Task(task).label).get_by_role("link", name="Continue").click()


def queue(reader: AbstractBaseUser, task: str = Task.REALISM) -> list[Assignment]:
    """The reader's assignments of one task, in the order the reading queue serves them."""
    return list(
        Assignment.objects.filter(reader=reader, example__task=task)
        .select_related("example__pair", "example__study")
        .order_by("queue_order", "pk")
    )


def reading_path(assignment: Assignment) -> str:
    return reverse("reading_page", args=[assignment.public_id])


@pytest.fixture
def queue_reader(transactional_db) -> AbstractBaseUser:
    """A reader of a sampled, assigned study with at least two Task 1 items and a Task 2 item."""
    _study, readers, _adjudicators = make_reading_study(pairs=4, readers=6)
    for reader in readers:
        if len(queue(reader)) >= 2 and queue(reader, Task.EQUIVALENCE):
            return reader
    raise AssertionError("make_reading_study gave no reader two Task 1 items and a Task 2 item")
