"""The release folder of RELEASE.md, byte by byte.

Most tests read one release of the published replay (120 MIMIC-CXR pairs), which takes a while
to rate, so it is built once for this module inside a transaction that is rolled back at the
end; each test runs in a savepoint of it, so what a test changes is gone for the next one.
"""

import csv
import hashlib
import io
import json
import re
import shutil
import statistics
import subprocess
import uuid
import zipfile
from collections import Counter, defaultdict
from pathlib import Path

import pandas
import pytest
from django.conf import settings
from django.contrib.auth import get_user_model
from django.core.management import CommandError, call_command
from django.db import transaction
from django.db.models import F, Value
from django.db.models.functions import Concat
from django.utils import timezone
from frictionless import Package

from annotation.models import (
    Annotation,
    Assignment,
    AuditEvent,
    CandidatePair,
    Example,
    MemberRole,
    RatingChoice,
    ReportType,
    Role,
    Study,
    StudyMember,
    Task,
    Variation,
)
from annotation.services import sample_pairs
from consensus.assignment import assign_readers
from consensus.models import Adjudication, ConsensusLabel, LabelSource
from consensus.services import submit_adjudication, void_annotation
from exports import rows as release_rows
from exports.building import ReleaseRefused, build_release, zip_release
from exports.models import Release, ReleaseStatus
from tests.factories import make_pair, make_reading_study, make_study, make_user, rate, rate_open_reads
from tests.module_data import rolled_back
from tests.replay import build_published_replay

pytestmark = pytest.mark.django_db

DATAPACKAGE = Path(settings.BASE_DIR) / "exports" / "datapackage.json"
LICENSE = "Open Data Commons Attribution License v1.0\n\nExactly these bytes: é\r\n"

# Copied from RELEASE.md, not from the code under test.
HEADERS = {
    "task1/task1_full.csv": b"dataset,study_id,reref_variation,report_type,annotation_index,rating,rationale,"
    b"indication,comparison,technique,findings,impression\r\n",
    "task1/task1_disagreed.csv": b"dataset,study_id,reref_variation,report_type,rating,rationale\r\n",
    "task1/task1_consensus.csv": b"dataset,study_id,reref_variation,report_type,rating,label_source,n_annotations\r\n",
    "task2/task2_full.csv": b"dataset,study_id,reref_variation,annotation_index,report_a_type,rating,rationale,"
    b"indication,comparison,technique,report_a_findings,report_a_impression,report_b_findings,"
    b"report_b_impression\r\n",
    "task2/task2_disagreed.csv": b"dataset,study_id,reref_variation,rating,rationale\r\n",
    "task2/task2_consensus.csv": b"dataset,study_id,reref_variation,rating,label_source,n_annotations\r\n",
}
# Only in a build with include_judges (export_release --include-judges).
JUDGE_HEADERS = {
    "judges/task1_judges.csv": b"dataset,study_id,reref_variation,report_type,judge_index,rating,rationale\r\n",
    "judges/task2_judges.csv": b"dataset,study_id,reref_variation,judge_index,report_a_type,rating,rationale\r\n",
}
LAYOUT = {"README.md", "LICENSE.txt", "SHA256SUMS.txt", *HEADERS}
LABELS = {
    "task1": ("Realistic", "Minor Issues", "Major Issues"),
    "task2": ("Equivalent", "Minor Discrepancy", "Major Discrepancy"),
}
KEYS = {
    "task1": ("dataset", "study_id", "reref_variation", "report_type"),
    "task2": ("dataset", "study_id", "reref_variation"),
}
# Fields an --include-unfinished build may leave empty, as exports/datapackage.json describes.
UNFINISHED_RELAXED = {
    "task1_consensus": {"rating", "label_source", "n_annotations"},
    "task2_consensus": {"rating", "label_source", "n_annotations"},
    "task1_disagreed": {"rating", "rationale"},
    "task2_disagreed": {"rating", "rationale"},
}
# Everything a spreadsheet, a CSV writer or a text pipeline might mangle.
HOSTILE = {
    "indication": '=HYPERLINK("http://x.invalid"),"quoted", a comma\r\nCRLF\rlone CR\nLF  \r\n',
    "comparison": "+1 trailing spaces   ",
    "technique": "-2 tab\there, NEL\x85and LS\u2028and PS\u2029end\r",
    "original_findings": '@SUM(A1) é ± 中文 😀 ""doubled"" quotes\n\nblank line above ',
    "original_impression": ' leading space, then "a quote" and a final CR\r',
    "alternative_findings": "\r\nstarts with CRLF, ends with LF\n",
    "alternative_impression": "\u00a0non-breaking\u00a0spaces\u00a0and \u2018curly\u2019 \u201cquotes\u201d, \uffe5",
}


def hostile_rationale(tag: str) -> str:
    # The service strips the ends of a rationale; everything inside is kept.
    return f'={tag}, "said",  trailing  \r\nnext\rline\nand é ± 中文 😀 +1 -2 @x'


@pytest.fixture(scope="module")
def replay(django_db_setup, django_db_blocker):
    """The published replay, built once for the module and rolled back after it."""
    with rolled_back(django_db_blocker):
        study, plans = build_published_replay(slug="release-replay")
        yield study, plans


@pytest.fixture
def replay_release(replay, tmp_path) -> Path:
    study, _ = replay
    return build(study, tmp_path / "release", datasets=["mimic-cxr"])


def build(study: Study, out: Path, **options) -> Path:
    options.setdefault("license_text", LICENSE)
    build_release(Study.objects.get(pk=study.pk), out, **options)
    return out


def files_of(folder: Path) -> dict[str, bytes]:
    return {p.relative_to(folder).as_posix(): p.read_bytes() for p in folder.rglob("*") if p.is_file()}


def records(folder: Path, name: str) -> list[dict[str, str]]:
    """A CSV file as a research user reads it."""
    frame = pandas.read_csv(folder / name, dtype=str, keep_default_na=False)
    return frame.to_dict("records")


def rfc4180(rows: list[list[str]]) -> bytes:
    """The bytes RELEASE.md asks for: quoted only when holding a comma, quote, CR or LF; CRLF."""

    def field(value: str) -> str:
        if any(c in value for c in ',"\r\n'):
            return '"' + value.replace('"', '""') + '"'
        return value

    return "".join(",".join(field(v) for v in row) + "\r\n" for row in rows).encode("utf-8")


def key_of(row: dict[str, str], task: str) -> tuple[str, ...]:
    return tuple(row[column] for column in KEYS[task])


def package_descriptor(*, include_judges: bool = False) -> dict:
    """The descriptor; without include_judges its two judges resources are dropped, as it says to."""
    descriptor = json.loads(DATAPACKAGE.read_text(encoding="utf-8"))
    if not include_judges:
        descriptor["resources"] = [r for r in descriptor["resources"] if r["path"] not in JUDGE_HEADERS]
    return descriptor


def validate(folder: Path, descriptor: dict | None = None):
    return Package(descriptor or package_descriptor(), basepath=str(folder)).validate()


def rated_study(*datasets: str, slug: str | None = None) -> Study:
    """A small study with one pair per dataset, every example rated to a unanimous consensus."""
    study = make_study(slug)
    for i, dataset in enumerate(datasets):
        make_pair(study, dataset=dataset, study_id=str(700 + i))
    sample_pairs(study, per_variation=len(datasets), seed=1)
    # A reader gets at most one item of an exam: its three items need six readers.
    for _ in range(6):
        StudyMember.objects.create(study=study, user=make_user(Role.READER), role=MemberRole.READER)
    assign_readers(study, actor=make_user(Role.COORDINATOR))
    for example in Example.objects.filter(study=study):
        rating = RatingChoice.REALISTIC if example.task == Task.REALISM else RatingChoice.EQUIVALENT
        rate_open_reads(example, rating, rating)
    return study


def decide(example: Example, rating: str, rationale: str) -> None:
    adjudication = Adjudication.objects.get(example=example, status="open")
    submit_adjudication(
        adjudicator=adjudication.adjudicator,
        adjudication_id=adjudication.public_id,
        rating=rating,
        rationale=rationale,
        form_token=uuid.uuid4(),
    )


def assert_full_files_match_the_database(folder: Path, study: Study, *, released: set[int]) -> None:
    """Every row of both full files is one valid annotation of a released example, with its text."""
    pairs = {
        (p.dataset.key, p.source_study_id, p.variation.key): p
        for p in CandidatePair.objects.filter(study=study).select_related("dataset", "variation")
    }
    expected = {"task1": defaultdict(Counter), "task2": defaultdict(Counter)}
    for a in Annotation.objects.filter(example__in=released, voided_at__isnull=True).select_related(
        "example__pair__dataset", "example__pair__variation"
    ):
        pair = a.example.pair
        keys = (pair.dataset.key, pair.source_study_id, pair.variation.key)
        if a.task == Task.REALISM:
            expected["task1"][(*keys, a.example.report_type)][(RatingChoice(a.rating).label, a.rationale)] += 1
        else:
            expected["task2"][keys][(a.report_a_type, RatingChoice(a.rating).label, a.rationale)] += 1

    found = {"task1": defaultdict(Counter), "task2": defaultdict(Counter)}
    for task in ("task1", "task2"):
        for row in records(folder, f"{task}/{task}_full.csv"):
            pair = pairs[(row["dataset"], row["study_id"], row["reref_variation"])]
            assert (row["indication"], row["comparison"], row["technique"]) == (
                pair.indication,
                pair.comparison,
                pair.technique,
            )
            if task == "task1":
                assert (row["findings"], row["impression"]) == pair.report(row["report_type"])
                found[task][key_of(row, task)][(row["rating"], row["rationale"])] += 1
            else:
                other = ReportType.ALTERNATIVE if row["report_a_type"] == ReportType.ORIGINAL else ReportType.ORIGINAL
                assert (row["report_a_findings"], row["report_a_impression"]) == pair.report(row["report_a_type"])
                assert (row["report_b_findings"], row["report_b_impression"]) == pair.report(other)
                found[task][key_of(row, task)][(row["report_a_type"], row["rating"], row["rationale"])] += 1
    assert found == expected


# --- The published replay ------------------------------------------------------------------


def test_the_replay_release_has_the_published_row_counts(replay_release):
    counts = {name: len(records(replay_release, name)) for name in HEADERS}
    assert counts == {
        "task1/task1_full.csv": 573,
        "task1/task1_disagreed.csv": 15,
        "task1/task1_consensus.csv": 240,
        "task2/task2_full.csv": 282,
        "task2/task2_disagreed.csv": 1,
        "task2/task2_consensus.csv": 120,
    }


def test_the_release_folder_holds_exactly_the_layout(replay_release):
    assert set(files_of(replay_release)) == LAYOUT
    assert (replay_release / "LICENSE.txt").read_bytes() == LICENSE.encode("utf-8")


def test_every_csv_is_rfc4180_utf8_with_crlf_and_the_exact_header(replay_release):
    for name, header in HEADERS.items():
        data = (replay_release / name).read_bytes()
        assert data.startswith(header), name
        assert not data.startswith(b"\xef\xbb\xbf")
        text = data.decode("utf-8")
        rows = list(csv.reader(io.StringIO(text, newline="")))
        assert rfc4180(rows) == data, f"{name} is not written as RELEASE.md says"
        assert data.endswith(b"\r\n")
        assert b"\n" not in data.replace(b"\r\n", b""), f"{name}: a bare LF between records"


def test_rows_are_sorted_by_their_key_columns(replay_release):
    for name in HEADERS:
        task = name[:5]
        rows = records(replay_release, name)
        if name.endswith("_full.csv"):
            keys = [(*key_of(r, task), int(r["annotation_index"])) for r in rows]
        else:
            keys = [key_of(r, task) for r in rows]
        assert keys == sorted(keys), name
        assert len(set(keys)) == len(keys), f"{name}: a key twice"


def test_keys_sort_by_code_point_not_as_numbers_by_locale_or_by_taxonomy_position(tmp_path):
    study = make_study()
    for dataset in ("mimic-cxr", "iu-xray"):
        for study_id in ("9", "10", "a7", "B7", "_x", "\u00c91"):
            for variation in ("terminology", "hedging"):  # positions 8 and 9 of the taxonomy
                pair = make_pair(study, dataset=dataset, study_id=study_id, variation=variation)
                Example.objects.create(study=study, pair=pair, task=Task.EQUIVALENCE)
    release = build(study, tmp_path / "release", include_unfinished=True)
    keys = [key_of(row, "task2") for row in records(release, "task2/task2_consensus.csv")]
    assert len(keys) == 24
    assert keys == sorted(keys)
    assert keys[:5] == [
        ("iu-xray", "10", "hedging"),
        ("iu-xray", "10", "terminology"),
        ("iu-xray", "9", "hedging"),
        ("iu-xray", "9", "terminology"),
        ("iu-xray", "B7", "hedging"),
    ]
    assert [k[1] for k in keys[:12:2]] == ["10", "9", "B7", "_x", "a7", "\u00c91"]


def test_ratings_are_written_as_the_readers_saw_them(replay_release):
    for name in HEADERS:
        task = name[:5]
        ratings = Counter(r["rating"] for r in records(replay_release, name))
        assert set(ratings) <= set(LABELS[task]), name
    assert b",Minor Issues," in (replay_release / "task1/task1_full.csv").read_bytes()
    assert b",Major Discrepancy," in (replay_release / "task2/task2_full.csv").read_bytes()


def test_a_rationale_is_empty_only_for_realistic_and_equivalent(replay_release):
    for task in ("task1", "task2"):
        for row in records(replay_release, f"{task}/{task}_full.csv"):
            if row["rating"] not in ("Realistic", "Equivalent"):
                assert row["rationale"], row
        for row in records(replay_release, f"{task}/{task}_disagreed.csv"):
            assert row["rationale"], row


def test_annotation_index_numbers_each_examples_annotations_from_zero(replay_release):
    for task in ("task1", "task2"):
        indexes = defaultdict(list)
        for row in records(replay_release, f"{task}/{task}_full.csv"):
            indexes[key_of(row, task)].append(int(row["annotation_index"]))
        consensus = {key_of(r, task): r for r in records(replay_release, f"{task}/{task}_consensus.csv")}
        assert set(indexes) == set(consensus)
        for key, found in indexes.items():
            assert found == list(range(len(found))), key
            assert consensus[key]["n_annotations"] == str(len(found))
        assert Counter(len(found) for found in indexes.values()) == (
            {2: 147, 3: 93} if task == "task1" else {2: 78, 3: 42}
        )


def test_the_consensus_follows_from_the_annotations_and_the_adjudications(replay, replay_release):
    _, plans = replay
    for task in ("task1", "task2"):
        reads = defaultdict(list)
        for row in records(replay_release, f"{task}/{task}_full.csv"):
            reads[key_of(row, task)].append(row["rating"])
        adjudicated = {key_of(r, task): r["rating"] for r in records(replay_release, f"{task}/{task}_disagreed.csv")}
        sources = Counter()
        for row in records(replay_release, f"{task}/{task}_consensus.csv"):
            key, votes = key_of(row, task), Counter(reads[key_of(row, task)])
            sources[row["label_source"]] += 1
            if row["label_source"] == "unanimous":
                assert row["n_annotations"] == "2" and votes == {row["rating"]: 2}
            elif row["label_source"] == "majority":
                assert row["n_annotations"] == "3" and votes[row["rating"]] == 2
            else:
                assert row["label_source"] == "adjudicated"
                assert row["n_annotations"] == "3" and len(votes) == 3
                assert adjudicated[key] == row["rating"]
        assert set(adjudicated) == {k for k, n in reads.items() if len(set(n)) == 3}
        published = {"task1": (147, 78, 15), "task2": (78, 41, 1)}[task]
        assert (sources["unanimous"], sources["majority"], sources["adjudicated"]) == published
    planned = Counter((p.label_source, RatingChoice(p.consensus).label) for p in plans.values())
    written = Counter(
        (r["label_source"], r["rating"])
        for task in ("task1", "task2")
        for r in records(replay_release, f"{task}/{task}_consensus.csv")
    )
    assert written == planned


def test_full_files_hold_each_annotation_with_the_text_its_reader_saw(replay, replay_release):
    study, _ = replay
    released = set(Example.objects.filter(study=study).values_list("pk", flat=True))
    assert_full_files_match_the_database(replay_release, study, released=released)
    for row in records(replay_release, "task2/task2_full.csv"):
        assert row["report_a_type"] in ("original", "alternative")
    for row in records(replay_release, "task1/task1_full.csv"):
        assert row["report_type"] in ("original", "alternative")


def test_sha256sums_lists_every_other_file_in_byte_order_with_one_space(replay_release):
    data = (replay_release / "SHA256SUMS.txt").read_bytes()
    assert data.endswith(b"\n") and b"\r" not in data
    lines = data.decode("utf-8").split("\n")[:-1]
    listed = []
    for line in lines:
        match = re.fullmatch(r"([0-9a-f]{64}) ([^ ].*)", line)
        assert match, line
        digest, path = match.groups()
        assert hashlib.sha256((replay_release / path).read_bytes()).hexdigest() == digest, path
        listed.append(path)
    assert listed == sorted(listed, key=lambda p: p.encode("utf-8"))
    assert set(listed) == LAYOUT - {"SHA256SUMS.txt"}


def test_the_same_database_gives_the_same_bytes_and_the_same_zip(replay, tmp_path):
    study, _ = replay
    first = build(study, tmp_path / "a", datasets=["mimic-cxr"])
    second = build(study, tmp_path / "b", datasets=["mimic-cxr"])
    assert files_of(first) == files_of(second)

    digest_a = zip_release(first, tmp_path / "a.zip", root="replay-1.0.0")
    digest_b = zip_release(second, tmp_path / "b.zip", root="replay-1.0.0")
    assert digest_a == digest_b == hashlib.sha256((tmp_path / "a.zip").read_bytes()).hexdigest()
    assert (tmp_path / "a.zip").read_bytes() == (tmp_path / "b.zip").read_bytes()
    with zipfile.ZipFile(tmp_path / "a.zip") as archive:
        assert {info.filename for info in archive.infolist()} == {f"replay-1.0.0/{name}" for name in LAYOUT}
        for info in archive.infolist():
            assert info.date_time == (1980, 1, 1, 0, 0, 0)
            assert archive.read(info) == (first / info.filename.split("/", 1)[1]).read_bytes()


def test_every_zip_entry_is_a_plain_file_readable_by_everyone_at_a_fixed_time(tmp_path):
    """Unzipped on a shared server, the release's files are rw-r--r-- (zipfile's own default would be
    rw-------), and their time is the zip format's earliest, whatever the day of the build."""
    folder = tmp_path / "release"
    (folder / "task1").mkdir(parents=True)
    (folder / "README.md").write_text("readme")
    (folder / "task1" / "task1_full.csv").write_text("a,b\r\n")

    zip_release(folder, tmp_path / "r.zip", root="s1-1.0.0")

    with zipfile.ZipFile(tmp_path / "r.zip") as archive:
        entries = archive.infolist()
    assert [info.filename for info in entries] == ["s1-1.0.0/README.md", "s1-1.0.0/task1/task1_full.csv"]
    for info in entries:
        assert info.external_attr >> 16 == 0o644
        assert info.date_time == (1980, 1, 1, 0, 0, 0)
        assert info.compress_type == zipfile.ZIP_DEFLATED


def test_annotation_index_is_unrelated_to_submission_order_or_reader(replay, tmp_path):
    study, _ = replay
    # Tag each rationale with its annotation so that rows can be traced back (test only).
    annotations = Annotation.objects.filter(example__study=study)
    annotations.update(rationale=Concat(Value("tag-"), F("pk")))
    release = build(study, tmp_path / "tagged")

    index = {}
    for task in ("task1", "task2"):
        for row in records(release, f"{task}/{task}_full.csv"):
            index[int(row["rationale"].removeprefix("tag-"))] = int(row["annotation_index"])
    by_example = defaultdict(list)
    for pk, example_id, reader_id in annotations.order_by("created_at", "pk").values_list(
        "pk", "example_id", "reader_id"
    ):
        by_example[example_id].append((pk, reader_id))

    submitted, by_reader, shuffled = [], [], []
    for rows in by_example.values():
        reader_rank = {reader: rank for rank, reader in enumerate(sorted(r for _, r in rows))}
        for rank, (pk, reader_id) in enumerate(rows):
            submitted.append(rank)
            by_reader.append(reader_rank[reader_id])
            shuffled.append(index[pk])
    assert abs(statistics.correlation(submitted, shuffled)) < 0.3
    assert abs(statistics.correlation(by_reader, shuffled)) < 0.3
    in_submission_order = sum(
        [index[pk] for pk, _ in rows] == list(range(len(rows))) for rows in by_example.values()
    ) / len(by_example)
    assert 0.2 < in_submission_order < 0.6  # a shuffle keeps the order for about 3 in 8 examples

    # The shuffle is seeded by the study: another seed gives other indexes, the same seed the same.
    Study.objects.filter(pk=study.pk).update(seed=F("seed") + 1)
    reseeded = build(study, tmp_path / "reseeded")
    new_index = {}
    for task in ("task1", "task2"):
        for row in records(reseeded, f"{task}/{task}_full.csv"):
            new_index[int(row["rationale"].removeprefix("tag-"))] = int(row["annotation_index"])
    changed = sum(any(index[pk] != new_index[pk] for pk, _ in rows) for rows in by_example.values())
    assert changed > 0.4 * len(by_example)  # about 5 in 8 examples get another order
    for name in ("task1/task1_consensus.csv", "task1/task1_disagreed.csv", "task2/task2_consensus.csv"):
        assert (reseeded / name).read_bytes() == (release / name).read_bytes()
    Study.objects.filter(pk=study.pk).update(seed=F("seed") - 1)
    assert files_of(build(study, tmp_path / "again")) == files_of(release)


def test_annotation_index_is_the_documented_seeded_shuffle(replay, tmp_path):
    # The same definition on every database, so the same data gives the same bytes on each:
    # within an example, annotations in the order of
    # sha256("readingroom-release:<seed>:<example public id hex>:<annotation public id hex>").
    study, _ = replay
    annotations = Annotation.objects.filter(example__study=study, voided_at__isnull=True)
    annotations.update(rationale=Concat(Value("tag-"), F("pk")))
    release = build(study, tmp_path / "tagged")

    expected = {}
    by_example = defaultdict(list)
    for pk, example_id, example_public, public in annotations.values_list(
        "pk", "example_id", "example__public_id", "public_id"
    ):
        text = f"readingroom-release:{study.seed}:{example_public.hex}:{public.hex}"
        by_example[example_id].append((hashlib.sha256(text.encode()).digest(), pk))
    for rows in by_example.values():
        expected.update({pk: index for index, (_, pk) in enumerate(sorted(rows))})
    written = {}
    for task in ("task1", "task2"):
        for row in records(release, f"{task}/{task}_full.csv"):
            written[int(row["rationale"].removeprefix("tag-"))] = int(row["annotation_index"])
    assert written == expected


def test_nothing_in_the_release_tells_who_read_or_when(replay, tmp_path):
    study, _ = replay
    User = get_user_model()
    people = list(User.objects.order_by("pk"))
    for i, user in enumerate(people):
        user.username = f"zq-reader-{i}"
        user.email = f"zq{i}@mail.invalid"
        user.first_name = "Zebulon"
        user.last_name = f"Quixote{i}"
        user.save()
    Annotation.objects.filter(example__study=study).update(duration_ms=F("pk") + 918_273_000)

    # A voided rating leaves the release, with its reason.
    consensus = ConsensusLabel.objects.filter(
        example__study=study, task=Task.REALISM, label_source=LabelSource.MAJORITY
    ).first()
    odd = consensus.example.annotations.exclude(rating=consensus.rating).get()
    Annotation.objects.filter(pk=odd.pk).update(rationale="zq-voided-rationale")
    void_annotation(odd.public_id, actor=make_user(Role.COORDINATOR), reason="zq-void-reason")

    release = build(study, tmp_path / "release")
    blob = b"\n".join(files_of(release).values()).lower()

    needles = {"zebulon", "quixote", "mail.invalid", "zq-", "zq-voided-rationale", "zq-void-reason"}
    for user in people:
        needles |= {user.username, user.email}
    for model in (Study, CandidatePair, Example, Assignment, Annotation, Adjudication):
        for public_id in model.objects.values_list("public_id", flat=True):
            needles |= {str(public_id), public_id.hex}
    for model in (Annotation, Adjudication):
        for token in model.objects.exclude(form_token=None).values_list("form_token", flat=True):
            needles |= {str(token), token.hex}
    for duration in Annotation.objects.exclude(duration_ms=None).values_list("duration_ms", flat=True):
        needles.add(str(duration))
    for moment in [
        timezone.now(),
        *Annotation.objects.values_list("created_at", flat=True),
        *ConsensusLabel.objects.values_list("decided_at", flat=True),
        *AuditEvent.objects.values_list("created_at", flat=True),
    ]:
        needles |= {moment.date().isoformat(), timezone.localtime(moment).date().isoformat()}
    found = sorted(n for n in needles if n.lower().encode("utf-8") in blob)
    assert not found, f"found in the release: {found[:10]}"
    assert not re.search(rb"\d{4}-\d\d-\d\d|\d\d:\d\d:\d\d|t\d\d:\d\d", blob)

    # The voided read is gone; the two agreeing reads left are now a unanimous consensus.
    pair = consensus.example.pair
    key = (pair.dataset.key, pair.source_study_id, pair.variation.key, consensus.example.report_type)
    rows = [r for r in records(release, "task1/task1_consensus.csv") if key_of(r, "task1") == key]
    assert [(r["label_source"], r["n_annotations"]) for r in rows] == [("unanimous", "2")]


@pytest.mark.parametrize("tool", ["sha256sum", "shasum"])
def test_the_readmes_checksum_commands_verify_the_release_as_written(replay_release, tool):
    readme = (replay_release / "README.md").read_text(encoding="utf-8")
    section = readme.split("## Verifying the files", 1)[1].split("\n## ", 1)[0]
    commands = [line.strip() for line in section.splitlines() if line.startswith("    ")]
    (command,) = [c for c in commands if tool in c]
    if shutil.which(tool) is None:
        pytest.skip(f"{tool} is not installed here")

    result = subprocess.run(command, shell=True, cwd=replay_release, capture_output=True, text=True, check=False)  # noqa: S602

    assert result.returncode == 0, result.stdout + result.stderr
    files = [line.split(" ", 1)[1] for line in (replay_release / "SHA256SUMS.txt").read_text().splitlines()]
    assert result.stdout.count(": OK") == len(files) > 0
    # And a changed file is caught.
    (replay_release / "LICENSE.txt").write_text("tampered", encoding="utf-8")
    tampered = subprocess.run(command, shell=True, cwd=replay_release, capture_output=True, text=True, check=False)  # noqa: S602
    assert tampered.returncode != 0


def test_the_readme_is_a_data_dictionary_with_the_counts(replay, replay_release):
    study, _ = replay
    readme = (replay_release / "README.md").read_text(encoding="utf-8")
    assert "1.0.0" in readme
    assert "`mimic-cxr` (MIMIC-CXR)" in readme
    for name in HEADERS:
        assert f"`{name}`" in readme

    # The Columns table: every column of every file, with a type and its allowed values.
    table = readme.split("## Columns", 1)[1].split("\n## ", 1)[0]
    described = {}
    for line in table.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) == 4 and cells[1] in ("string", "integer"):
            for column in re.findall(r"`([a-z_]+)`", cells[0]):
                described[column] = cells
    for name, header in HEADERS.items():
        for column in header.decode().strip().split(","):
            assert column in described, f"{column} ({name}) is not in the README's Columns table"
            assert described[column][3], column
    assert described["annotation_index"][1] == described["n_annotations"][1] == "integer"
    assert described["study_id"][1] == "string"
    for label in (*LABELS["task1"], *LABELS["task2"]):
        assert f"`{label}`" in described["rating"][2]
    for source in ("unanimous", "majority", "adjudicated"):
        assert f"`{source}`" in described["label_source"][2]
    for column in ("report_type", "report_a_type"):
        assert described[column][2] == "`original`, `alternative`"
    assert described["annotation_index"][2] == "0, 1, 2"
    assert described["n_annotations"][2] == "2, 3"

    task1, task2 = readme.split("### Task 1")[1].split("### Task 2")
    for section, counts in ((task1, ("task1", 573, 147, 93, 15)), (task2, ("task2", 282, 78, 42, 1))):
        task, annotations, two, three, adjudicated = counts
        assert f"Annotations (`{task}_full.csv`): {annotations}" in section
        assert f"Examples with 2 annotations: {two}; with 3 annotations: {three}" in section
        assert f"Adjudicated examples: {adjudicated}" in section
        labels = Counter(r["rating"] for r in records(replay_release, f"{task}/{task}_consensus.csv"))
        assert "Consensus by rating: " + ", ".join(f"{label} {labels[label]}" for label in LABELS[task]) in section
    assert "Consensus by label source: unanimous 147, majority 78, adjudicated 15" in task1
    assert "Consensus by label source: unanimous 78, majority 41, adjudicated 1" in task2.split("## Taxonomy")[0]

    taxonomy = readme.split("## Taxonomy", 1)[1]
    for variation in study.variations.all():
        assert f"| `{variation.key}` | {variation.label} | {variation.dimension} |" in taxonomy


def test_the_readmes_files_and_counts_are_written_whole_with_the_zeros(tmp_path):
    # Every example reached a unanimous consensus: the other ratings and sources count 0.
    study = rated_study("mimic-cxr", slug="readme-counts")
    readme = (build(study, tmp_path / "release", version="2.0.0") / "README.md").read_text(encoding="utf-8")

    assert readme.startswith(f"# {study.name}: reader study release 2.0.0\n")

    files = readme.split("## Files\n\n", 1)[1].split("\n\n", 1)[0]
    assert files == (
        "| file | rows | one row per |\n"
        "|---|---|---|\n"
        "| `task1/task1_full.csv` | 4 | individual Task 1 annotation |\n"
        "| `task1/task1_disagreed.csv` | 0 "
        "| Task 1 example with a three-way disagreement (the adjudicator's rating) |\n"
        "| `task1/task1_consensus.csv` | 2 | Task 1 example (its consensus rating) |\n"
        "| `task2/task2_full.csv` | 2 | individual Task 2 annotation |\n"
        "| `task2/task2_disagreed.csv` | 0 "
        "| Task 2 example with a three-way disagreement (the adjudicator's rating) |\n"
        "| `task2/task2_consensus.csv` | 1 | Task 2 example (its consensus rating) |\n"
        "| `LICENSE.txt` | | the licence of these files |\n"
        "| `SHA256SUMS.txt` | | SHA-256 of every other file |"
    )
    counts = readme.split("## Counts\n", 1)[1].split("## Taxonomy", 1)[0]
    assert counts == (
        "\n### Task 1: Realism\n\n"
        "- Annotations (`task1_full.csv`): 4\n"
        "- Examples with 2 annotations: 2; with 3 annotations: 0\n"
        "- Adjudicated examples: 0 (`task1_disagreed.csv`: 0 rows)\n"
        "- Consensus by rating: Realistic 2, Minor Issues 0, Major Issues 0\n"
        "- Consensus by label source: unanimous 2, majority 0, adjudicated 0\n"
        "\n### Task 2: Clinical Equivalence\n\n"
        "- Annotations (`task2_full.csv`): 2\n"
        "- Examples with 2 annotations: 1; with 3 annotations: 0\n"
        "- Adjudicated examples: 0 (`task2_disagreed.csv`: 0 rows)\n"
        "- Consensus by rating: Equivalent 1, Minor Discrepancy 0, Major Discrepancy 0\n"
        "- Consensus by label source: unanimous 1, majority 0, adjudicated 0\n\n"
    )


def test_the_readmes_taxonomy_is_in_the_studys_order_not_by_key(tmp_path):
    study = rated_study("mimic-cxr", slug="readme-taxonomy")
    study.variations.update(position=5)
    Variation.objects.create(study=study, key="a-last", label="Last", dimension="style", position=9)
    Variation.objects.create(study=study, key="z-first", label="First", dimension="style", position=1)
    readme = (build(study, tmp_path / "release") / "README.md").read_text(encoding="utf-8")

    taxonomy = readme.split("## Taxonomy", 1)[1]
    keys = re.findall(r"^\| `([a-z0-9_-]+)` \|", taxonomy, flags=re.MULTILINE)
    assert keys == ["z-first", *study.variations.filter(position=5).values_list("key", flat=True), "a-last"]


def test_a_replay_release_validates_against_the_datapackage_and_a_broken_one_does_not(replay_release, tmp_path):
    assert not (replay_release / "datapackage.json").exists()
    report = validate(replay_release)
    assert report.valid, report.flatten(["type", "fieldName", "rowNumber", "note"])[:10]
    assert [task.stats["rows"] for task in report.tasks] == [573, 15, 240, 282, 1, 120]

    broken = tmp_path / "broken"
    broken.mkdir()
    for name, data in files_of(replay_release).items():
        (broken / name).parent.mkdir(parents=True, exist_ok=True)
        (broken / name).write_bytes(data)
    consensus = broken / "task1/task1_consensus.csv"
    consensus.write_bytes(consensus.read_bytes().replace(b",Realistic,", b",Maybe,", 1))
    report = validate(broken)
    assert not report.valid
    assert report.flatten(["type", "fieldName"]) == [["constraint-error", "rating"]]


def test_the_datapackage_descriptor_describes_the_six_files_in_column_order():
    descriptor = package_descriptor(include_judges=True)
    assert [error.message for error in Package.metadata_validate(descriptor)] == []
    resources = {r["path"]: r for r in descriptor["resources"]}
    assert set(resources) == set(HEADERS) | set(JUDGE_HEADERS)
    for path, resource in resources.items():
        names = [f["name"] for f in resource["schema"]["fields"]]
        assert ",".join(names).encode() + b"\r\n" == {**HEADERS, **JUDGE_HEADERS}[path]
        assert resource["dialect"] == {
            "delimiter": ",",
            "lineTerminator": "\r\n",
            "quoteChar": '"',
            "doubleQuote": True,
            "header": True,
        }
        assert resource["encoding"] == "utf-8"


# --- Small studies -------------------------------------------------------------------------


def hostile_study() -> Study:
    """Two pairs, one full of hostile text and one with empty sections, rated to adjudication."""
    # Every item is read three times: enough readers for every third read (the default).
    study, _, _ = make_reading_study(pairs=2)
    first, second = CandidatePair.objects.filter(study=study, sampled=True).order_by("source_study_id")
    CandidatePair.objects.filter(pk=first.pk).update(**HOSTILE)
    CandidatePair.objects.filter(pk=second.pk).update(
        indication="", comparison="", technique="", original_findings="", alternative_impression=""
    )
    for n, example in enumerate(Example.objects.filter(study=study).order_by("pk")):
        labels = (
            (RatingChoice.REALISTIC, RatingChoice.MINOR_ISSUES, RatingChoice.MAJOR_ISSUES)
            if example.task == Task.REALISM
            else (RatingChoice.EQUIVALENT, RatingChoice.MINOR_DISCREPANCY, RatingChoice.MAJOR_DISCREPANCY)
        )
        for i, rating in enumerate(labels):
            assignment = example.assignments.open().select_related("reader").order_by("slot").first()
            rate(assignment, rating, "" if (n, i) == (0, 0) else hostile_rationale(f"{n}.{i}"))
        decide(example, labels[1], hostile_rationale(f"adjudicated {n}"))
    return study


def test_hostile_text_round_trips_byte_exactly_through_pandas(tmp_path):
    study = hostile_study()
    release = build(study, tmp_path / "release")
    released = set(Example.objects.filter(study=study).values_list("pk", flat=True))
    assert_full_files_match_the_database(release, study, released=released)

    for task, prefix in ((Task.REALISM, "task1"), (Task.EQUIVALENCE, "task2")):
        decided = {}
        for adjudication in Adjudication.objects.filter(example__study=study, task=task).select_related(
            "example__pair__dataset", "example__pair__variation"
        ):
            pair = adjudication.example.pair
            keys = (pair.dataset.key, pair.source_study_id, pair.variation.key)
            if task == Task.REALISM:
                keys = (*keys, adjudication.example.report_type)
            decided[keys] = (RatingChoice(adjudication.rating).label, adjudication.rationale)
        written = {
            key_of(r, prefix): (r["rating"], r["rationale"])
            for r in records(release, f"{prefix}/{prefix}_disagreed.csv")
        }
        assert written == decided

    # The bytes themselves: quoted only where needed, nothing escaped or trimmed, CRLF records.
    for name in HEADERS:
        data = (release / name).read_bytes()
        assert rfc4180(list(csv.reader(io.StringIO(data.decode("utf-8"), newline="")))) == data
    full = (release / "task1/task1_full.csv").read_bytes()
    assert b",+1 trailing spaces   ," in full
    assert b'"=HYPERLINK(""http://x.invalid""),""quoted"", a comma\r\nCRLF\rlone CR\nLF  \r\n"' in full
    assert "é ± 中文 😀".encode() in full and b"\xef\xbb\xbf" not in full
    report = validate(release)
    assert report.valid, report.flatten(["type", "fieldName", "rowNumber", "note"])[:10]


@pytest.mark.postgres
@pytest.mark.django_db(transaction=True)
def test_copy_and_a_cursor_inside_a_transaction_give_the_same_bytes(tmp_path):
    # Committed data is streamed with binary COPY on a second connection; inside a transaction
    # (where only this connection sees the rows) through a server-side cursor. Same files.
    study = hostile_study()
    copied = build(study, tmp_path / "copied")
    with transaction.atomic():
        fetched = build(study, tmp_path / "fetched")

    assert files_of(copied) == files_of(fetched)


def test_examples_without_consensus_are_left_out_by_default_and_counted_in_the_readme(tmp_path):
    # Enough readers for every third read (the default): some examples here need one.
    study, _, _ = make_reading_study(pairs=2, adjudicators=1)
    realism = list(
        Example.objects.filter(study=study, task=Task.REALISM).order_by("pair__source_study_id", "report_type")
    )
    equivalence = list(Example.objects.filter(study=study, task=Task.EQUIVALENCE).order_by("pair__source_study_id"))
    alternative_1, original_1, _alternative_2, original_2 = realism
    rate_open_reads(original_1, RatingChoice.REALISTIC, RatingChoice.REALISTIC)  # consensus
    rate_open_reads(alternative_1, RatingChoice.MINOR_ISSUES)  # one read of two
    rate_open_reads(
        original_2, RatingChoice.REALISTIC, RatingChoice.MINOR_ISSUES, RatingChoice.MAJOR_ISSUES
    )  # awaiting adjudication
    # alternative_2: not read at all
    rate_open_reads(equivalence[0], RatingChoice.EQUIVALENT, RatingChoice.MINOR_DISCREPANCY)  # awaiting a third read
    rate_open_reads(
        equivalence[1], RatingChoice.EQUIVALENT, RatingChoice.MINOR_DISCREPANCY, RatingChoice.MAJOR_DISCREPANCY
    )
    decide(equivalence[1], RatingChoice.MAJOR_DISCREPANCY, "Could change management.")

    default = build(study, tmp_path / "default")
    assert {name: len(records(default, name)) for name in HEADERS} == {
        "task1/task1_full.csv": 2,
        "task1/task1_disagreed.csv": 0,
        "task1/task1_consensus.csv": 1,
        "task2/task2_full.csv": 3,
        "task2/task2_disagreed.csv": 1,
        "task2/task2_consensus.csv": 1,
    }
    readme = (default / "README.md").read_text(encoding="utf-8")
    assert "left out (Task 1: Realism: 3; Task 2: Clinical Equivalence: 1)" in readme
    assert validate(default).valid
    assert_full_files_match_the_database(default, study, released={original_1.pk, equivalence[1].pk})

    unfinished = build(study, tmp_path / "unfinished", include_unfinished=True)
    # Nothing is said to be left out, and the progress counts the rows written, this study's only.
    rated_study("mimic-cxr", slug="elsewhere")
    calls = []
    summary = build_release(
        Study.objects.get(pk=study.pk),
        tmp_path / "counted",
        license_text=LICENSE,
        include_unfinished=True,
        progress=lambda done, total: calls.append((done, total)),
    )
    assert [summary.counts[task].left_out for task in (Task.REALISM, Task.EQUIVALENCE)] == [0, 0]
    written = sum(n for name, n in summary.row_counts.items() if name.endswith(("_full.csv", "_consensus.csv")))
    assert calls[-1] == (written, written)
    consensus = {
        r["study_id"] + ":" + r["report_type"]: (r["rating"], r["label_source"], r["n_annotations"])
        for r in records(unfinished, "task1/task1_consensus.csv")
    }
    sid1, sid2 = original_1.pair.source_study_id, original_2.pair.source_study_id
    assert consensus == {
        f"{sid1}:original": ("Realistic", "unanimous", "2"),
        f"{sid1}:alternative": ("", "", "1"),
        f"{sid2}:original": ("", "", "3"),
        f"{sid2}:alternative": ("", "", "0"),
    }
    assert [(r["rating"], r["rationale"]) for r in records(unfinished, "task1/task1_disagreed.csv")] == [("", "")]
    assert [
        (r["rating"], r["label_source"], r["n_annotations"]) for r in records(unfinished, "task2/task2_consensus.csv")
    ] == [
        ("", "", "2"),
        ("Major Discrepancy", "adjudicated", "3"),
    ]
    assert len(records(unfinished, "task1/task1_full.csv")) == 6
    assert len(records(unfinished, "task2/task2_full.csv")) == 5
    released = set(Example.objects.filter(study=study).values_list("pk", flat=True))
    assert_full_files_match_the_database(unfinished, study, released=released)
    readme = (unfinished / "README.md").read_text(encoding="utf-8")
    assert "included, with an empty consensus rating" in readme
    assert "| `n_annotations` | integer | 2, 3 (0 to 3 where there is no consensus yet) |" in readme
    assert "and in `*_disagreed.csv` where the adjudicator has not decided yet |" in readme
    assert "0 to 3" not in (default / "README.md").read_text(encoding="utf-8")

    # The descriptor is for the published (default) release; an unfinished build departs from
    # it exactly where its description says, and nowhere else.
    report = validate(unfinished)
    assert not report.valid
    for task in report.tasks:
        for error in task.errors:
            assert error.type == "constraint-error", error.message
            assert error.field_name in UNFINISHED_RELAXED[task.name], error.message
    relaxed = package_descriptor()
    for resource in relaxed["resources"]:
        for field in resource["schema"]["fields"]:
            if field["name"] in UNFINISHED_RELAXED.get(resource["name"], ()):
                field["constraints"].pop("required", None)
                if field["name"] == "n_annotations":
                    field["constraints"]["enum"] = [0, 1, 2, 3]
    report = validate(unfinished, relaxed)
    assert report.valid, report.flatten(["type", "fieldName", "rowNumber", "note"])[:10]


def test_a_release_restricted_to_datasets_holds_only_their_rows(tmp_path):
    study = rated_study("mimic-cxr", "iu-xray", "iu-xray")
    only_iu = build(study, tmp_path / "iu", datasets=["iu-xray"])
    for name in HEADERS:
        assert {r["dataset"] for r in records(only_iu, name)} <= {"iu-xray"}
    assert len(records(only_iu, "task2/task2_consensus.csv")) == 2
    assert len(records(only_iu, "task1/task1_full.csv")) == 8
    readme = (only_iu / "README.md").read_text(encoding="utf-8")
    assert "- Datasets included: `iu-xray` (IU X-ray (Open-i))\n" in readme
    assert "| `dataset` | string | `iu-xray` |" in readme

    everything = build(study, tmp_path / "all")
    assert {r["dataset"] for r in records(everything, "task2/task2_consensus.csv")} == {"iu-xray", "mimic-cxr"}
    readme = (everything / "README.md").read_text(encoding="utf-8")
    assert "- Datasets included: `iu-xray` (IU X-ray (Open-i)), `mimic-cxr` (MIMIC-CXR)\n" in readme


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"version": "v1"}, "not digits and dots"),
        ({"version": "1.0-beta"}, "not digits and dots"),
        ({"version": ""}, "not digits and dots"),
        ({"version": "1..0"}, "not digits and dots"),
        ({"version": "1.0.0\n"}, "not digits and dots"),
        ({"version": "\u0661.\u0660"}, "not digits and dots"),  # Arabic-Indic digits
        ({"license_text": ""}, "licence"),
        ({"license_text": " \r\n\t"}, "licence"),
        ({"datasets": ["mimic-cxr", "mimic"]}, "Unknown dataset(s): mimic"),
    ],
)
def test_a_bad_option_is_refused_and_nothing_is_written(tmp_path, options, message):
    study = make_study()
    out = tmp_path / "out" / "release"
    with pytest.raises(ReleaseRefused, match=re.escape(message)):
        build(study, out, **options)
    assert not (tmp_path / "out").exists()
    assert list(tmp_path.iterdir()) == []


def test_a_non_empty_output_folder_is_refused_and_left_alone(tmp_path):
    study = make_study()
    out = tmp_path / "release"
    out.mkdir()
    (out / "notes.txt").write_text("keep me")
    with pytest.raises(ReleaseRefused, match="not empty"):
        build(study, out)
    assert files_of(tmp_path) == {"release/notes.txt": b"keep me"}


def test_an_empty_existing_output_folder_is_used(tmp_path):
    study = rated_study("mimic-cxr")
    (tmp_path / "release").mkdir()
    assert set(files_of(build(study, tmp_path / "release"))) == LAYOUT
    assert [p.name for p in tmp_path.iterdir()] == ["release"]


def test_a_build_broken_half_way_leaves_no_folder_behind(tmp_path, monkeypatch):
    # export_release --out writes here directly (no worker, no zip): a half-written folder, or the
    # work folder beside it, would pass for a release.
    study = rated_study("mimic-cxr")
    written_when_it_broke = []
    consensus_query = release_rows.consensus_query

    def break_on_task2(selection):
        if selection.task == Task.EQUIVALENCE:
            written_when_it_broke.extend(p.name for p in tmp_path.rglob("*.csv"))
            raise OSError("No space left on device")
        return consensus_query(selection)

    monkeypatch.setattr(release_rows, "consensus_query", break_on_task2)
    with pytest.raises(OSError, match="No space left"):
        build(study, tmp_path / "release")

    assert "task1_consensus.csv" in written_when_it_broke
    assert list(tmp_path.iterdir()) == []


# --- The export_release command ------------------------------------------------------------


def test_the_command_writes_the_release_and_prints_the_row_counts(tmp_path):
    study = rated_study("mimic-cxr", "iu-xray", slug="cmd-study")
    license_file = tmp_path / "LICENSE-source.txt"
    license_file.write_bytes(LICENSE.encode("utf-8"))
    out, err = io.StringIO(), io.StringIO()
    call_command(
        "export_release",
        "--study=cmd-study",
        f"--out={tmp_path / 'release'}",
        f"--license={license_file}",
        "--datasets=mimic-cxr",
        "--version=2.1",
        stdout=out,
        stderr=err,
    )
    release = tmp_path / "release"
    assert set(files_of(release)) == LAYOUT
    assert (release / "LICENSE.txt").read_bytes() == license_file.read_bytes()
    assert "reader study release 2.1" in (release / "README.md").read_text(encoding="utf-8")
    printed = out.getvalue()
    for name, rows in {
        "task1/task1_full.csv": 4,
        "task1/task1_disagreed.csv": 0,
        "task1/task1_consensus.csv": 2,
        "task2/task2_full.csv": 2,
        "task2/task2_disagreed.csv": 0,
        "task2/task2_consensus.csv": 1,
    }.items():
        assert f"{name}: {rows} rows" in printed
        assert len(records(release, name)) == rows
    assert "Release 2.1 written to" in printed
    assert files_of(release) == files_of(build(study, tmp_path / "service", datasets=["mimic-cxr"], version="2.1"))
    # The progress bar, on stderr, ends full: every step of the build counted against the total.
    assert re.search(r"Building: 100%\|#+\| (\d+)/\1 ", err.getvalue()), err.getvalue()


def test_the_command_uses_the_studys_licence_and_reports_left_out_examples(tmp_path):
    study = rated_study("mimic-cxr", slug="cmd-licence")
    Study.objects.filter(pk=study.pk).update(license_text="The study's own licence.\n")
    waiting = make_pair(study, study_id="99")
    Example.objects.create(study=study, pair=waiting, task=Task.EQUIVALENCE)
    out = io.StringIO()
    err = io.StringIO()
    call_command(
        "export_release", "--study=cmd-licence", f"--out={tmp_path / 'r'}", "--no-progress", stdout=out, stderr=err
    )
    assert err.getvalue() == ""
    assert (tmp_path / "r" / "LICENSE.txt").read_bytes() == b"The study's own licence.\n"
    assert "Task 2: Clinical equivalence: 1 examples without a consensus left out." in out.getvalue()
    # A folder, not a zip: the release it records offers no download.
    recorded = Release.objects.get(study=study)
    assert (recorded.status, recorded.zip_path, recorded.sha256) == (ReleaseStatus.DONE, "", "")


@pytest.mark.parametrize(
    ("arguments", "message"),
    [
        (["--study=nope"], "No study 'nope'"),
        (["--license=missing.txt"], "no such licence file"),
        (["--license=latin1.txt"], "not UTF-8 text"),
        ([], "licence"),
        (["--license=LICENSE-source.txt", "--version=v1"], "not digits and dots"),
        (["--license=LICENSE-source.txt", "--datasets", "unknown-set"], "Unknown dataset(s): unknown-set"),
    ],
)
def test_the_command_turns_refusals_into_command_errors(tmp_path, monkeypatch, arguments, message):
    make_study("cmd-errors")
    monkeypatch.chdir(tmp_path)
    (tmp_path / "LICENSE-source.txt").write_text("CC BY 4.0\n")
    (tmp_path / "latin1.txt").write_bytes("Licence \u00e9".encode("latin-1"))
    arguments = ["--study=cmd-errors", "--out=release", "--no-progress", *arguments]
    with pytest.raises(CommandError, match=re.escape(message)):
        call_command("export_release", *arguments, stdout=io.StringIO())
    assert not (tmp_path / "release").exists()


def test_the_command_refuses_a_non_empty_output_folder(tmp_path):
    make_study("cmd-full")
    (tmp_path / "release").mkdir()
    (tmp_path / "release" / "old.csv").write_text("x")
    with pytest.raises(CommandError, match="not empty"):
        call_command(
            "export_release",
            "--study=cmd-full",
            f"--out={tmp_path / 'release'}",
            "--license",
            __file__,
            stdout=io.StringIO(),
        )
    assert files_of(tmp_path / "release") == {"old.csv": b"x"}
