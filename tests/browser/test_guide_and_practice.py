"""In the browser: the guide before the first item, a change confirmed again, the guide dialog that
keeps the draft, the practice round with feedback, and a hostile guide that stays inert."""

import pytest
from django.contrib.auth.models import AbstractBaseUser
from playwright.sync_api import Page, expect

from annotation.guide import publish_guide
from annotation.models import Annotation, PracticeAttempt, Role, Study, Task
from annotation.practice import import_practice_items
from tests.annotation.test_practice import practice_file, practice_row
from tests.browser.conftest import log_in, open_queue, queue
from tests.browser.test_hostile_text import CORPUS, HostileWatch
from tests.factories import make_user

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def confirm(page: Page, version: int) -> None:
    """Confirm the guide and wait for the page that follows (its scripts loaded)."""
    with page.expect_navigation():
        page.get_by_role("button", name=f"I have read version {version} of the guide").click()


def _study(reader: AbstractBaseUser) -> Study:
    return queue(reader)[0].example.study


def test_a_reader_confirms_the_guide_then_confirms_a_change(page: Page, queue_reader: AbstractBaseUser) -> None:
    study = _study(queue_reader)
    publish_guide(study, "# Demo guide\n\n- **Realistic**: as a radiologist writes.\n- Old rule.", author=None)
    log_in(page, queue_reader)

    open_queue(page)
    expect(page.get_by_role("heading", name="Reader guide")).to_be_visible()
    expect(page.locator(".guide-text li strong")).to_have_text("Realistic")
    confirm(page, 1)

    publish_guide(study, "# Demo guide\n\n- **Realistic**: as a radiologist writes.\n- New rule.", author=None)
    page.keyboard.press("1")
    page.keyboard.press("Control+Enter")
    # The rating is stored; before the next item the reader sees what changed.
    expect(page.get_by_role("heading", name="What changed since version 1")).to_be_visible()
    expect(page.locator(".guide-changes .removed")).to_contain_text("Old rule.")
    expect(page.locator(".guide-changes .added")).to_contain_text("New rule.")
    assert Annotation.objects.get().guide_version.number == 1
    confirm(page, 2)
    expect(page.locator("#reading")).to_be_visible()
    assert str(queue(queue_reader)[1].public_id) == page.locator("#reading").get_attribute("data-item")


def test_the_guide_dialog_keeps_the_draft_and_the_keys_do_not_rate_behind_it(
    page: Page, queue_reader: AbstractBaseUser
) -> None:
    study = _study(queue_reader)
    publish_guide(study, "# Guide\n\nPress 3 here: nothing happens to the form.", author=None)
    log_in(page, queue_reader)
    open_queue(page)
    confirm(page, 1)
    page.keyboard.press("2")
    expect(page.locator("#rating-2")).to_be_checked()
    page.fill("#rationale", "A draft I do not want to lose.")
    url = page.url

    page.get_by_role("link", name="Guide").click()
    dialog = page.get_by_role("dialog", name="Reader guide")
    expect(dialog).to_be_visible()
    expect(page.get_by_role("button", name="Close")).to_be_focused()
    page.keyboard.press("3")
    expect(page.locator("#rating-2")).to_be_checked()
    page.keyboard.press("Control+Enter")
    expect(page.locator("#rating-2")).to_be_checked()
    page.keyboard.press("Escape")

    expect(dialog).to_be_hidden()
    expect(page.get_by_role("link", name="Guide")).to_be_focused()
    assert page.url == url
    expect(page.locator("#rating-2")).to_be_checked()
    expect(page.locator("#rationale")).to_have_value("A draft I do not want to lose.")
    assert not Annotation.objects.exists()


def test_a_reader_practises_with_feedback_before_the_first_real_item(
    page: Page, queue_reader: AbstractBaseUser
) -> None:
    study = _study(queue_reader)
    import_practice_items(study, practice_file(practice_row(1)), filename="p.csv")
    Study.objects.filter(pk=study.pk).update(practice_items_required=1)
    log_in(page, queue_reader)

    open_queue(page)
    expect(page.get_by_role("heading", level=1)).to_have_text("Practice · Task 1: Realism")
    page.keyboard.press("3")
    # Choosing keeps focus on the choice (WCAG 3.2.2): Tab goes on to the rationale.
    page.keyboard.press("Tab")
    page.keyboard.type("It reads oddly.")
    page.keyboard.press("Control+Enter")

    feedback = page.locator(".practice-feedback")
    # Focus moves to the reference to compare with (not lost to the page), and it is in view.
    expect(feedback.get_by_role("heading", name="Compare with the reference")).to_be_focused()
    expect(feedback.get_by_role("heading", name="Compare with the reference")).to_be_in_viewport()
    expect(feedback).to_contain_text("Major Issues")
    expect(feedback).to_contain_text("Realistic")
    expect(feedback).to_contain_text("Routine wording.")
    assert PracticeAttempt.objects.get().rating == "major_issues"
    page.get_by_role("link", name="Start the real items").click()
    expect(page.locator(".reading-header .task")).to_have_text(Task(Task.REALISM).label)
    assert not Annotation.objects.exists()

    coordinator = make_user(Role.COORDINATOR)
    page.context.clear_cookies()
    log_in(page, coordinator)
    page.goto(f"/studies/{study.slug}/guide/")
    expect(page.locator("#practice-agreement")).to_contain_text("0 / 1 (0%)")


def test_a_hostile_guide_stays_inert_under_the_csp(page: Page, queue_reader: AbstractBaseUser) -> None:
    watch = HostileWatch(page)
    study = _study(queue_reader)
    publish_guide(study, "\n\n".join(CORPUS) + "\n\n[link](javascript:window.__pwned=1)", author=None)
    log_in(page, queue_reader)

    open_queue(page)
    expect(page.get_by_role("heading", name="Reader guide")).to_be_visible()
    assert page.locator(".guide-text").locator("script, img, svg, details, [hx-get], [hx-on\\:click]").count() == 0
    expect(page.locator(".guide-text")).to_contain_text("<script>window.__pwned=1</script>")
    page.locator(".guide-text p").last.click()
    confirm(page, 1)
    page.get_by_role("link", name="Guide").click()
    expect(page.get_by_role("dialog", name="Reader guide")).to_be_visible()
    watch.assert_quiet()
