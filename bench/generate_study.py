"""Build a large study fast, for benchmarks: pairs, sample, readers with API tokens, initial reads.

    .venv/bin/python bench/generate_study.py --pairs 50000 --readers 20 \
        --database-url postgres://postgres@127.0.0.1:5432/readingroom_bench [--slug bench]

The database must be migrated and must not hold a study with that slug. Candidate pairs are
bulk-inserted (all accepted, spread over mimic-cxr / iu-xray and the 12 variations of the
default taxonomy, texts taken from the demo study); the sample, the reader members and the
initial reads go through the application's own services (sample_pairs, add_study_member,
assign_readers). Every step prints its time and the process's peak memory.

--no-assign leaves every example unassigned (bench/assign.py times assign_readers on its own).
--first-reads F stores the first read of a fraction F of the examples (so that a reading
benchmark also meets second reads, which route the example). --with-ratings rates the whole
study to consensus (unanimous, majority after a third read, or adjudicated), as the release
benchmark needs. Both insert rows in bulk, consistent with the models' constraints.
"""

import argparse
import json
import math
import os
import random
import resource
import secrets
import sys
import time
import uuid
from collections import defaultdict
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import timedelta
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
DATASETS = ("mimic-cxr", "iu-xray")
BATCH_SIZE = 2000
# Readers mostly agree; the rest disagree, and a few of those split three ways.
AGREE_SHARE = 0.75
THREE_WAY_SHARE = 0.05
# How often each label of a task is chosen when the generator rates (first label: the "fine" one).
LABEL_WEIGHTS = (0.7, 0.2, 0.1)
RATIONALES = (
    "Wording a radiologist would not use in this context.",
    "The impression drops a finding that is in the original.",
    "Laterality of the effusion differs between the reports.",
    "Hedging changes how certain the pneumonia is.",
)

Log = Callable[[str], None]


def setup_django(database_url: str | None) -> None:
    """Configure Django with the project's settings for this process."""
    if str(ROOT) not in sys.path:
        sys.path.insert(0, str(ROOT))
    os.environ["DJANGO_SETTINGS_MODULE"] = "config.settings"
    # A script run: no debug query log (it would grow with every statement), a throwaway key.
    os.environ.setdefault("DEBUG", "0")
    os.environ.setdefault("SECRET_KEY", secrets.token_urlsafe(50))
    if database_url:
        os.environ["DATABASE_URL"] = database_url
    if not os.environ.get("DATABASE_URL"):
        sys.exit("Give --database-url (or set DATABASE_URL); the generator does not write to the default database.")
    import django

    django.setup()


def peak_memory_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # Linux reports KiB


@dataclass
class Timings:
    log: Log
    steps: dict[str, float] = field(default_factory=dict)

    @contextmanager
    def step(self, name: str) -> Iterator[None]:
        started = time.perf_counter()
        yield
        elapsed = time.perf_counter() - started
        self.steps[name] = elapsed
        self.log(f"  {name:<28} {elapsed:8.2f} s   peak memory {peak_memory_mb():7.0f} MB")


@dataclass(frozen=True)
class GeneratedStudy:
    slug: str
    pairs: int
    examples: int
    assignments: int
    readers: list[str]
    timings: dict[str, float]


def _text_templates() -> dict[tuple[str, str], list[dict]]:
    """The demo study's pairs by (dataset, variation): short realistic texts for every cell."""
    by_cell: dict[tuple[str, str], list[dict]] = defaultdict(list)
    with open(ROOT / "reading" / "demo" / "pairs.jsonl", encoding="utf-8") as lines:
        for line in lines:
            row = json.loads(line)
            by_cell[(row["dataset"], row["reref_variation"])].append(row)
    return by_cell


def create_pairs(study, count: int) -> None:
    """count accepted candidate pairs, round-robin over (dataset, variation), in bulk."""
    from annotation.models import CandidatePair, Dataset, Verdict

    templates = _text_templates()
    every_template = [row for rows in templates.values() for row in rows]
    datasets = {d.key: d for d in Dataset.objects.filter(key__in=DATASETS)}
    cells = [(datasets[key], variation) for key in DATASETS for variation in study.variations.order_by("position")]
    text_fields = (
        "indication",
        "comparison",
        "technique",
        "original_findings",
        "original_impression",
        "alternative_findings",
        "alternative_impression",
    )
    batch = []
    for n in range(count):
        dataset, variation = cells[n % len(cells)]
        choices = templates.get((dataset.key, variation.key)) or every_template
        template = choices[(n // len(cells)) % len(choices)]
        source_study_id = str(50_000_000 + n) if dataset.key == "mimic-cxr" else f"CXR{100_000 + n}"
        batch.append(
            CandidatePair(
                study=study,
                dataset=dataset,
                source_study_id=source_study_id,
                variation=variation,
                verdict=Verdict.ACCEPTED,
                **{name: template[name] for name in text_fields},
            )
        )
        if len(batch) == BATCH_SIZE:
            CandidatePair.objects.bulk_create(batch)
            batch = []
    CandidatePair.objects.bulk_create(batch)


def create_people(study, *, readers: int, adjudicators: int, slug: str):
    """A coordinator, readers and adjudicators enrolled in the study.

    Nobody gets a password: the benchmark signs in with API tokens it makes (bench/reading.py).
    """
    from django.contrib.auth import get_user_model

    from annotation.models import MemberRole, Role, Subspecialty
    from annotation.roles import grant_role
    from consensus.assignment import add_study_member

    User = get_user_model()
    coordinator = User.objects.create_user(username=f"{slug}-coordinator")
    grant_role(coordinator, Role.COORDINATOR)
    subspecialties = list(Subspecialty.values)
    reader_names = []
    for n in range(1, readers + 1):
        user = User.objects.create_user(username=f"{slug}-reader{n:02d}")
        grant_role(user, Role.READER, subspecialty=subspecialties[n % len(subspecialties)])
        add_study_member(study, user, MemberRole.READER, actor=coordinator)
        reader_names.append(user.username)
    for n in range(1, adjudicators + 1):
        user = User.objects.create_user(username=f"{slug}-adjudicator{n:02d}")
        grant_role(user, Role.ADJUDICATOR, subspecialty=Subspecialty.CARDIOTHORACIC)
        add_study_member(study, user, MemberRole.ADJUDICATOR, actor=coordinator)
    return coordinator, reader_names


# --- Ratings in bulk ----------------------------------------------------------------------------


@dataclass
class _Read:
    """One initial (or third) read as the generator stores it."""

    assignment_pk: int | None
    assignment_public_id: uuid.UUID | None
    reader_pk: int
    slot: int
    rating: str
    report_a_type: str


class _Rater:
    def __init__(self, study, seed: int) -> None:
        from django.utils import timezone

        from annotation.models import TASK_RATINGS, Task

        self.study = study
        self.rng = random.Random(f"bench-ratings:{seed}")
        self.labels = {task: list(TASK_RATINGS[task]) for task in Task.values}
        self.now = timezone.now()
        # Every generated read was shown a while before it was stored; durations vary per read.
        self.shown_at = self.now - timedelta(minutes=5)

    def rating(self, task: str) -> str:
        return self.rng.choices(self.labels[task], weights=LABEL_WEIGHTS)[0]

    def other_rating(self, task: str, *taken: str) -> str:
        return self.rng.choice([label for label in self.labels[task] if label not in taken])

    def rationale(self, rating: str) -> str:
        from annotation.models import RATINGS_WITHOUT_RATIONALE

        return "" if rating in RATINGS_WITHOUT_RATIONALE else self.rng.choice(RATIONALES)

    def coin_report_a(self) -> str:
        from annotation.models import ReportType

        return self.rng.choice([ReportType.ORIGINAL, ReportType.ALTERNATIVE])

    def duration_ms(self) -> int:
        return self.rng.randint(8_000, 240_000)


def _store_reads(study, rater: _Rater, reads: list[tuple[int, str, _Read]]) -> None:
    """Annotations, done assignments and 'submitted' audit rows for (example pk, task, read)."""
    from annotation.models import Annotation, Assignment, AssignmentStatus, AuditAction, AuditEvent

    annotations, events = [], []
    by_report_a: dict[str, list[int]] = defaultdict(list)
    for example_pk, task, read in reads:
        by_report_a[read.report_a_type].append(read.assignment_pk)
        annotations.append(
            Annotation(
                assignment_id=read.assignment_pk,
                example_id=example_pk,
                reader_id=read.reader_pk,
                task=task,
                rating=read.rating,
                rationale=rater.rationale(read.rating),
                form_token=uuid.uuid4(),
                report_a_type=read.report_a_type,
                duration_ms=rater.duration_ms(),
            )
        )
        events.append(
            AuditEvent(
                study=study,
                action=AuditAction.SUBMITTED,
                actor_id=read.reader_pk,
                example_id=example_pk,
                subject_id=read.reader_pk,
                after={"assignment": str(read.assignment_public_id), "slot": read.slot, "rating": read.rating},
            )
        )
    Annotation.objects.bulk_create(annotations, batch_size=BATCH_SIZE)
    AuditEvent.objects.bulk_create(events, batch_size=BATCH_SIZE)
    for report_a_type, pks in by_report_a.items():
        for start in range(0, len(pks), BATCH_SIZE):
            Assignment.objects.filter(pk__in=pks[start : start + BATCH_SIZE]).update(
                status=AssignmentStatus.DONE, first_shown_at=rater.shown_at, report_a_type=report_a_type
            )


def _initial_reads(study) -> dict[int, dict]:
    """example pk -> {task, pair, public_id, reads: {slot: (assignment pk, public id, reader pk)}} of open reads."""
    from annotation.models import Assignment, AssignmentStatus

    examples: dict[int, dict] = {}
    rows = Assignment.objects.filter(example__study=study, status=AssignmentStatus.OPEN, slot__in=(1, 2)).values_list(
        "example_id", "example__task", "example__pair_id", "example__public_id", "slot", "pk", "public_id", "reader_id"
    )
    for example_pk, task, pair_pk, example_public_id, slot, pk, public_id, reader_pk in rows.iterator(
        chunk_size=10_000
    ):
        entry = examples.setdefault(
            example_pk, {"task": task, "pair": pair_pk, "public_id": example_public_id, "reads": {}}
        )
        entry["reads"][slot] = (pk, public_id, reader_pk)
    return examples


def fill_first_reads(study, *, fraction: float, seed: int) -> int:
    """Store the slot-1 read of a random fraction of the examples (their state stays 'waiting')."""
    from annotation.models import Task

    rater = _Rater(study, seed)
    reads = []
    for example_pk, entry in sorted(_initial_reads(study).items()):
        if 1 not in entry["reads"] or rater.rng.random() >= fraction:
            continue
        pk, public_id, reader_pk = entry["reads"][1]
        task = entry["task"]
        report_a = rater.coin_report_a() if task == Task.EQUIVALENCE else ""
        reads.append((example_pk, task, _Read(pk, public_id, reader_pk, 1, rater.rating(task), report_a)))
    for start in range(0, len(reads), 20_000):
        _store_reads(study, rater, reads[start : start + 20_000])
    return len(reads)


def fill_ratings(study, *, seed: int) -> dict[str, int]:
    """Rate every example to consensus, as the protocol would have: two reads that agree
    (unanimous); a third read that sides with one of two (majority); or three different reads
    and an adjudicator (adjudicated). Third readers never read the example or, in Task 1, the
    pair's other version before; Task 2's initial A/B orders are counterbalanced."""
    from annotation.models import (
        Assignment,
        AuditAction,
        AuditEvent,
        Example,
        ExampleState,
        MemberRole,
        ReportType,
        StudyMember,
        Task,
        tiebreak,
    )
    from consensus.models import Adjudication, AdjudicationStatus, ConsensusLabel, LabelSource

    rater = _Rater(study, seed)
    examples = _initial_reads(study)
    readers = list(
        StudyMember.objects.filter(study=study, role=MemberRole.READER, active=True).values_list("user_id", flat=True)
    )
    adjudicators = list(
        StudyMember.objects.filter(study=study, role=MemberRole.ADJUDICATOR, active=True).values_list(
            "user_id", flat=True
        )
    )
    pair_task1_readers: dict[int, set[int]] = defaultdict(set)
    for entry in examples.values():
        if entry["task"] == Task.REALISM:
            pair_task1_readers[entry["pair"]].update(reader for _, _, reader in entry["reads"].values())

    counts = {LabelSource.UNANIMOUS: 0, LabelSource.MAJORITY: 0, LabelSource.ADJUDICATED: 0}
    keys = sorted(examples)
    chunk = 10_000
    for start in range(0, len(keys), chunk):
        reads, labels, events, third_reads, adjudications = [], [], [], [], []
        for example_pk in keys[start : start + chunk]:
            entry = examples[example_pk]
            if set(entry["reads"]) != {1, 2}:
                continue
            task = entry["task"]
            first, second = entry["reads"][1], entry["reads"][2]
            report_a = rater.coin_report_a() if task == Task.EQUIVALENCE else ""
            other_a = {ReportType.ORIGINAL: ReportType.ALTERNATIVE, ReportType.ALTERNATIVE: ReportType.ORIGINAL}
            r1 = rater.rating(task)
            draw = rater.rng.random()
            pool = _third_reader_pool(entry, readers, pair_task1_readers)
            if draw < AGREE_SHARE or not pool:
                r2, r3, source = r1, None, LabelSource.UNANIMOUS
            elif draw < 1 - THREE_WAY_SHARE or not adjudicators:
                r2 = rater.other_rating(task, r1)
                r3, source = rater.rng.choice([r1, r2]), LabelSource.MAJORITY
            else:
                r2 = rater.other_rating(task, r1)
                r3, source = rater.other_rating(task, r1, r2), LabelSource.ADJUDICATED
            reads.append((example_pk, task, _Read(*first, 1, r1, report_a)))
            reads.append((example_pk, task, _Read(*second, 2, r2, other_a.get(report_a, ""))))
            final = r1
            if r3 is not None:
                reader_pk = rater.rng.choice(pool)
                if task == Task.REALISM:
                    pair_task1_readers[entry["pair"]].add(reader_pk)
                third = Assignment(
                    example_id=example_pk,
                    study=study,
                    task=task,
                    reader_id=reader_pk,
                    slot=3,
                    queue_order=tiebreak(study.seed, "queue", reader_pk, entry["public_id"]),
                )
                third_reads.append((example_pk, task, third, r3))
                events.append(
                    AuditEvent(
                        study=study,
                        action=AuditAction.THIRD_READ_ROUTED,
                        example_id=example_pk,
                        subject_id=reader_pk,
                        after={"assignment": str(third.public_id), "slot": 3},
                    )
                )
                final = r3 if source == LabelSource.MAJORITY else rater.rng.choice([r1, r2, r3])
                if source == LabelSource.ADJUDICATED:
                    adjudicator_pk = rater.rng.choice(adjudicators)
                    adjudication = Adjudication(
                        example_id=example_pk,
                        adjudicator_id=adjudicator_pk,
                        status=AdjudicationStatus.DONE,
                        task=task,
                        rating=final,
                        rationale=rater.rng.choice(RATIONALES),
                        form_token=uuid.uuid4(),
                        report_a_type=rater.coin_report_a() if task == Task.EQUIVALENCE else "",
                        first_shown_at=rater.shown_at,
                        decided_at=rater.now,
                    )
                    adjudications.append(adjudication)
                    events.append(
                        AuditEvent(
                            study=study,
                            action=AuditAction.ADJUDICATION_ROUTED,
                            example_id=example_pk,
                            subject_id=adjudicator_pk,
                            after={"adjudication": str(adjudication.public_id)},
                        )
                    )
                    events.append(
                        AuditEvent(
                            study=study,
                            action=AuditAction.ADJUDICATED,
                            actor_id=adjudicator_pk,
                            example_id=example_pk,
                            subject_id=adjudicator_pk,
                            after={"adjudication": str(adjudication.public_id), "rating": final},
                        )
                    )
            n_annotations = 2 if source == LabelSource.UNANIMOUS else 3
            labels.append(
                ConsensusLabel(
                    example_id=example_pk, task=task, rating=final, label_source=source, n_annotations=n_annotations
                )
            )
            events.append(
                AuditEvent(
                    study=study,
                    action=AuditAction.CONSENSUS,
                    example_id=example_pk,
                    after={"rating": final, "label_source": source, "n_annotations": n_annotations},
                )
            )
            counts[source] += 1
        Assignment.objects.bulk_create([third for _, _, third, _ in third_reads], batch_size=BATCH_SIZE)
        for example_pk, task, third, rating in third_reads:
            report_a = rater.coin_report_a() if task == Task.EQUIVALENCE else ""
            reads.append((example_pk, task, _Read(third.pk, third.public_id, third.reader_id, 3, rating, report_a)))
        _store_reads(study, rater, reads)
        Adjudication.objects.bulk_create(adjudications, batch_size=BATCH_SIZE)
        ConsensusLabel.objects.bulk_create(labels, batch_size=BATCH_SIZE)
        AuditEvent.objects.bulk_create(events, batch_size=BATCH_SIZE)
        Example.objects.filter(pk__in=[label.example_id for label in labels]).update(state=ExampleState.CONSENSUS)
    return {str(source): n for source, n in counts.items()}


def _third_reader_pool(entry: dict, readers: list[int], pair_task1_readers: dict[int, set[int]]) -> list[int]:
    from annotation.models import Task

    excluded = {reader for _, _, reader in entry["reads"].values()}
    if entry["task"] == Task.REALISM:
        excluded |= pair_task1_readers[entry["pair"]]
    return [reader for reader in readers if reader not in excluded]


# --- The whole study ----------------------------------------------------------------------------


def generate_study(
    *,
    slug: str,
    pairs: int,
    readers: int,
    adjudicators: int = 2,
    seed: int = 2026,
    first_reads: float = 0.0,
    with_ratings: bool = False,
    assign: bool = True,
    log: Log = print,
) -> GeneratedStudy:
    """Create the study (Django must be set up). Refuses a slug that is already taken."""
    from django.db import transaction

    from annotation.models import Assignment, Example, ReaderQueue, Study
    from annotation.services import sample_pairs
    from consensus.assignment import assign_readers

    if not assign and (with_ratings or first_reads > 0):
        raise ValueError("Ratings need assigned reads: generate them with assign=True.")
    if Study.objects.filter(slug=slug).exists():
        sys.exit(f"A study '{slug}' already exists in this database. Use another --slug or a fresh database.")
    timings = Timings(log)
    log(f"Generating study '{slug}': {pairs} pairs, {readers} readers, {adjudicators} adjudicators")
    with timings.step("study and pairs"), transaction.atomic():
        study = Study.objects.create_with_taxonomy(slug=slug, name=f"Benchmark study ({pairs} pairs)")
        Study.objects.filter(pk=study.pk).update(seed=seed)
        study.refresh_from_db()
        create_pairs(study, pairs)
    with timings.step("sample_pairs (service)"):
        cells = len(DATASETS) * study.variations.count()
        sample_pairs(study, per_variation=math.ceil(pairs / cells))
    with timings.step("people and tokens"):
        coordinator, reader_names = create_people(study, readers=readers, adjudicators=adjudicators, slug=slug)
    if assign:
        with timings.step("assign_readers (service)"):
            report = assign_readers(study, actor=coordinator)
        log(f"  {report.summary}")
    if with_ratings:
        with timings.step("ratings to consensus"), transaction.atomic():
            counts = fill_ratings(study, seed=seed)
        log(f"  consensus: {counts}")
    elif first_reads > 0:
        with timings.step("first reads"), transaction.atomic():
            stored = fill_first_reads(study, fraction=first_reads, seed=seed)
        log(f"  stored the first read of {stored} examples")
    if with_ratings or first_reads > 0:
        # The reads above were written in bulk, past the services that keep the queue counters.
        with timings.step("queue counters"):
            ReaderQueue.objects.recount(study)
    with timings.step("vacuum analyze"):
        _vacuum_analyze()
    total = sum(timings.steps.values())
    log(f"  {'total':<28} {total:8.2f} s")
    return GeneratedStudy(
        slug=slug,
        pairs=pairs,
        examples=Example.objects.filter(study=study).count(),
        assignments=Assignment.objects.filter(example__study=study).count(),
        readers=reader_names,
        timings=timings.steps,
    )


def _vacuum_analyze() -> None:
    """Planner statistics and visibility map as autovacuum would leave them soon after a bulk load
    (so that it does not run in the middle of a benchmark)."""
    from django.db import connection

    if connection.vendor == "postgresql":
        with connection.cursor() as cursor:
            cursor.execute("VACUUM ANALYZE")


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--pairs", type=int, default=50_000)
    parser.add_argument("--readers", type=int, default=20)
    parser.add_argument("--adjudicators", type=int, default=2)
    parser.add_argument("--database-url", help="default: $DATABASE_URL")
    parser.add_argument("--slug", default="bench")
    parser.add_argument("--seed", type=int, default=2026)
    ratings = parser.add_mutually_exclusive_group()
    ratings.add_argument("--first-reads", type=float, default=0.0, help="fraction of examples with a stored first read")
    ratings.add_argument("--with-ratings", action="store_true", help="rate every example to consensus")
    ratings.add_argument(
        "--no-assign", action="store_true", help="leave the examples unassigned (for the assignment benchmark)"
    )
    args = parser.parse_args(argv)
    if args.pairs < 1 or args.readers < 4:
        parser.error("need at least 1 pair and 4 readers (the two Task 1 versions of a pair go to 4 readers)")
    if not 0 <= args.first_reads <= 1:
        parser.error("--first-reads is a fraction from 0 to 1")
    setup_django(args.database_url)
    generate_study(
        slug=args.slug,
        pairs=args.pairs,
        readers=args.readers,
        adjudicators=args.adjudicators,
        seed=args.seed,
        first_reads=args.first_reads,
        with_ratings=args.with_ratings,
        assign=not args.no_assign,
    )


if __name__ == "__main__":
    main()
