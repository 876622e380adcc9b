"""A study's reader guide: versions written by its coordinator, confirmed by its readers.

The guide is Markdown. It is rendered by markdown-it-py with raw HTML off, then cleaned by
nh3 (an allow-list HTML sanitizer) to a small set of text tags, so nothing a coordinator
writes can run script or load anything; pages show it under the strict CSP as well.
"""

import difflib
from dataclasses import dataclass

import nh3
from django.contrib.auth.models import AbstractBaseUser
from django.db import IntegrityError, transaction
from django.utils.safestring import SafeString, mark_safe

from annotation.models import (
    GUIDE_MAX_LENGTH,
    AuditAction,
    AuditEvent,
    GuideAcknowledgement,
    GuideVersion,
    Study,
    StudyMember,
)

# What a guide may contain once rendered: text structure, emphasis, links, tables. No images
# (a tracking pixel), no forms, no styles, no scripts, no iframes.
ALLOWED_TAGS = {
    "a", "p", "br", "hr", "h1", "h2", "h3", "h4", "h5", "h6", "strong", "em", "s", "del", "code", "pre",
    "blockquote", "ul", "ol", "li", "table", "thead", "tbody", "tr", "th", "td",
}  # fmt: skip
ALLOWED_ATTRIBUTES = {"a": {"href", "title"}, "ol": {"start"}, "th": {"align"}, "td": {"align"}}
LINK_SCHEMES = {"http", "https", "mailto"}


class GuideRefused(Exception):
    """A guide cannot be published or confirmed; the message says why and what to do."""


def render_guide(text: str) -> SafeString:
    """The guide's Markdown as sanitized HTML, safe to put in a page as it is."""
    # Imported here: a web worker that never shows a guide does not load the parser at start-up.
    from markdown_it import MarkdownIt

    markdown = MarkdownIt("commonmark", {"html": False, "linkify": False}).enable(["table", "strikethrough"])
    html = markdown.render(text)
    clean = nh3.clean(
        html,
        tags=ALLOWED_TAGS,
        attributes=ALLOWED_ATTRIBUTES,
        url_schemes=LINK_SCHEMES,
        link_rel="noopener noreferrer nofollow",
        strip_comments=True,
    )
    return mark_safe(clean)  # noqa: S308 -- cleaned by nh3 to the allow-list above


def publish_guide(study: Study, text: str, *, author: AbstractBaseUser | None) -> tuple[GuideVersion, bool]:
    """Make text the study's guide: a new version, unless it equals the current one.

    Returns (version, created). Old versions are kept; readers confirm the new one before
    their next item. Refused (GuideRefused) if the text is empty or too long.
    """
    text = text.replace("\r\n", "\n")
    if not text.strip():
        raise GuideRefused("The guide is empty. Write the guide in Markdown.")
    if len(text) > GUIDE_MAX_LENGTH:
        raise GuideRefused(
            f"The guide is {len(text):,} characters long; the limit is {GUIDE_MAX_LENGTH:,}. Shorten it."
        )
    with transaction.atomic():
        # The study row's lock serializes two coordinators saving at once: numbers follow each other.
        Study.objects.select_for_update().filter(pk=study.pk).first()
        current = GuideVersion.objects.current(study)
        if current is not None and current.text == text:
            return current, False
        version = GuideVersion.objects.create(
            study=study, number=(current.number + 1) if current else 1, text=text, author=author
        )
        Study.objects.filter(pk=study.pk).update(guide_number=version.number)
        study.guide_number = version.number
        AuditEvent.objects.record(
            AuditAction.GUIDE_PUBLISHED,
            study=study,
            actor=author,
            after={"guide_version": version.number, "characters": len(text)},
        )
    return version, True


def confirmed_version(reader: AbstractBaseUser, study: Study | int) -> GuideVersion | None:
    """The newest guide version the reader has confirmed in this study (None if none)."""
    ack = (
        GuideAcknowledgement.objects.filter(reader=reader, study=study)
        .select_related("version")
        .order_by("-version__number")
        .first()
    )
    return ack.version if ack else None


@dataclass(frozen=True)
class GuideStatus:
    current: GuideVersion | None
    confirmed: GuideVersion | None

    @property
    def needs_confirmation(self) -> bool:
        return self.current is not None and (self.confirmed is None or self.confirmed.number < self.current.number)


def guide_status(reader: AbstractBaseUser, study: Study) -> GuideStatus:
    """The study's current guide and the newest version this reader confirmed (two queries; none
    for a study without a guide)."""
    if not study.guide_number:
        return GuideStatus(current=None, confirmed=None)
    return GuideStatus(current=GuideVersion.objects.current(study), confirmed=confirmed_version(reader, study))


def needs_confirmation(reader: AbstractBaseUser, study: Study) -> bool:
    """Whether the reader must confirm the study's current guide before their next item.

    No query for a study without a guide, one otherwise (the study row says which version is current).
    """
    if not study.guide_number:
        return False
    return not GuideAcknowledgement.objects.filter(
        reader=reader, study=study, version__number__gte=study.guide_number
    ).exists()


def confirmed_version_id(reader: AbstractBaseUser, study: Study) -> int | None:
    """The id of the newest guide version the reader confirmed (None, without a query, if the study
    has no guide): what an annotation records as the guide in force when it was made."""
    if not study.guide_number:
        return None
    return (
        GuideAcknowledgement.objects.filter(reader=reader, study=study)
        .order_by("-version__number")
        .values_list("version_id", flat=True)
        .first()
    )


def confirm_guide(reader: AbstractBaseUser, study: Study, number: int) -> tuple[GuideAcknowledgement, bool]:
    """Record that the reader read version `number` of the study's guide (timestamped and audited).

    Only the current version can be confirmed: if the guide changed since the reader opened it,
    GuideRefused says so and they read the new one. Confirming twice stores one row.
    """
    current = GuideVersion.objects.current(study)
    if current is None:
        raise GuideRefused("This study has no guide to confirm.")
    if number != current.number:
        raise GuideRefused(
            f"The guide changed while you were reading it (you read version {number}, the current one is "
            f"version {current.number}). Read the current version and confirm it."
        )
    try:
        with transaction.atomic():
            ack = GuideAcknowledgement.objects.create(version=current, study=study, reader=reader)
            AuditEvent.objects.record(
                AuditAction.GUIDE_CONFIRMED,
                study=study,
                actor=reader,
                subject=reader,
                after={"guide_version": current.number},
            )
    except IntegrityError:
        return GuideAcknowledgement.objects.get(version=current, reader=reader), False
    return ack, True


@dataclass(frozen=True)
class ChangedLine:
    kind: str  # "added", "removed" or "same"
    text: str


def guide_changes(old_text: str, new_text: str) -> list[ChangedLine]:
    """What changed from one version's Markdown to another's, line by line (kept lines included)."""
    kinds = {"+ ": "added", "- ": "removed", "  ": "same"}
    return [
        ChangedLine(kinds[line[:2]], line[2:])
        for line in difflib.ndiff(old_text.splitlines(), new_text.splitlines())
        if line[:2] in kinds
    ]


def confirmations(study: Study) -> list[dict]:
    """Who confirmed which version: one row per reader or adjudicator of the study (and anyone
    who confirmed), with the newest version they confirmed and when. Two queries."""
    latest: dict[int, GuideAcknowledgement] = {}
    for ack in (
        GuideAcknowledgement.objects.filter(study=study).select_related("version", "reader").order_by("version__number")
    ):
        latest[ack.reader_id] = ack
    members = {}
    for member in StudyMember.objects.filter(study=study).select_related("user").order_by("user__username"):
        members.setdefault(member.user_id, member.user)
    for ack in latest.values():
        members.setdefault(ack.reader_id, ack.reader)
    rows = []
    for user_id, user in members.items():
        ack = latest.get(user_id)
        rows.append(
            {
                "username": user.get_username(),
                "version": ack.version.number if ack else None,
                "confirmed_at": ack.created_at if ack else None,
            }
        )
    rows.sort(key=lambda row: row["username"])
    return rows
