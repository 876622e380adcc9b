import random
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from django.conf import settings
from django.contrib.auth import get_user_model
from django.contrib.auth.models import AbstractBaseUser
from django.core.management.base import BaseCommand, CommandError, CommandParser
from django.db import transaction
from django.db.models import Count, Q

from annotation.guide import publish_guide
from annotation.models import (
    RATINGS_WITHOUT_RATIONALE,
    TASK_RATINGS,
    THIRD_READ_SLOT,
    Annotation,
    Assignment,
    AssignmentStatus,
    AuditAction,
    Example,
    ExampleState,
    MemberRole,
    RatingChoice,
    ReaderQueue,
    Role,
    Study,
    StudyMember,
    Subspecialty,
    Task,
)
from annotation.practice import import_practice_items, set_practice_requirement
from annotation.roles import enrolment_warning, grant_role, user_roles
from annotation.services import import_pairs, sample_pairs
from consensus import reserve
from consensus.assignment import add_study_member, assign_readers
from consensus.models import Adjudication, AdjudicationStatus, ConsensusLabel, LabelSource
from consensus.services import NoSuchWork, show_adjudication, show_assignment, submit_adjudication, submit_annotation
from judges.client import InProcessTransport
from judges.models import JudgeEnrolment
from judges.services import enrol_judge
from tools.judge_client import rule_based_judge
from tools.judge_client import run as run_judge

DEMO_PAIRS = Path(__file__).resolve().parents[2] / "demo" / "pairs.jsonl"
DEMO_GUIDE = Path(__file__).resolve().parents[2] / "demo" / "guide.md"
# The study to read has practice items too, so that the guide and the practice round can be tried.
DEMO_PRACTICE = Path(__file__).resolve().parents[2] / "demo" / "practice.csv"
DEMO_PRACTICE_REQUIRED = 2
DEMO_SLUG = "demo"
# The second demo study, left unread: the demo readers' queues have work in it.
TO_READ_SLUG = "demo-to-read"
TO_READ_NAME = "Demo study 2 (to read)"
TO_READ_DATASETS = ["iu-xray"]
DEMO_SEED = 20260
DEMO_PASSWORD = "readingroom-demo"  # noqa: S105 - published on purpose, refused outside the demo or DEBUG
DEMO_LICENSE = (
    "ReadingRoom demo study: fictional reports written for this project, not taken from any dataset.\n"
    "Free to use for any purpose, without warranty.\n"
)

# username, roles, subspecialty
DEMO_USERS: tuple[tuple[str, tuple[str, ...], str | None], ...] = (
    ("reader1", (Role.READER,), Subspecialty.CARDIOTHORACIC),
    ("reader2", (Role.READER,), Subspecialty.GENERAL),
    ("reader3", (Role.READER,), Subspecialty.ABDOMEN_PELVIS),
    ("reader4", (Role.READER,), Subspecialty.NEURORADIOLOGY),
    ("reader5", (Role.READER,), Subspecialty.GENERAL),
    ("reader6", (Role.READER,), Subspecialty.CARDIOTHORACIC),
    # Nine readers: the demo studies draw at most one pair per exam and keep an exam's items apart,
    # so an exam's three items (two Task 1 versions, one Task 2) take six readers for their initial
    # reads, and a third read of each of them one more reader who has read none of the three.
    ("reader7", (Role.READER,), Subspecialty.GENERAL),
    ("reader8", (Role.READER,), Subspecialty.NEURORADIOLOGY),
    ("reader9", (Role.READER,), Subspecialty.ABDOMEN_PELVIS),
    ("adjudicator", (Role.ADJUDICATOR,), Subspecialty.CARDIOTHORACIC),
    ("coordinator", (Role.COORDINATOR,), None),
    ("datamanager", (Role.DATA_MANAGER,), None),
    # An automated judge (a program, not a person): with --with-ratings it reads the whole study
    # through the reader API, so the Results page has its "Automated judges" section.
    ("rules-judge", (Role.JUDGE,), None),
)


class Command(BaseCommand):
    help = "Load the demo study (synthetic reports) and one user per role. Safe to run again."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument(
            "--force",
            action="store_true",
            help="Run even outside the demo (READINGROOM_DEMO) and DEBUG (the demo password is public).",
        )
        parser.add_argument(
            "--with-ratings",
            action="store_true",
            help="Also enrol the demo readers and adjudicator and simulate the whole reading (reads, third reads, "
            "adjudications) through the usual services, so that there is something to export. Safe to run again.",
        )

    def handle(self, *args, **options) -> None:
        self.warned: set[str] = set()
        if not (settings.DEMO or settings.DEBUG) and not options["force"]:
            raise CommandError(
                "load_demo creates users with a published password. Run it on your own machine's database "
                "with READINGROOM_DEMO=1 (as bin/demo does) or DEBUG=1, or pass --force if you really mean to."
            )
        with transaction.atomic():
            study = Study.objects.filter(slug=DEMO_SLUG).first()
            if study is None:
                study = Study.objects.create_with_taxonomy(slug=DEMO_SLUG, name="Demo study (synthetic reports)")
            report = import_pairs(study, DEMO_PAIRS.read_bytes(), filename=DEMO_PAIRS.name)
            self.stdout.write(report.summary)
            if not study.reading_has_started():
                sample = sample_pairs(study, per_variation=1, seed=DEMO_SEED, one_pair_per_exam=True)
                self.stdout.write(sample.summary)
            if not study.license_text:
                study.license_text = DEMO_LICENSE
                study.save(update_fields=["license_text"])
            User = get_user_model()
            for username, roles, subspecialty in DEMO_USERS:
                user, created = User.objects.get_or_create(
                    username=username, defaults={"email": f"{username}@demo.invalid"}
                )
                if created:
                    user.set_password(DEMO_PASSWORD)
                    user.save()
                for role in roles:
                    grant_role(user, role, subspecialty=subspecialty)
            admin, created = User.objects.get_or_create(
                username="admin", defaults={"is_staff": True, "is_superuser": True, "email": "admin@demo.invalid"}
            )
            if created:
                admin.set_password(DEMO_PASSWORD)
                admin.save()

        self.stdout.write(load_demo_guide(study))
        if options["with_ratings"]:
            self._simulate_reading(study)
            to_read = self._open_study_to_read()
        if options["with_ratings"]:
            ready = f"Demo studies '{study.slug}' (read to the end) and '{to_read.slug}' (to read) are ready."
        else:
            ready = f"Demo study '{study.slug}' is ready."
        self.stdout.write(self.style.SUCCESS(ready))
        self.stdout.write(f"Demo logins (password for all: {DEMO_PASSWORD}):")
        for username, roles, subspecialty in DEMO_USERS:
            detail = ", ".join(roles) + (f" ({subspecialty})" if subspecialty else "")
            if options["with_ratings"]:
                detail += waiting_work(to_read, username)
            self.stdout.write(f"  {username:<12} {detail}")
        self.stdout.write(f"  {'admin':<12} administrator (the admin site, and unlocking locked-out users)")

    def _enrol_and_assign(self, study: Study) -> None:
        """Enrol the demo readers and adjudicator in the study, and assign what waits for readers."""
        User = get_user_model()
        coordinator = User.objects.get(username="coordinator")
        member_roles = {Role.READER: MemberRole.READER, Role.ADJUDICATOR: MemberRole.ADJUDICATOR}
        for username, roles, _ in DEMO_USERS:
            for role in (member_roles[r] for r in roles if r in member_roles):
                user = User.objects.get(username=username)
                if not StudyMember.objects.filter(study=study, user=user, role=role, active=True).exists():
                    add_study_member(study, user, role, actor=coordinator)
                    warning = enrolment_warning(username, user_roles(user))
                    if warning and username not in self.warned:  # once, though enrolled in both studies
                        self.warned.add(username)
                        self.stderr.write(self.style.WARNING(warning))
        if Example.objects.filter(study=study, state=ExampleState.WAITING).exists():
            assign_readers(study, actor=coordinator)

    def _simulate_reading(self, study: Study) -> None:
        self._enrol_and_assign(study)
        with transaction.atomic():
            simulated = simulate_reading(study)
        self.stdout.write(reading_summary(study, simulated=simulated))
        self._run_judge(study, get_user_model().objects.get(username="coordinator"))

    def _run_judge(self, study: Study, coordinator: AbstractBaseUser) -> None:
        """Enrol the rule-based judge (once) and let tools/judge_client.py rate what it has not rated yet."""
        judge = get_user_model().objects.get(username="rules-judge")
        if not JudgeEnrolment.objects.filter(study=study, judge=judge).exists():
            enrol_judge(study, judge=judge, tasks=list(Task.values), actor=coordinator)
        report = run_judge(InProcessTransport(judge), rule_based_judge, study=study.slug)
        self.stdout.write(f"Automated judge rules-judge: {report.total} items rated through the reader API.")

    def _open_study_to_read(self) -> Study:
        """The second demo study: sampled and assigned, left for the demo readers to read.

        So that a newcomer logging in as reader1 finds Task 1 and Task 2 items, and the
        adjudicator one three-way split (one example is read to a split, through the services).
        """
        with transaction.atomic():
            study = Study.objects.filter(slug=TO_READ_SLUG).first()
            if study is None:
                study = Study.objects.create_with_taxonomy(slug=TO_READ_SLUG, name=TO_READ_NAME)
            report = import_pairs(study, DEMO_PAIRS.read_bytes(), filename=DEMO_PAIRS.name)
            self.stdout.write(f"{TO_READ_NAME}: {report.summary}")
            if not study.reading_has_started():
                sample = sample_pairs(
                    study, per_variation=1, seed=DEMO_SEED + 1, datasets=TO_READ_DATASETS, one_pair_per_exam=True
                )
                self.stdout.write(f"{TO_READ_NAME}: {sample.summary}")
            if not study.license_text:
                study.license_text = DEMO_LICENSE
                study.save(update_fields=["license_text"])
            self._enrol_and_assign(study)
            read_one_example_to_a_split(study)
            self.stdout.write(f"{TO_READ_NAME}: {load_demo_guide(study)}")
            self.stdout.write(f"{TO_READ_NAME}: {load_demo_practice(study)}")
        return study


# --- Simulated reading (load_demo --with-ratings) ------------------------------------------------

# How often each outcome is drawn: most examples agree at two reads, some need a third reader,
# a few split three ways and go to the adjudicator.
OUTCOMES = (("unanimous", 0.72), ("majority", 0.22), ("split", 0.06))
# The readers' labels, most often the first (Realistic / Equivalent).
LABEL_WEIGHTS = (0.6, 0.28, 0.12)
# Canned rationales, per family of variations (the part of the variation key before "--"), so
# that a rationale fits the pair it is given for: a negation pair is never "too hedged".
RATIONALES: dict[str, dict[str, tuple[str, ...]]] = {
    "structure": {
        RatingChoice.MINOR_ISSUES: ("The section headings read as templated.", "The numbered list is unusual here."),
        RatingChoice.MAJOR_ISSUES: ("The layout breaks findings into fragments no radiologist would dictate.",),
        RatingChoice.MINOR_DISCREPANCY: ("Reorganised into sections; the findings are the same.",),
        RatingChoice.MAJOR_DISCREPANCY: ("A finding was lost when the report was reorganised.",),
    },
    "hedging": {
        RatingChoice.MINOR_ISSUES: ("A little more hedged than usual.", "The qualifiers pile up in one sentence."),
        RatingChoice.MAJOR_ISSUES: ("So hedged that no finding is stated.",),
        RatingChoice.MINOR_DISCREPANCY: ("The hedging changes the emphasis, not the management.",),
        RatingChoice.MAJOR_DISCREPANCY: ("A definite finding became only possible; that changes management.",),
    },
    "negation": {
        RatingChoice.MINOR_ISSUES: ("The pertinent negatives are phrased unusually.",),
        RatingChoice.MAJOR_ISSUES: ("The negatives contradict the findings.",),
        RatingChoice.MINOR_DISCREPANCY: ("Fewer pertinent negatives are stated; nothing changes clinically.",),
        RatingChoice.MAJOR_DISCREPANCY: ("A pertinent negative is missing that a clinician would look for.",),
    },
    "anatomical_granularity": {
        RatingChoice.MINOR_ISSUES: ("The anatomical locations are unusually vague.", "Oddly precise segment names."),
        RatingChoice.MAJOR_ISSUES: ("The locations given do not match the rest of the report.",),
        RatingChoice.MINOR_DISCREPANCY: ("The location is less precise; the finding is the same.",),
        RatingChoice.MAJOR_DISCREPANCY: ("The location is too vague to guide a procedure.",),
    },
    "quantitative_granularity": {
        RatingChoice.MINOR_ISSUES: ("Sizes are described in words where a measurement is usual.",),
        RatingChoice.MAJOR_ISSUES: ("The sizes given are implausible.",),
        RatingChoice.MINOR_DISCREPANCY: ("The measurement was replaced by a description; follow-up is unchanged.",),
        RatingChoice.MAJOR_DISCREPANCY: ("Without the measurement the nodule cannot be followed up.",),
    },
    "findings_scope": {
        RatingChoice.MINOR_ISSUES: ("Lists more normal structures than a routine report would.",),
        RatingChoice.MAJOR_ISSUES: ("The findings are too sparse for the impression they support.",),
        RatingChoice.MINOR_DISCREPANCY: ("Adds or drops incidental normal findings only.",),
        RatingChoice.MAJOR_DISCREPANCY: ("Drops a finding that changes management.",),
    },
    "section_assignment": {
        RatingChoice.MINOR_ISSUES: ("Some findings sit in the impression.",),
        RatingChoice.MAJOR_ISSUES: ("The impression repeats the findings without a conclusion.",),
        RatingChoice.MINOR_DISCREPANCY: ("Statements moved between sections; the content is the same.",),
        RatingChoice.MAJOR_DISCREPANCY: ("The conclusion was lost when sections were rearranged.",),
    },
    "terminology": {
        RatingChoice.MINOR_ISSUES: ("One term is unusual for a chest radiograph report.",),
        RatingChoice.MAJOR_ISSUES: ("The terms are used incorrectly.",),
        RatingChoice.MINOR_DISCREPANCY: ("Synonyms only; the meaning is the same.",),
        RatingChoice.MAJOR_DISCREPANCY: ("A substituted term changes the diagnosis.",),
    },
}
# Ratings that need no rationale get one only from the adjudicator, who always gives one.
PLAIN_RATIONALES = {
    RatingChoice.REALISTIC: ("Reads like a routine report.",),
    RatingChoice.EQUIVALENT: ("Same findings and the same recommendation.",),
}


def rationale_choices(rating: str, variation_key: str) -> tuple[str, ...]:
    """The canned rationales for a rating of an example of this variation."""
    if rating in PLAIN_RATIONALES:
        return PLAIN_RATIONALES[rating]
    return RATIONALES[variation_key.split("--")[0]][rating]


@dataclass(frozen=True)
class ReadingPlan:
    """The ratings one example gets, in the order its reads come in, and the adjudicator's."""

    reads: tuple[str, ...]
    adjudication: str | None = None


def reading_plans(study: Study, *, seed: int = DEMO_SEED) -> dict[int, ReadingPlan]:
    """A seeded plan per example: the same outcomes on every database, whoever reads what.

    Examples are ordered by their natural key (not by primary key or public id), and each task
    has at least one majority and one three-way split, so that third reads and adjudication show.
    """
    examples = sorted(
        Example.objects.filter(study=study).values_list(
            "pk", "task", "pair__dataset__key", "pair__source_study_id", "pair__variation__key", "report_type"
        ),
        key=lambda row: row[1:],
    )
    rng = random.Random(f"readingroom-demo-ratings:{seed}")
    plans: dict[int, ReadingPlan] = {}
    for task in (Task.REALISM, Task.EQUIVALENCE):
        of_task = [row[0] for row in examples if row[1] == task]
        if not of_task:
            continue
        outcomes = rng.choices([name for name, _ in OUTCOMES], weights=[w for _, w in OUTCOMES], k=len(of_task))
        for needed, position in (("split", 0), ("majority", len(of_task) // 2)):
            if needed not in outcomes:
                outcomes[position] = needed
        labels = TASK_RATINGS[task]
        for example_pk, outcome in zip(of_task, outcomes, strict=True):
            plans[example_pk] = _plan(outcome, labels, rng)
    return plans


def _plan(outcome: str, labels: tuple[str, ...], rng: random.Random) -> ReadingPlan:
    first = rng.choices(labels, weights=LABEL_WEIGHTS)[0]
    if outcome == "unanimous":
        return ReadingPlan((first, first))
    if outcome == "majority":
        other = rng.choice([label for label in labels if label != first])
        return ReadingPlan(rng.choice([(first, other, first), (other, first, first)]))
    reads = tuple(rng.sample(labels, 3))
    return ReadingPlan(reads, adjudication=rng.choice(reads))


def _rationale(rating: str, variation_key: str, rng: random.Random, *, always: bool = False) -> str:
    if rating in RATINGS_WITHOUT_RATIONALE and not always:
        return ""
    return rng.choice(rationale_choices(rating, variation_key))


def simulate_reading(study: Study, *, seed: int = DEMO_SEED) -> dict[str, int]:
    """Rate every open read and adjudication of the study as its reader would, through the services.

    Each read is shown (show_assignment) and submitted (submit_annotation), so routing, third
    reads, adjudications, consensus and the audit trail all happen as in the reading room. Goes on
    until nothing is open. Ratings follow reading_plans; an example rated differently before
    (by hand) still finishes, with the plan's fallback ratings.
    """
    with _final_at_once(study):
        return _simulate(study, seed)


@contextmanager
def _final_at_once(study: Study) -> Iterator[None]:
    """Simulated reads stand for past work, final as soon as made: undo is off while they are
    stored, and the study keeps its own window for the people who read it next."""
    window = study.undo_window_seconds
    Study.objects.filter(pk=study.pk).update(undo_window_seconds=0)
    try:
        yield
    finally:
        Study.objects.filter(pk=study.pk).update(undo_window_seconds=window)
        # Past work: nobody is reading now, so nobody's reserve waits for them (consensus.reserve).
        ReaderQueue.objects.filter(study=study).update(last_rated_at=None)


def _simulate(study: Study, seed: int) -> dict[str, int]:
    plans = reading_plans(study, seed=seed)
    variations = dict(Example.objects.filter(study=study).values_list("pk", "pair__variation__key"))
    rng = random.Random(f"readingroom-demo-rationales:{seed}")
    done = {"annotations": 0, "adjudications": 0}
    open_reads = Assignment.objects.filter(example__study=study, status=AssignmentStatus.OPEN)
    # Rounds until nothing is open: a read routes at most one more read, and a reserve
    # (consensus.reserve) is given out a read per reader and round once nothing else is open.
    while True:
        reads = list(open_reads.filter(held=False).select_related("reader").order_by("queue_order", "pk"))
        adjudications = list(
            Adjudication.objects.filter(example__study=study, status=AdjudicationStatus.OPEN)
            .select_related("adjudicator")
            .order_by("pk")
        )
        if not reads and not adjudications:
            holders = get_user_model().objects.filter(pk__in=open_reads.filter(held=True).values("reader_id"))
            released = [reserve.release_when_quiet(reader, study_id=study.pk) for reader in holders.order_by("pk")]
            if not any(released):
                break
            continue
        for assignment in reads:
            rated = Annotation.objects.filter(example_id=assignment.example_id, voided_at__isnull=True).count()
            plan = plans[assignment.example_id]
            rating = plan.reads[rated] if rated < len(plan.reads) else plan.reads[0]
            rationale = _rationale(rating, variations[assignment.example_id], rng)
            done["annotations"] += _read(assignment, rating, rationale)
        for adjudication in adjudications:
            plan = plans[adjudication.example_id]
            rating = plan.adjudication or plan.reads[0]
            rationale = _rationale(rating, variations[adjudication.example_id], rng, always=True)
            done["adjudications"] += _adjudicate(adjudication, rating, rationale)
    return done


def read_one_example_to_a_split(study: Study, *, seed: int = DEMO_SEED) -> None:
    """Read one Task 1 example of the study to a three-way split, so that an adjudication waits.

    Does nothing once the study has an adjudication. The example is the first by natural key; a
    first read of it that waits in its reader's reserve (consensus.reserve) is given to them first.
    Its reads are shown and submitted through the services, each with a different label, so the
    second read routes a third reader and the third read routes the adjudicator.
    """
    if Adjudication.objects.filter(example__study=study).exists():
        return
    example = (
        Example.objects.filter(study=study, task=Task.REALISM, state=ExampleState.WAITING)
        .select_related("pair__variation")
        .order_by("pair__dataset__key", "pair__source_study_id", "pair__variation__key", "report_type")
        .first()
    )
    if example is None:
        return
    for held in Assignment.objects.filter(example=example, status=AssignmentStatus.OPEN, held=True):
        reserve.release_read(held)
    rng = random.Random(f"readingroom-demo-split:{seed}")
    labels = TASK_RATINGS[Task.REALISM]
    with _final_at_once(study):
        _read_to_a_split(example, labels, rng)


def _read_to_a_split(example: Example, labels: tuple[str, ...], rng: random.Random) -> None:
    for label in labels:
        assignment = (
            Assignment.objects.filter(example=example, status=AssignmentStatus.OPEN)
            .select_related("reader")
            .order_by("slot", "pk")
            .first()
        )
        if assignment is None:
            return
        _read(assignment, label, _rationale(label, example.pair.variation.key, rng))


def waiting_work(study: Study, username: str) -> str:
    """What waits for a demo user in the study to read, for the printed logins ("" if nothing)."""
    open_reads = dict(
        Assignment.objects.filter(example__study=study, reader__username=username, status=AssignmentStatus.OPEN)
        .values_list("task")
        .annotate(n=Count("pk"))
        .order_by()
    )
    adjudications = Adjudication.objects.filter(
        example__study=study, adjudicator__username=username, status=AdjudicationStatus.OPEN
    ).count()
    waiting = [f"{Task(task).label.split(':')[0]} items" for task in Task.values if open_reads.get(task)]
    if adjudications:
        waiting.append(f"{adjudications} three-way split{'s' if adjudications != 1 else ''} to adjudicate")
    return f"; waiting in '{study.name}': {' and '.join(waiting)}" if waiting else ""


def _read(assignment: Assignment, rating: str, rationale: str) -> int:
    try:
        show_assignment(assignment)
        submit_annotation(
            reader=assignment.reader,
            assignment_id=assignment.public_id,
            rating=rating,
            rationale=rationale,
            form_token=uuid.uuid4(),
        )
    except NoSuchWork:  # withdrawn in the meantime (its example reached a consensus)
        return 0
    return 1


def _adjudicate(adjudication: Adjudication, rating: str, rationale: str) -> int:
    adjudicator: AbstractBaseUser = adjudication.adjudicator
    try:
        show_adjudication(adjudication)
        submit_adjudication(
            adjudicator=adjudicator,
            adjudication_id=adjudication.public_id,
            rating=rating,
            rationale=rationale,
            form_token=uuid.uuid4(),
        )
    except NoSuchWork:
        return 0
    return 1


def reading_summary(study: Study, *, simulated: dict[str, int]) -> str:
    annotations = Annotation.objects.filter(example__study=study, voided_at__isnull=True)
    totals = annotations.aggregate(all=Count("pk"), third=Count("pk", filter=Q(assignment__slot=THIRD_READ_SLOT)))
    adjudicated = Adjudication.objects.filter(example__study=study, status=AdjudicationStatus.DONE).count()
    sources = dict(
        ConsensusLabel.objects.filter(example__study=study)
        .values_list("label_source")
        .annotate(n=Count("pk"))
        .order_by()
    )
    consensus = sum(sources.values())
    examples = Example.objects.filter(study=study).count()
    if simulated["annotations"] or simulated["adjudications"]:
        head = f"Simulated {simulated['annotations']} reads and {simulated['adjudications']} adjudications."
    else:
        head = "Nothing left to simulate: every read and adjudication of the demo study is done."
    by_source = ", ".join(f"{sources.get(source, 0)} {source}" for source in LabelSource.values)
    return (
        f"{head}\nDemo study ratings: {totals['all']} annotations ({totals['third']} third reads), "
        f"{adjudicated} adjudications; {consensus} of {examples} examples have a consensus ({by_source})."
    )


def load_demo_practice(study: Study) -> str:
    """Give the study to read its practice items (reading/demo/practice.csv), and ask readers to rate
    DEMO_PRACTICE_REQUIRED of each task before their first real item, unless a coordinator set
    another number already. Importing the same file again changes nothing."""
    report = import_practice_items(study, DEMO_PRACTICE.read_bytes(), filename=DEMO_PRACTICE.name)
    set_already = study.audit_events.filter(action=AuditAction.PRACTICE_SETTINGS).exists()
    if not study.practice_items_required and not set_already:
        set_practice_requirement(study, DEMO_PRACTICE_REQUIRED, actor=None)
    return (
        f"practice items: {report.created} new, {report.unchanged} already there; readers rate "
        f"{study.practice_items_required} per task before their first item."
    )


def load_demo_guide(study: Study) -> str:
    """Give the demo study its reader guide (reading/demo/guide.md), unless it has a guide already
    (a coordinator's later version is kept). Readers confirm it before their first item."""
    if study.guide_number:
        return f"The demo study's guide is at version {study.guide_number}; left as it is."
    version, _ = publish_guide(study, DEMO_GUIDE.read_text(encoding="utf-8"), author=None)
    return f"Reader guide: version {version.number} published."
