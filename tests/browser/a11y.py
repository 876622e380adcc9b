"""Helpers of the accessibility tests: a study with work for every role, axe, zoom, contrast.

Zoom is emulated the way a browser zooms: a 1280 x 800 window at 200% lays out like a 640 x 400
one with twice the device pixels, and at 400% like 320 x 200 (WCAG 1.4.10's 320 CSS px).
"""

from collections.abc import Iterator
from dataclasses import dataclass

from axe_playwright_python.sync_playwright import Axe
from axes.models import AccessAttempt
from django.conf import settings
from django.contrib.auth.models import AbstractBaseUser
from django.urls import reverse
from django.utils import timezone
from playwright.sync_api import Page

from annotation.guide import confirm_guide, publish_guide
from annotation.models import Assignment, Example, PracticeAttempt, RatingChoice, Role, StudyMember, Task
from annotation.practice import import_practice_items, next_practice
from consensus.models import Adjudication, AdjudicationStatus
from exports.models import ReleaseStatus
from tests.annotation.test_practice import practice_file, practice_row
from tests.exports.release_helpers import make_release
from tests.factories import make_reading_study, make_token, make_user, rate_open_reads

WINDOW = {"width": 1280, "height": 800}
ZOOMS = {"100%": 1, "200%": 2}
AXE_TAGS = ["wcag2a", "wcag2aa", "wcag21a", "wcag21aa", "wcag22a", "wcag22aa"]
THEMES = ("light", "dark")


def zoomed(zoom: int) -> dict:
    """Browser context options for a 1280 x 800 window at the given zoom factor."""
    return {
        "viewport": {"width": WINDOW["width"] // zoom, "height": WINDOW["height"] // zoom},
        "device_scale_factor": zoom,
    }


@dataclass
class World:
    """One study with open work for every role, and a person of each role."""

    study: object
    reader: AbstractBaseUser
    adjudicator: AbstractBaseUser
    coordinator: AbstractBaseUser
    data_manager: AbstractBaseUser
    nobody: AbstractBaseUser
    # A reader due to practise first, and one who has not confirmed the guide's latest version.
    practice_reader: AbstractBaseUser | None = None
    guide_reader: AbstractBaseUser | None = None

    def reader_items(self, task: str) -> list[Assignment]:
        return list(
            Assignment.objects.filter(reader=self.reader, example__task=task)
            .open()
            .select_related("example")
            .order_by("queue_order", "pk")
        )

    def adjudications(self) -> list[Adjudication]:
        return list(
            Adjudication.objects.filter(adjudicator=self.adjudicator, status=AdjudicationStatus.OPEN).order_by("pk")
        )

    def pages(self) -> dict[str, tuple[AbstractBaseUser | None, list[str]]]:
        """Every page of every role: role -> (user, paths)."""
        slug = self.study.slug
        example = Example.objects.filter(study=self.study, task=Task.EQUIVALENCE).order_by("pk").first()
        return {
            "anonymous": (
                None,
                [
                    reverse("login"),
                    reverse("password_reset"),
                    reverse("password_reset_done"),
                    reverse("password_reset_confirm", args=["MQ", "no-longer-valid"]),
                    reverse("password_reset_complete"),
                ],
            ),
            "no role": (
                self.nobody,
                [reverse("home"), reverse("preferences"), reverse("password_change"), reverse("password_change_done")],
            ),
            "reader": (
                self.reader,
                [
                    reverse("reader_home"),
                    reverse("reading_page", args=[self.reader_items(Task.REALISM)[0].public_id]),
                    reverse("reading_page", args=[self.reader_items(Task.EQUIVALENCE)[0].public_id]),
                    reverse("reader_guide", args=[slug]),
                    reverse("preferences"),
                ],
            ),
            "reader practising": (
                self.practice_reader,
                [reverse("practice_page", args=[PracticeAttempt.objects.get(reader=self.practice_reader).public_id])],
            ),
            "reader with a changed guide": (self.guide_reader, [reverse("reader_guide", args=[slug])]),
            "adjudicator": (
                self.adjudicator,
                [reverse("reader_home"), reverse("adjudication_page", args=[self.adjudications()[0].public_id])],
            ),
            "coordinator": (
                self.coordinator,
                [
                    reverse("study_list"),
                    reverse("study_detail", args=[slug]),
                    reverse("study_progress", args=[slug]),
                    reverse("study_readers", args=[slug]),
                    reverse("study_unrouted", args=[slug]),
                    reverse("study_examples", args=[slug]),
                    reverse("example_detail", args=[slug, example.public_id]),
                    reverse("reader_detail", args=[slug, self.reader.get_username()]),
                    reverse("study_results", args=[slug]),
                    reverse("study_guide", args=[slug]),
                    reverse("locked_logins"),
                    reverse("api_tokens"),
                    reverse("preferences"),
                ],
            ),
            "data manager": (
                self.data_manager,
                # Home is the releases page: the studies, their state and last release.
                [
                    reverse("home"),
                    reverse("release_list", args=[slug]),
                    reverse("study_results", args=[slug]),
                    reverse("preferences"),
                ],
            ),
        }


def make_world() -> World:
    """Three pairs: two Task 2 examples split three ways (two open adjudications), the rest open."""
    # Six readers take the initial reads (one item of each exam each); one more takes the splits' third reads.
    study, readers, adjudicators = make_reading_study(pairs=3, readers_beyond_initial=1, slug="chest")
    study.name = "Chest study"
    study.save(update_fields=["name"])
    equivalence = list(Example.objects.filter(study=study, task=Task.EQUIVALENCE).order_by("pk"))
    for example in equivalence[:2]:
        rate_open_reads(
            example, RatingChoice.EQUIVALENT, RatingChoice.MINOR_DISCREPANCY, RatingChoice.MAJOR_DISCREPANCY
        )
    data_manager = make_user(Role.DATA_MANAGER)
    make_release(study, status=ReleaseStatus.FAILED, user=data_manager, error="The disk was full.")
    make_release(study, status=ReleaseStatus.QUEUED, user=data_manager, version="1.0.1")
    world = World(
        study=study,
        reader=readers[0],
        adjudicator=adjudicators[0],
        coordinator=make_user(Role.COORDINATOR),
        data_manager=data_manager,
        nobody=make_user(),
    )
    for reader in readers:
        world.reader = reader
        if len(world.reader_items(Task.REALISM)) >= 2 and world.reader_items(Task.EQUIVALENCE):
            break
    else:
        raise AssertionError("no reader has two Task 1 items and a Task 2 item open")
    assert len(world.adjudications()) == 2, "the two three-way splits should wait for the adjudicator"
    _add_guide_practice_and_a_lockout(world, readers)
    return world


def _add_guide_practice_and_a_lockout(world: World, readers: list[AbstractBaseUser]) -> None:
    """A guide in two versions, a practice round for one reader, a locked account: their pages have content."""
    study = world.study
    others = [reader for reader in readers if reader != world.reader]
    world.practice_reader, world.guide_reader = others[0], others[1]
    everyone = [*readers, world.adjudicator]
    publish_guide(study, "# Rating realism\n\n- Rate the Findings and Impression only.\n", author=world.coordinator)
    for person in everyone:
        confirm_guide(person, study, 1)
    guide_text = "# Rating realism\n\n- Rate the Findings and Impression only.\n- Ignore the Technique.\n"
    publish_guide(study, guide_text, author=world.coordinator)
    for person in everyone:
        if person != world.guide_reader:
            confirm_guide(person, study, 2)
    import_practice_items(study, practice_file(practice_row(1)), filename="practice.csv")
    study.practice_items_required = 1
    study.save(update_fields=["practice_items_required"])
    StudyMember.objects.filter(study=study).exclude(user=world.practice_reader).update(skip_practice=True)
    assert next_practice(world.practice_reader, study, Task.REALISM) is not None
    make_token(world.coordinator, name="release sync on the lab server")
    make_token(world.reader, name="a long token name " * 3)
    AccessAttempt.objects.create(
        username=make_user(Role.READER).get_username(),
        ip_address="10.0.0.9",
        user_agent="",
        http_accept="",
        path_info="/accounts/login/",
        get_data="",
        post_data="",
        attempt_time=timezone.now(),
        failures_since_start=settings.AXES_FAILURE_LIMIT,
    )


_axe = Axe()


def axe_violations(page: Page) -> list[str]:
    """axe-core's WCAG 2.2 A/AA violations on the page, one line per rule with its elements."""
    results = _axe.run(page, options={"runOnly": {"type": "tag", "values": AXE_TAGS}, "resultTypes": ["violations"]})
    return [
        f"{violation['id']} ({violation['impact']}): {violation['help']} at "
        + ", ".join(str(node["target"]) for node in violation["nodes"][:5])
        for violation in results.response["violations"]
    ]


def scroll_widths(page: Page) -> tuple[int, int]:
    """(scrollWidth, clientWidth) of the page: the first larger means the page scrolls sideways."""
    return tuple(page.evaluate("[document.documentElement.scrollWidth, document.documentElement.clientWidth]"))


# What a person sees of the focus ring: its two tones and the background around the element.
FOCUS_RING_JS = """
() => {
  const el = document.activeElement;
  const parse = (color) => {
    const m = color.match(/rgba?\\(([^)]+)\\)/);
    if (!m) return null;
    const [r, g, b, a] = m[1].split(/[ ,/]+/).filter(Boolean).map(Number);
    return { r, g, b, a: a === undefined ? 1 : a };
  };
  let node = el.parentElement, background = null;
  while (node) {
    const c = parse(getComputedStyle(node).backgroundColor);
    if (c && c.a > 0) { background = c; break; }
    node = node.parentElement;
  }
  const style = getComputedStyle(el);
  const shadow = style.boxShadow.match(/rgba?\\([^)]+\\)/);
  return {
    element: el.tagName.toLowerCase() + (el.id ? "#" + el.id : "") + (el.className ? "." + el.className : ""),
    outlineStyle: style.outlineStyle,
    outlineWidth: parseFloat(style.outlineWidth),
    outline: parse(style.outlineColor),
    inner: shadow ? parse(shadow[0]) : null,
    background: background || { r: 255, g: 255, b: 255, a: 1 },
  };
}
"""


def luminance(color: dict) -> float:
    def channel(value: float) -> float:
        value /= 255
        return value / 12.92 if value <= 0.04045 else ((value + 0.055) / 1.055) ** 2.4

    return 0.2126 * channel(color["r"]) + 0.7152 * channel(color["g"]) + 0.0722 * channel(color["b"])


def contrast(first: dict, second: dict) -> float:
    """WCAG contrast ratio of two opaque colours."""
    high, low = sorted((luminance(first), luminance(second)), reverse=True)
    return (high + 0.05) / (low + 0.05)


def focus_ring(page: Page) -> dict:
    """The focused element's ring: contrast of the outer tone with the background, of the inner with the outer."""
    ring = page.evaluate(FOCUS_RING_JS)
    ring["outer_vs_background"] = contrast(ring["outline"], ring["background"]) if ring["outline"] else 0.0
    ring["inner_vs_outer"] = contrast(ring["inner"], ring["outline"]) if ring["inner"] and ring["outline"] else 0.0
    return ring


def link_names(page: Page) -> Iterator[tuple[str, str]]:
    """(accessible name, href) of every link in the main content, as a screen reader lists them."""
    pairs = page.evaluate(
        """() => Array.from(document.querySelectorAll("main a[href]")).map((a) =>
             [(a.getAttribute("aria-label") || a.textContent).replace(/\\s+/g, " ").trim(), a.getAttribute("href")])"""
    )
    yield from (tuple(pair) for pair in pairs)
