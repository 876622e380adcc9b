"""First run and daily use, in a real browser: the flows a newcomer meets, role by role."""

import re

import pytest
from django.contrib.auth.models import AbstractBaseUser
from django.urls import reverse
from playwright.sync_api import Page, expect

from annotation.importing import EXAMPLE_PAIRS
from annotation.models import Annotation, CandidatePair, Role, Task
from tests.browser.conftest import ConsoleWatch, log_in, queue, reading_path
from tests.factories import make_reading_study, make_study, make_user, rate_open_reads

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def test_a_coordinator_checks_a_file_then_imports_it_without_choosing_it_again(
    page: Page, console: ConsoleWatch
) -> None:
    coordinator = make_user(Role.COORDINATOR)
    study = make_study("pilot", name="Pilot")
    log_in(page, coordinator)
    page.goto(study.get_absolute_url())
    expect(page.locator("#study-meta")).to_contain_text("not sampled yet")

    page.locator("summary", has_text="Columns of the file").click()
    expect(page.get_by_role("link", name="Download an example file (CSV)")).to_be_visible()
    page.set_input_files("#id_file", str(EXAMPLE_PAIRS))
    page.locator("#id_dry_run").check()
    page.get_by_role("button", name="Import", exact=True).click()
    expect(page.locator("#import-panel")).to_contain_text("Would import")
    assert not CandidatePair.objects.exists()

    page.get_by_role("button", name="Import this file now").click()
    expect(page.locator("#import-panel")).to_contain_text("Imported")
    assert CandidatePair.objects.filter(study=study).exists()

    # Sampling updates the header in place.
    page.locator("#id_per_variation").fill("1")
    page.get_by_role("button", name="Draw sample").click()
    expect(page.locator("#sample-panel")).to_contain_text("dataset and variation cells")
    expect(page.locator("#study-meta")).to_contain_text("sample: 1 per dataset and variation")
    assert console.problems() == []


def test_a_reader_goes_from_the_queues_to_an_item_and_back(page: Page, queue_reader: AbstractBaseUser) -> None:
    first = queue(queue_reader)[0]
    study = first.example.study
    log_in(page, queue_reader)
    page.goto(reverse("reader_home"))

    card = page.locator(".study-queues", has_text=study.name)
    headings = card.locator("h3").all_text_contents()
    assert headings.index(Task.REALISM.label) < headings.index(Task.EQUIVALENCE.label)
    with page.expect_navigation():
        card.locator(".queue", has_text=Task.REALISM.label).get_by_role("link", name="Continue").click()
    expect(page).to_have_url(re.compile(re.escape(reading_path(first)) + "$"))
    expect(page.locator(".reading-study")).to_contain_text(study.name)

    with page.expect_navigation():
        page.get_by_role("link", name="Back to your queues").click()
    expect(page.get_by_role("heading", name="Your reading queues")).to_be_visible()


def test_a_coordinator_opens_one_void_form_from_its_action(page: Page) -> None:
    study, _, _ = make_reading_study(pairs=1)
    example = study.examples.filter(task=Task.REALISM).order_by("pk").first()
    rate_open_reads(example, "realistic", "minor_issues")
    log_in(page, make_user(Role.COORDINATOR))
    page.goto(reverse("example_detail", args=[study.slug, example.public_id]))

    expect(page.locator("textarea[name=reason]").first).to_be_hidden()
    page.locator(".void-action summary").first.click()
    reason = page.locator("textarea[name=reason]").first
    expect(reason).to_be_visible()
    expect(page.locator("textarea[name=reason]").nth(1)).to_be_hidden()
    reason.fill("Rated the wrong report.")
    page.get_by_role("button", name="Void this rating").first.click()
    expect(page.locator("#example-work")).to_contain_text("Voided the rating")
    assert Annotation.objects.filter(voided_at__isnull=False).count() == 1


def test_a_missing_page_is_a_page_of_the_site(page: Page) -> None:
    log_in(page, make_user(Role.READER))
    response = page.goto("/no/such/page/")
    assert response is not None and response.status == 404
    expect(page.get_by_role("heading", name="This page does not exist")).to_be_visible()
    with page.expect_navigation():
        page.get_by_role("link", name="Go to your start page").click()
    expect(page.get_by_role("heading", name="Your reading queues")).to_be_visible()
