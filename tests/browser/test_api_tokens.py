"""API tokens on the Settings page with the keyboard alone at 200% zoom: made, the key focused and in
view once, a refused name focused and described, revoked; a coordinator revokes anyone's. axe on each."""

import re
from collections.abc import Callable

import pytest
from playwright.sync_api import BrowserContext, Page, expect

from annotation.models import ApiToken, Role
from tests.browser.a11y import ZOOMS, axe_violations, zoomed
from tests.browser.conftest import ConsoleWatch, log_in
from tests.factories import make_token, make_user

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


@pytest.fixture
def page(new_context: Callable[..., BrowserContext]) -> Page:
    return new_context(**zoomed(ZOOMS["200%"])).new_page()


def _in_view(page: Page) -> bool:
    return page.evaluate(
        """() => { const r = document.activeElement.getBoundingClientRect();
                   return r.top >= 0 && r.bottom <= window.innerHeight; }"""
    )


def _press(page: Page, button: str) -> None:
    page.get_by_role("button", name=button, exact=True).focus()
    with page.expect_navigation():
        page.keyboard.press("Enter")


def test_a_coordinator_makes_a_token_copies_its_key_once_and_revokes_it(page: Page, transactional_db) -> None:
    coordinator = make_user(Role.COORDINATOR, Role.READER)
    make_token(coordinator, name="lab server")
    console = ConsoleWatch(page)
    log_in(page, coordinator)
    page.goto("/settings/")

    # A name already taken: the field is focused, marked and says why.
    page.get_by_label("Token name").fill("lab server")
    _press(page, "Make the token")
    field = page.get_by_label("Token name")
    expect(field).to_be_focused()
    expect(field).to_have_attribute("aria-invalid", "true")
    expect(field).to_have_accessible_description(re.compile("already has a token named"))
    assert _in_view(page)
    assert axe_violations(page) == []

    # Another name, reading only (the radio chosen with the arrow keys): the key is focused, in view.
    field.fill("judge script")
    page.get_by_role("radio", name="Reading only").focus()
    page.keyboard.press("ArrowDown")
    page.keyboard.press("ArrowUp")
    expect(page.get_by_role("radio", name="Reading only")).to_be_checked()
    _press(page, "Make the token")
    key_field = page.get_by_label("Key", exact=True)
    expect(key_field).to_be_focused()
    assert _in_view(page)
    key = key_field.input_value()
    assert ApiToken.objects.get(name="judge script").digest == ApiToken.digest_of(key)
    assert axe_violations(page) == []
    page.reload()
    expect(page.get_by_label("Key", exact=True)).to_have_count(0)

    _press(page, "Revoke “judge script”")
    expect(page.get_by_role("status").filter(has_text="The token “judge script” is revoked")).to_be_visible()
    expect(page.get_by_role("button", name="Revoke “judge script”")).to_have_count(0)
    assert list(ApiToken.objects.values_list("name", flat=True)) == ["lab server"]

    # Everyone's tokens, from the menu.
    reader = make_user(Role.READER)
    make_token(reader, name="<b>laptop</b>")
    page.get_by_role("link", name="API tokens").focus()
    with page.expect_navigation():
        page.keyboard.press("Enter")
    expect(page.get_by_role("heading", name="API tokens", level=1)).to_be_visible()
    assert axe_violations(page) == []
    _press(page, f"Revoke “<b>laptop</b>” of {reader.get_username()}")
    expect(page.locator(".messages")).to_contain_text(
        f"The token “<b>laptop</b>” of {reader.get_username()} is revoked."
    )
    assert not ApiToken.objects.filter(user=reader).exists()
    # The refused name answered 422, which the browser logs; nothing else went wrong.
    assert [problem for problem in console.problems() if "status of 422" not in problem] == []
