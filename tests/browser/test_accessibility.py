"""Every page of every role, in both themes: axe-core (WCAG 2.2 A/AA), reflow at 320 px, link names.

The figures measured here are printed (run with -s to see them) for the accessibility note.
"""

from collections import defaultdict
from collections.abc import Callable

import pytest
from playwright.sync_api import BrowserContext, Page, expect

from annotation.models import Preferences, Theme
from tests.browser.a11y import THEMES, World, axe_violations, link_names, make_world, scroll_widths
from tests.browser.conftest import ConsoleWatch, log_in

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


@pytest.fixture(autouse=True)
def results_dir(settings, tmp_path):
    settings.RESULTS_DIR = tmp_path / "results"


@pytest.fixture
def world(transactional_db) -> World:
    return make_world()


def test_every_page_of_every_role_passes_axe_in_both_themes(
    new_context: Callable[..., BrowserContext], world: World
) -> None:
    problems: list[str] = []
    scanned = 0
    for role, (user, paths) in world.pages().items():
        page = new_context(viewport={"width": 1280, "height": 800}).new_page()
        console = ConsoleWatch(page)
        if user is not None:
            log_in(page, user)
        for path in paths:
            page.goto(path)
            for theme in THEMES:
                page.emulate_media(color_scheme=theme)
                # The theme really changed (the colours follow the system setting).
                background = page.evaluate("getComputedStyle(document.body).backgroundColor")
                assert (background == "rgb(255, 255, 255)") == (theme == "light"), (path, theme, background)
                problems += [f"{role} {path} [{theme}]: {line}" for line in axe_violations(page)]
                scanned += 1
        problems += [f"{role}: {line}" for line in console.problems()]
        page.close()
    print(f"\naxe: {scanned} page scans (every page of every role, light and dark), {len(problems)} violations")
    assert problems == []


def test_no_page_scrolls_sideways_at_320_px_and_wide_tables_scroll_in_a_named_region(
    new_context: Callable[..., BrowserContext], world: World
) -> None:
    overflowing: list[str] = []
    regions: list[str] = []
    for role, (user, paths) in world.pages().items():
        # A 1280 px window at 400% zoom.
        page = new_context(viewport={"width": 320, "height": 256}, device_scale_factor=4).new_page()
        if user is not None:
            log_in(page, user)
        for path in paths:
            page.goto(path)
            scroll_width, client_width = scroll_widths(page)
            print(f"\n320 px: {role} {path}: scrollWidth {scroll_width}, clientWidth {client_width}")
            if scroll_width > client_width:
                overflowing.append(f"{role} {path}: scrollWidth {scroll_width} > clientWidth {client_width}")
            # A table wider than the screen scrolls inside its region, which has a name and takes focus.
            for region in page.evaluate(
                """() => Array.from(document.querySelectorAll("table")).map((table) => {
                     const region = table.closest("[role=region]");
                     const label = region && document.getElementById(region.getAttribute("aria-labelledby"));
                     return {wide: table.scrollWidth > document.documentElement.clientWidth,
                             inRegion: Boolean(region), focusable: Boolean(region) && region.tabIndex === 0,
                             scrolls: Boolean(region) && region.scrollWidth > region.clientWidth,
                             name: label ? label.textContent.trim() : ""};
                   })"""
            ):
                if not (region["inRegion"] and region["focusable"] and region["name"]):
                    regions.append(f"{role} {path}: a table outside a named, focusable region: {region}")
                if region["wide"] and not region["scrolls"]:
                    regions.append(f"{role} {path}: a wide table that does not scroll in its region: {region}")
        page.close()
    assert overflowing == []
    assert regions == []


def test_links_that_go_to_different_places_have_different_names(
    new_context: Callable[..., BrowserContext], world: World
) -> None:
    clashes: list[str] = []
    for role, (user, paths) in world.pages().items():
        page = new_context().new_page()
        if user is not None:
            log_in(page, user)
        for path in paths:
            page.goto(path)
            targets: dict[str, set[str]] = defaultdict(set)
            for name, href in link_names(page):
                targets[name].add(href)
            clashes += [
                f"{role} {path}: {name!r} -> {sorted(hrefs)}" for name, hrefs in targets.items() if len(hrefs) > 1
            ]
        page.close()
    assert clashes == []


def test_the_continue_links_of_the_home_page_say_where_they_go(page: Page, world: World) -> None:
    log_in(page, world.reader)
    page.goto("/read/")
    for name in ("Continue Task 1: Realism, Chest study", "Continue Task 2: Clinical equivalence, Chest study"):
        expect(page.get_by_role("link", name=name, exact=True)).to_be_visible()
    expect(page.get_by_role("link", name="Continue", exact=True)).to_have_count(0)
    log_in(page, world.adjudicator)
    page.goto("/read/")
    expect(page.get_by_role("link", name="Continue adjudication, Chest study", exact=True)).to_be_visible()


@pytest.mark.parametrize(
    ("system", "chosen", "expected"), [("light", Theme.DARK, "dark"), ("dark", Theme.LIGHT, "light")]
)
def test_a_theme_chosen_in_the_settings_overrides_the_system_setting(
    new_context: Callable[..., BrowserContext], world: World, system: str, chosen: str, expected: str
) -> None:
    page = new_context(color_scheme=system).new_page()
    log_in(page, world.reader)
    page.goto("/read/")
    dark_background = "rgb(18, 21, 25)"
    follows_system = page.evaluate("getComputedStyle(document.body).backgroundColor")
    assert (follows_system == dark_background) == (system == "dark")

    # The person chooses a theme with the keyboard on their settings page.
    page.get_by_role("link", name="Settings").focus()
    with page.expect_navigation():
        page.keyboard.press("Enter")
    page.get_by_role("radio", name=dict(Theme.choices)[chosen]).check()
    with page.expect_navigation():
        page.get_by_role("button", name="Save settings").press("Enter")
    expect(page.locator(".messages")).to_contain_text("Your settings are saved")
    assert Preferences.objects.get(user=world.reader).theme == chosen

    page.goto("/read/")
    background = page.evaluate("getComputedStyle(document.body).backgroundColor")
    assert (background == dark_background) == (expected == "dark"), background
    assert axe_violations(page) == []
