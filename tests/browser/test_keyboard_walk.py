"""Keyboard walks through reading, adjudication and coordination at 100% and 200% zoom.

The tests assert what a person experiences: where focus is and what it is called, whether the
heading is inside the viewport, what the live region says, the contrast of the focus ring
computed from the page's styles. Measured figures are printed (run with -s).
"""

import re
from collections.abc import Callable

import pytest
from playwright.sync_api import BrowserContext, Page, expect

from annotation.models import Annotation, CandidatePair, Preferences, Task
from consensus.models import Adjudication, AdjudicationStatus
from tests.browser.a11y import THEMES, ZOOMS, World, axe_violations, focus_ring, make_world, zoomed
from tests.browser.conftest import ConsoleWatch, log_in

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

LONG_TEXT = "The cardiomediastinal silhouette is within normal limits. " * 30


@pytest.fixture(autouse=True)
def results_dir(settings, tmp_path):
    settings.RESULTS_DIR = tmp_path / "results"


@pytest.fixture
def world(transactional_db) -> World:
    world = make_world()
    # Long reports: the submit button sits far below the item's heading, as in real reports at 200%.
    CandidatePair.objects.filter(study=world.study).update(original_findings=LONG_TEXT, alternative_findings=LONG_TEXT)
    return world


@pytest.fixture(params=list(ZOOMS), ids=list(ZOOMS))
def zoom_page(request, new_context: Callable[..., BrowserContext]) -> Page:
    page = new_context(**zoomed(ZOOMS[request.param])).new_page()
    page.zoom_label = request.param
    return page


def heading_in_viewport(page: Page) -> dict:
    """Where the focused element is relative to the viewport (top/bottom in CSS px)."""
    return page.evaluate(
        """() => { const r = document.activeElement.getBoundingClientRect();
                   return {top: r.top, bottom: r.bottom, viewport: window.innerHeight, scrollY: window.scrollY}; }"""
    )


def assert_new_item_in_view_and_focused(page: Page, name: str, saved: str = "") -> dict:
    heading = page.get_by_role("heading", name=name, exact=True)
    expect(heading).to_be_focused()
    place = heading_in_viewport(page)
    assert place["top"] >= 0 and place["bottom"] <= place["viewport"], place
    # Announced politely, from a live region outside the swapped part, with what was just saved.
    expect(page.locator("#announcer")).to_have_text(f"{name}. {saved}" if saved else name)
    assert page.evaluate("!document.getElementById('reading').contains(document.getElementById('announcer'))")
    return place


# --- 1. The next item: heading in view, focused, announced ------------------------------------------


def test_a_reader_rates_a_queue_without_scrolling_back(zoom_page: Page, world: World) -> None:
    page = zoom_page
    console = ConsoleWatch(page)
    first, second, *_ = world.reader_items(Task.REALISM)
    log_in(page, world.reader)
    page.goto("/read/")
    page.get_by_role("link", name="Continue Task 1: Realism, Chest study").focus()
    with page.expect_navigation():
        page.keyboard.press("Enter")

    # Read down to the form with the keyboard, choose and submit.
    page.keyboard.press("Tab")
    expect(page.get_by_role("link", name="Skip to content")).to_be_focused()
    page.keyboard.press("Enter")
    page.keyboard.press("1")
    expect(page.get_by_role("radio", name="Realistic")).to_be_checked()
    expect(page.get_by_role("radio", name="Realistic")).to_be_focused()
    page.keyboard.press("Control+Enter")

    expect(page.locator("#reading")).to_have_attribute("data-item", str(second.public_id))
    place = assert_new_item_in_view_and_focused(page, "Item 2, Task 1: Realism", saved="Saved: Item 1, Realistic")
    print(f"\n[{page.zoom_label}] reading: next heading top {place['top']:.0f} px (viewport {place['viewport']} px)")
    # The keys act on the new item at once.
    page.keyboard.press("1")
    expect(page.get_by_role("radio", name="Realistic")).to_be_checked()
    page.keyboard.press("Control+Enter")
    expect(page.locator("#reading")).not_to_have_attribute("data-item", str(second.public_id))
    assert Annotation.objects.filter(assignment__in=[first, second]).count() == 2
    assert console.problems() == []


def test_an_adjudicator_settles_splits_without_scrolling_back(zoom_page: Page, world: World) -> None:
    page = zoom_page
    first, second = world.adjudications()
    log_in(page, world.adjudicator)
    page.goto("/read/")
    page.get_by_role("link", name="Continue adjudication, Chest study").focus()
    with page.expect_navigation():
        page.keyboard.press("Enter")
    expect(page.get_by_role("heading", level=1)).to_have_text(re.compile(r"^Item 1 of 2, Adjudication"))

    page.get_by_role("radio", name="Minor Discrepancy").focus()
    page.keyboard.press("Space")
    page.keyboard.press("Tab")
    expect(page.get_by_role("textbox", name=re.compile("Rationale"))).to_be_focused()
    page.keyboard.type("Wording differs; meaning is the same apart from a minor point.")
    page.keyboard.press("Control+Enter")

    expect(page.locator("#reading")).to_have_attribute("data-item", str(second.public_id))
    place = assert_new_item_in_view_and_focused(page, "Item 2 of 2, Adjudication · Task 2: Clinical equivalence")
    print(
        f"\n[{page.zoom_label}] adjudication: next heading top {place['top']:.0f} px (viewport {place['viewport']} px)"
    )
    assert Adjudication.objects.get(pk=first.pk).status == AdjudicationStatus.DONE


# --- 2. Choosing a label keeps focus on the choices --------------------------------------------------


def test_arrow_keys_move_through_the_choices_and_tab_goes_on(zoom_page: Page, world: World) -> None:
    page = zoom_page
    item = world.reader_items(Task.REALISM)[0]
    log_in(page, world.reader)
    page.goto(f"/read/a/{item.public_id}/")
    page.get_by_role("radio", name="Realistic").focus()
    page.keyboard.press("Space")
    for name in ("Minor Issues", "Major Issues"):
        page.keyboard.press("ArrowDown")
        choice = page.get_by_role("radio", name=name)
        expect(choice).to_be_checked()
        expect(choice).to_be_focused()
    page.keyboard.press("Tab")
    rationale = page.get_by_role("textbox", name=re.compile("Rationale"))
    expect(rationale).to_be_focused()
    expect(rationale).to_have_attribute("required", "")


# --- 3. Single-key shortcuts: only on the item, and they can be turned off --------------------------


def test_shortcuts_act_only_on_the_item_and_can_be_turned_off(zoom_page: Page, world: World) -> None:
    page = zoom_page
    item = world.reader_items(Task.REALISM)[0]
    log_in(page, world.reader)
    page.goto(f"/read/a/{item.public_id}/")
    checked = page.locator("input[name=rating]:checked")

    # On the menu, on the skip link and on a link in the page, the keys do nothing.
    for link in ("Settings", "Skip to content", "Log out"):
        target = (
            page.get_by_role("link", name=link)
            if link != "Log out"
            else page.get_by_role("button", name=re.compile("^Log out"))
        )
        target.focus()
        page.keyboard.press("2")
        expect(checked).to_have_count(0)
    # In the rationale the key is a character, not a choice.
    page.get_by_role("textbox", name=re.compile("Rationale")).focus()
    page.keyboard.press("2")
    expect(checked).to_have_count(0)
    expect(page.get_by_role("textbox", name=re.compile("Rationale"))).to_have_value("2")
    # On the item itself they choose.
    page.get_by_role("heading", level=1).focus()
    page.keyboard.press("3")
    expect(page.get_by_role("radio", name="Major Issues")).to_be_checked()

    # The reader turns them off in their settings, with the keyboard.
    page.goto("/settings/")
    shortcuts = page.get_by_role("checkbox", name=re.compile("Single-key shortcuts"))
    expect(shortcuts).to_be_checked()
    shortcuts.focus()
    page.keyboard.press("Space")
    with page.expect_navigation():
        page.get_by_role("button", name="Save settings").press("Enter")
    assert Preferences.objects.get(user=world.reader).single_key_shortcuts is False

    page.goto(f"/read/a/{item.public_id}/")
    # Forget the draft of the choice made above (drafts are kept in localStorage).
    page.evaluate("localStorage.clear()")
    page.reload()
    page.get_by_role("heading", level=1).focus()
    page.keyboard.press("1")
    expect(checked).to_have_count(0)
    expect(page.locator("#rating-form kbd", has_text="1")).to_have_count(0)
    expect(page.locator("#rating-form")).to_contain_text("single-key shortcuts are off")
    # Ctrl+Enter (not a single key) still submits; the form says what is missing.
    page.keyboard.press("Control+Enter")
    expect(page.get_by_role("radio", name="Realistic")).to_be_focused()


# --- 4. A rejected submit focuses the field and ties the message to it ------------------------------


def test_a_missing_rationale_is_focused_marked_and_described(zoom_page: Page, world: World) -> None:
    page = zoom_page
    item = world.reader_items(Task.REALISM)[0]
    log_in(page, world.reader)
    page.goto(f"/read/a/{item.public_id}/")
    page.get_by_role("heading", level=1).focus()
    page.keyboard.press("2")
    page.keyboard.press("Control+Enter")

    rationale = page.get_by_role("textbox", name=re.compile("Rationale"))
    expect(rationale).to_be_focused()
    expect(rationale).to_have_attribute("aria-invalid", "true")
    expect(rationale).to_have_accessible_description(re.compile("rationale is required", re.IGNORECASE))
    place = heading_in_viewport(page)
    assert place["top"] >= 0 and place["bottom"] <= place["viewport"], place
    assert not Annotation.objects.filter(assignment=item).exists()
    assert axe_violations(page) == []


def _submit_with_enter(page: Page, button: str, *, exact: bool = False) -> None:
    page.get_by_role("button", name=button, exact=exact).focus()
    page.keyboard.press("Enter")


def test_every_form_focuses_its_first_invalid_field(page: Page, world: World) -> None:
    slug = world.study.slug
    log_in(page, world.coordinator)

    page.goto(f"/studies/{slug}/")
    page.get_by_label("Candidate pairs file").set_input_files(
        files=[{"name": "pairs.csv", "mimeType": "text/csv", "buffer": b"dataset,study_id\nmimic-cxr,1\n"}]
    )
    _submit_with_enter(page, "Import", exact=True)
    field = page.get_by_label("Candidate pairs file")
    expect(field).to_be_focused()
    expect(field).to_have_attribute("aria-invalid", "true")
    expect(field).to_have_accessible_description(re.compile("Nothing was imported"))

    page.get_by_label("Rewrites file").set_input_files(
        files=[{"name": "rewrites.csv", "mimeType": "text/csv", "buffer": b"dataset,study_id\nmimic-cxr,1\n"}]
    )
    _submit_with_enter(page, "Import rewrites")
    field = page.get_by_label("Rewrites file")
    expect(field).to_be_focused()
    expect(field).to_have_attribute("aria-invalid", "true")
    expect(field).to_have_accessible_description(re.compile("Nothing was imported"))

    page.get_by_label("Pairs per dataset and variation").fill("0")
    _submit_with_enter(page, "Draw sample")
    field = page.get_by_label("Pairs per dataset and variation")
    expect(field).to_be_focused()
    expect(field).to_have_attribute("aria-invalid", "true")
    expect(field).to_have_accessible_description(re.compile("greater than or equal to 1"))

    page.goto(f"/studies/{slug}/guide/")
    page.get_by_label("Guide (Markdown)").fill(" ")
    _submit_with_enter(page, "Save as a new version")
    field = page.get_by_label("Guide (Markdown)")
    expect(field).to_be_focused()
    expect(field).to_have_attribute("aria-invalid", "true")
    expect(field).to_have_accessible_description(re.compile("required|empty", re.IGNORECASE))
    page.get_by_label("Practice items file").set_input_files(
        files=[{"name": "practice.csv", "mimeType": "text/csv", "buffer": b"dataset,study_id\nmimic-cxr,1\n"}]
    )
    _submit_with_enter(page, "Import")
    field = page.get_by_label("Practice items file")
    expect(field).to_be_focused()
    expect(field).to_have_attribute("aria-invalid", "true")
    expect(field).to_have_accessible_description(re.compile("Nothing was imported"))

    page.goto(f"/studies/{slug}/readers/")
    _submit_with_enter(page, "Add to the study")
    field = page.locator("#member-panel [aria-invalid=true]").first
    expect(field).to_be_focused()
    expect(field).to_have_accessible_description(re.compile("required", re.IGNORECASE))

    log_in(page, world.data_manager)
    page.goto(f"/studies/{slug}/releases/")
    page.get_by_label("Licence text").fill("CC BY 4.0")
    page.get_by_label("Version").fill("one")
    _submit_with_enter(page, "Build release")
    field = page.get_by_label("Version")
    expect(field).to_be_focused()
    expect(field).to_have_attribute("aria-invalid", "true")
    expect(field).to_have_accessible_description(re.compile("digits", re.IGNORECASE))


def test_the_margins_form_focuses_its_error_then_its_saved_message_at_200_percent(
    zoom_page: Page, world: World
) -> None:
    page = zoom_page
    log_in(page, world.coordinator)
    page.goto(f"/studies/{world.study.slug}/")
    margin = page.get_by_label("Task 1 non-inferiority margin (percentage points)")

    margin.fill("0")
    _submit_with_enter(page, "Save the margins")

    margin = page.get_by_label("Task 1 non-inferiority margin (percentage points)")
    expect(margin).to_be_focused()
    expect(margin).to_have_attribute("aria-invalid", "true")
    expect(margin).to_have_accessible_description(re.compile("greater than or equal to 0.1"))

    margin.fill("10")
    _submit_with_enter(page, "Save the margins")

    saved = page.locator("#margins-panel [role=status]")
    expect(saved).to_have_text(re.compile("Task 1 non-inferiority margin 10.0 percentage points"))
    expect(saved).to_be_focused()
    assert saved.evaluate(
        "(e) => { const r = e.getBoundingClientRect(); return r.top >= 0 && r.bottom <= innerHeight; }"
    )
    assert axe_violations(page) == []


# --- 5. Refreshing panels keep focus and place, wait while in use, can be paused ---------------------


def test_the_progress_panel_keeps_focus_waits_while_in_use_and_pauses(zoom_page: Page, world: World) -> None:
    page = zoom_page
    page.clock.install()
    log_in(page, world.coordinator)
    page.goto(f"/studies/{world.study.slug}/progress/")
    panel_marker = "document.getElementById('progress-table').__old === true"

    def mark_panel() -> None:
        page.evaluate("document.getElementById('progress-table').__old = true")

    def refreshed() -> bool:
        return not page.evaluate(panel_marker)

    table = page.get_by_role("region", name="Examples by state, per task and variation")
    # Every column in view at 100% and 200% zoom: nothing waits in the region's sideways scroll.
    assert table.evaluate("(e) => e.scrollWidth <= e.clientWidth"), table.evaluate(
        "(e) => [e.scrollWidth, e.clientWidth]"
    )
    table.focus()
    scroll_before = page.evaluate("window.scrollY")
    mark_panel()
    # While the coordinator works in the panel (a key a moment before the refresh), it waits.
    page.clock.fast_forward("00:13")
    page.keyboard.press("ArrowRight")
    page.clock.fast_forward("00:03")
    page.wait_for_timeout(300)
    assert not refreshed()
    # Later it refreshes, and focus stays on the same table, the page where it was.
    page.clock.fast_forward("00:16")
    page.wait_for_function(f"() => !({panel_marker})")
    expect(page.get_by_role("region", name="Examples by state, per task and variation")).to_be_focused()
    assert page.evaluate("window.scrollY") == scroll_before

    # Pause: nothing refreshes until resumed.
    pause = page.get_by_role("button", name="Pause automatic updates")
    pause.focus()
    page.keyboard.press("Enter")
    expect(page.get_by_role("button", name="Resume automatic updates")).to_be_focused()
    mark_panel()
    for _ in range(3):
        page.clock.fast_forward("00:16")
    page.wait_for_timeout(300)
    assert not refreshed()
    page.keyboard.press("Enter")
    expect(page.get_by_role("button", name="Pause automatic updates")).to_be_focused()
    page.clock.fast_forward("00:16")
    page.clock.fast_forward("00:16")
    page.wait_for_function(f"() => !({panel_marker})")
    expect(page.get_by_role("button", name="Pause automatic updates")).to_be_focused()


def test_the_release_list_keeps_focus_on_a_button_through_a_refresh(page: Page, world: World) -> None:
    page.clock.install()
    log_in(page, world.data_manager)
    page.goto(f"/studies/{world.study.slug}/releases/")
    button = page.get_by_role("button", name="Build 1.0.0 again")
    button.focus()
    page.evaluate("document.getElementById('releases').__old = true")
    page.clock.fast_forward("00:11")
    page.clock.fast_forward("00:03")
    page.wait_for_function("() => document.getElementById('releases').__old !== true")
    expect(page.get_by_role("button", name="Build 1.0.0 again")).to_be_focused()


# --- 7. The focus ring contrasts with every background, in both themes ------------------------------


@pytest.mark.parametrize("theme", THEMES)
def test_the_focus_ring_has_3_to_1_contrast_where_it_appears(
    new_context: Callable[..., BrowserContext], world: World, theme: str
) -> None:
    page = new_context(color_scheme=theme).new_page()
    item = world.reader_items(Task.REALISM)[0]
    log_in(page, world.reader)
    page.goto(f"/read/a/{item.public_id}/")
    rings: list[dict] = []
    # Tab through the whole page: every focus stop is measured.
    page.locator("body").focus()
    for _ in range(12):
        page.keyboard.press("Tab")
        if page.evaluate("document.activeElement === document.body"):
            break
        rings.append(focus_ring(page))
    assert len(rings) >= 5, "the page should have at least five focus stops"
    page.get_by_role("heading", level=1).focus()
    page.keyboard.press("1")
    page.keyboard.press("Control+Enter")
    expect(page.get_by_role("heading", level=1)).to_be_focused()
    rings.append(focus_ring(page))
    for ring in rings:
        print(
            f"\n[{theme}] focus ring on {ring['element'][:40]}: outer {ring['outer_vs_background']:.2f}:1 against "
            f"the background, inner {ring['inner_vs_outer']:.2f}:1 against the outer"
        )
        assert ring["outlineStyle"] != "none" and ring["outlineWidth"] >= 2, ring
        assert ring["outer_vs_background"] >= 3, ring
        assert ring["inner_vs_outer"] >= 3, ring


# --- 9. Report text scales with the browser's font size ---------------------------------------------


def test_report_text_scales_with_the_font_setting_at_a_comfortable_measure(page: Page, world: World) -> None:
    page.set_viewport_size({"width": 1600, "height": 900})
    item = world.reader_items(Task.REALISM)[0]
    log_in(page, world.reader)
    page.goto(f"/read/a/{item.public_id}/")
    # Characters per line: the text block's width over the mean width of its own characters.
    measure = """() => { const t = document.querySelector('.report-text');
                         const s = getComputedStyle(t);
                         const context = document.createElement('canvas').getContext('2d');
                         context.font = s.font;
                         const text = t.textContent.trim();
                         const mean = context.measureText(text).width / text.length;
                         const width = t.getBoundingClientRect().width;
                         return {size: parseFloat(s.fontSize), width, perLine: width / mean}; }"""
    normal = page.evaluate(measure)
    # A person's larger default font (set in the browser) sets the root font size.
    page.evaluate("document.documentElement.style.fontSize = '24px'")
    larger = page.evaluate(measure)
    print(
        f"\nreport text: {normal['size']} px at a 16 px default, {larger['size']} px at 24 px; "
        f"{normal['perLine']:.0f} characters a line ({normal['width']:.0f} px) in a 1600 px window"
    )
    assert larger["size"] == pytest.approx(normal["size"] * 1.5)
    assert normal["size"] >= 16
    # At most 80 characters a line (WCAG 1.4.8), however wide the window.
    assert normal["perLine"] <= 80, normal
    assert larger["perLine"] <= 80, larger
