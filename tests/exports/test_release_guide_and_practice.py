"""Guide versions and practice never reach a release; --include-guide adds guide.md, and only it."""

import hashlib
import uuid
from pathlib import Path

import pytest
from django.core.management import call_command
from django.db import connection

from annotation.guide import confirm_guide, publish_guide
from annotation.models import (
    Annotation,
    GuideAcknowledgement,
    GuideVersion,
    PracticeAttempt,
    PracticeItem,
    RatingChoice,
    Study,
    Task,
)
from annotation.practice import import_practice_items, next_practice, show_practice, submit_practice
from exports.building import ReleaseRefused, build_release
from tests.annotation.test_practice import practice_file, practice_row
from tests.factories import make_reading_study, rate_open_reads

pytestmark = pytest.mark.django_db

LICENSE = "Test licence.\n"
GUIDE = "# Guide\n\nRate **Findings** and *Impression*.\r\nA browser's CR LF is stored as LF.\n"
# guide.md holds the guide exactly as stored.
STORED = GUIDE.replace("\r\n", "\n").encode()


def files_of(folder: Path) -> dict[str, bytes]:
    return {p.relative_to(folder).as_posix(): p.read_bytes() for p in folder.rglob("*") if p.is_file()}


def build(study: Study, out: Path, **options) -> dict[str, bytes]:
    build_release(Study.objects.get(pk=study.pk), out, license_text=LICENSE, **options)
    return files_of(out)


@pytest.fixture
def study_with_guide_and_practice():
    """A study rated to consensus by readers who confirmed two guide versions and practised first."""
    study, readers, _ = make_reading_study(pairs=2, readers=6)
    publish_guide(study, "Version one.", author=None)
    publish_guide(study, GUIDE, author=None)
    import_practice_items(study, practice_file(practice_row(1)), filename="p.csv")
    for reader in readers:
        confirm_guide(reader, study, 2)
    study.practice_items_required = 1
    study.save(update_fields=["practice_items_required"])
    for reader in readers[:3]:
        attempt = show_practice(next_practice(reader, study, Task.REALISM))
        submit_practice(reader=reader, attempt_id=attempt.public_id, rating=RatingChoice.MAJOR_ISSUES, rationale="Odd.",
                        form_token=uuid.uuid4())  # fmt: skip
    for example in study.examples.order_by("pk"):
        agree = RatingChoice.REALISTIC if example.task == Task.REALISM else RatingChoice.EQUIVALENT
        rate_open_reads(example, agree, agree)
    assert Annotation.objects.filter(guide_version__number=2).count() == Annotation.objects.count() > 0
    return study


def _strip_guide_and_practice(study: Study) -> None:
    """The same study as if it had never had a guide or practice (test-only surgery)."""
    Annotation.objects.filter(example__study=study).update(guide_version=None)
    PracticeAttempt.objects.filter(study=study).delete()
    PracticeItem.objects.filter(study=study).delete()
    with connection.cursor() as cursor:
        if connection.vendor == "postgresql":
            # The append-only triggers refuse deletes; replica mode skips them for this test only.
            cursor.execute("SET LOCAL session_replication_role = replica")
        for model in (GuideAcknowledgement, GuideVersion):
            cursor.execute(f"DELETE FROM {model._meta.db_table} WHERE study_id = %s", [study.pk])  # noqa: S608
        if connection.vendor == "postgresql":
            cursor.execute("SET LOCAL session_replication_role = origin")
    Study.objects.filter(pk=study.pk).update(guide_number=0, practice_items_required=0)


def test_the_default_release_is_byte_for_byte_the_release_without_guide_and_practice(
    study_with_guide_and_practice, tmp_path
):
    study = study_with_guide_and_practice

    with_them = build(study, tmp_path / "with")
    _strip_guide_and_practice(study)
    assert not GuideVersion.objects.exists() and not PracticeItem.objects.exists()
    without_them = build(study, tmp_path / "without")

    assert with_them == without_them
    assert "guide.md" not in with_them
    everything = b"".join(with_them.values())
    for trace in (b"Version one.", b"Rate **Findings**", b"Routine wording", b"Practice 1", b"Odd."):
        assert trace not in everything


def test_include_guide_adds_guide_md_listed_in_the_readme_and_checksums(study_with_guide_and_practice, tmp_path):
    study = study_with_guide_and_practice

    plain = build(study, tmp_path / "plain")
    with_guide = build(study, tmp_path / "guide", include_guide=True)

    assert with_guide["guide.md"] == STORED
    assert set(with_guide) - set(plain) == {"guide.md"}
    for name in set(plain) - {"README.md", "SHA256SUMS.txt"}:
        assert with_guide[name] == plain[name]
    readme = with_guide["README.md"].decode()
    assert "| `guide.md` | | the reader guide (Markdown), version 2:" in readme
    assert "guide.md" not in plain["README.md"].decode()
    sums = with_guide["SHA256SUMS.txt"].decode().splitlines()
    assert f"{hashlib.sha256(STORED).hexdigest()} guide.md" in sums
    assert [line.split(" ", 1)[1] for line in sums] == sorted(
        (name for name in with_guide if name != "SHA256SUMS.txt"), key=str.encode
    )


def test_include_guide_is_refused_for_a_study_without_a_guide(tmp_path):
    study, _, _ = make_reading_study(pairs=1, readers=4)

    with pytest.raises(ReleaseRefused) as refused:
        build(study, tmp_path / "out", include_guide=True)
    assert str(refused.value) == "This study has no reader guide to include. Write one, or build without it."
    assert not (tmp_path / "out").exists()


def test_export_release_takes_include_guide(study_with_guide_and_practice, tmp_path):
    study = study_with_guide_and_practice

    Study.objects.filter(pk=study.pk).update(license_text=LICENSE)
    call_command("export_release", "--study", study.slug, "--out", str(tmp_path / "r"), "--include-guide",
                 "--no-progress")  # fmt: skip

    assert (tmp_path / "r" / "guide.md").read_bytes() == STORED
