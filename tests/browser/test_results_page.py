"""The Results page in a real browser: figures load as images, filters swap the results, the CSP holds."""

import re
from pathlib import Path

import pytest
from playwright.sync_api import Page, expect

from analysis.computing import compute_results
from analysis.services import Scope
from annotation.models import Role
from tests.browser.a11y import ZOOMS, axe_violations, zoomed
from tests.browser.conftest import ConsoleWatch, log_in
from tests.exports.release_helpers import rated_study
from tests.factories import make_user

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


@pytest.fixture(autouse=True)
def results_dir(settings, tmp_path):
    settings.RESULTS_DIR = tmp_path / "results"


def test_a_coordinator_sees_the_figures_and_filters_the_results_in_place(page: Page, console: ConsoleWatch) -> None:
    study = rated_study()
    compute_results(study, Scope())
    compute_results(study, Scope(task="task2"))
    log_in(page, make_user(Role.COORDINATOR))

    page.goto(f"/studies/{study.slug}/results/")

    expect(page.get_by_role("heading", name="Task 1: realism")).to_be_visible()
    expect(page.get_by_role("heading", name="Reader quality")).to_be_visible()
    images = page.locator("#results .results-section:not(#metric-sensitivity) figure img")
    # Task 1's degradation and share-Realistic forests, Task 2's proportions, agreement.
    expect(images).to_have_count(5)
    # One figure per metric and direction (BLEU-2 both ways, ROUGE-L, chrF both ways); the first is open.
    metric_images = page.locator("#metric-sensitivity figure img")
    expect(metric_images).to_have_count(5)
    for image in [*images.all(), metric_images.first]:
        image.scroll_into_view_if_needed()
        page.wait_for_function("(img) => img.complete", arg=image.element_handle())
        assert image.evaluate("(img) => img.naturalWidth") > 100, image.get_attribute("src")
    page.evaluate("window.__marker = 1")

    page.select_option("#filter-task", "task2")

    expect(page).to_have_url(re.compile(r"\?dataset=&task=task2$"))
    expect(page.get_by_role("heading", name="Task 2: clinical equivalence")).to_be_visible()
    expect(page.get_by_role("heading", name="Task 1: realism")).to_have_count(0)
    expect(images).to_have_count(2)
    expect(metric_images).to_have_count(5)
    assert page.evaluate("window.__marker") == 1, "the page was reloaded instead of swapped"
    assert console.problems() == []


def test_a_data_manager_sees_the_results_without_reader_quality(page: Page, console: ConsoleWatch) -> None:
    study = rated_study()
    compute_results(study, Scope())
    log_in(page, make_user(Role.DATA_MANAGER))

    page.goto(f"/studies/{study.slug}/results/")

    expect(page.get_by_role("heading", name="Agreement and disagreement")).to_be_visible()
    expect(page.get_by_role("heading", name="Reader quality")).to_have_count(0)
    expect(page.get_by_role("link", name=re.compile("Download the analysis"))).to_be_visible()
    assert console.problems() == []


@pytest.mark.parametrize("zoom", list(ZOOMS))
def test_a_table_opens_and_downloads_by_keyboard_alone(new_context, zoom: str) -> None:
    study = rated_study()
    compute_results(study, Scope())
    page = new_context(**zoomed(ZOOMS[zoom]), accept_downloads=True).new_page()
    console = ConsoleWatch(page)
    log_in(page, make_user(Role.COORDINATOR))
    page.goto(f"/studies/{study.slug}/results/")

    details = page.locator("details.table-details").first
    caption = details.locator("summary").inner_text()

    def link(label: str):
        return page.get_by_role("link", name=re.compile(rf"^{label}\s*: {re.escape(caption)}$"))

    csv = link("CSV")
    csv.focus()
    # The table's files, then its collapsed table: Markdown, LaTeX, the summary.
    for label in ("Markdown", "LaTeX"):
        page.keyboard.press("Tab")
        expect(link(label)).to_be_focused()
    page.keyboard.press("Tab")
    summary = details.locator("summary")
    expect(summary).to_be_focused()
    expect(details).not_to_have_attribute("open", "")
    page.keyboard.press("Enter")
    expect(details).to_have_attribute("open", "")
    expect(summary).to_be_focused()
    page.keyboard.press("Tab")
    region = details.get_by_role("region", name=caption)
    expect(region).to_be_focused()
    assert region.evaluate("(e) => { const r = e.getBoundingClientRect(); return r.top >= 0 && r.top < innerHeight; }")
    page.keyboard.press("Shift+Tab")
    page.keyboard.press("Enter")
    expect(details).not_to_have_attribute("open", "")

    csv.focus()
    with page.expect_download() as download:
        page.keyboard.press("Enter")
    assert download.value.suggested_filename == f"{study.slug}-all--both-task1_ratings.csv"
    header = Path(download.value.path()).read_text(encoding="utf-8").splitlines()[0]
    assert header.startswith("level,group,report_type,rating,"), header
    assert axe_violations(page) == []
    assert console.problems() == []
