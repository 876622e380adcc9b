"""load_demo --with-ratings: the demo study read to the end through the services, ready to export."""

import io
import time

import pytest
from django.contrib.auth import get_user_model
from django.core.management import call_command
from django.tasks import default_task_backend
from django.test import override_settings

from annotation.models import (
    THIRD_READ_SLOT,
    Annotation,
    Assignment,
    AssignmentStatus,
    AuditAction,
    AuditEvent,
    Example,
    ExampleState,
    MemberRole,
    ReaderQueue,
    Role,
    Study,
    StudyMember,
    Task,
)
from annotation.practice import pending_step
from consensus.models import Adjudication, AdjudicationStatus, ConsensusLabel, LabelSource
from exports.models import ReleaseStatus
from exports.services import request_release
from exports.tasks import build_release_task
from judges.models import JudgeRead
from reading.management.commands.load_demo import (
    DEMO_USERS,
    RATIONALES,
    TO_READ_SLUG,
    rationale_choices,
    read_one_example_to_a_split,
    reading_plans,
)
from tests.factories import make_reading_study, make_user
from tests.invariants import exams_given_twice, queue_counter_mismatches
from tests.module_data import rolled_back

pytestmark = pytest.mark.django_db


def _load(*args: str) -> str:
    out = io.StringIO()
    with override_settings(DEBUG=True):
        call_command("load_demo", *args, stdout=out)
    return out.getvalue()


def _state() -> tuple:
    return (
        Annotation.objects.count(),
        Assignment.objects.count(),
        Adjudication.objects.count(),
        ConsensusLabel.objects.count(),
        StudyMember.objects.count(),
        AuditEvent.objects.count(),
    )


@pytest.fixture(scope="module")
def loaded_once(django_db_setup, django_db_blocker):
    """Load and read the demo once for the module, in a transaction rolled back at its end."""
    with rolled_back(django_db_blocker):
        started = time.monotonic()
        out = _load("--with-ratings")
        elapsed = time.monotonic() - started
        yield out, elapsed


@pytest.fixture
def demo(loaded_once, db):
    out, elapsed = loaded_once
    return Study.objects.get(slug="demo"), out, elapsed


def test_every_example_ends_with_a_consensus_or_waits_for_someone(demo):
    study, _, _ = demo

    for example in Example.objects.filter(study=study):
        has_consensus = ConsensusLabel.objects.filter(example=example).exists()
        waiting = example.state != ExampleState.CONSENSUS and (
            example.assignments.open().exists() or example.adjudications.filter(status=AdjudicationStatus.OPEN).exists()
        )
        assert has_consensus or waiting, example
    # Nothing is left open: the simulation reads to the end.
    assert Example.objects.filter(study=study).exclude(state=ExampleState.CONSENSUS).count() == 0
    assert not Assignment.objects.filter(example__study=study, status=AssignmentStatus.OPEN).exists()


def test_it_gives_a_realistic_mix(demo):
    study, out, _ = demo
    consensus = ConsensusLabel.objects.filter(example__study=study)
    sources = {source: consensus.filter(label_source=source).count() for source in LabelSource.values}

    assert sum(sources.values()) == 57
    assert sources[LabelSource.UNANIMOUS] > sources[LabelSource.MAJORITY] > sources[LabelSource.ADJUDICATED] >= 1
    assert Annotation.objects.filter(example__study=study, assignment__slot=THIRD_READ_SLOT).exists()
    assert Adjudication.objects.filter(example__study=study, status=AdjudicationStatus.DONE).exists()
    for task in Task.values:  # both tasks show third reads and a three-way split
        assert consensus.filter(task=task, label_source=LabelSource.MAJORITY).exists()
        assert consensus.filter(task=task, label_source=LabelSource.ADJUDICATED).exists()
    assert "third reads" in out
    assert f"57 of 57 examples have a consensus ({sources['unanimous']} unanimous" in out


def test_the_consensus_follows_the_seeded_plan(demo):
    study, _, _ = demo
    plans = reading_plans(study)

    for label in ConsensusLabel.objects.filter(example__study=study):
        plan = plans[label.example_id]
        ratings = sorted(Annotation.objects.filter(example_id=label.example_id).values_list("rating", flat=True))
        assert ratings == sorted(plan.reads)
        if plan.adjudication:
            assert (label.label_source, label.rating) == (LabelSource.ADJUDICATED, plan.adjudication)


def test_it_goes_through_the_services(demo):
    study, _, _ = demo
    annotations = Annotation.objects.filter(example__study=study)
    adjudications = Adjudication.objects.filter(example__study=study, status=AdjudicationStatus.DONE)
    events = AuditEvent.objects.filter(study=study)

    people = events.exclude(subject__username="rules-judge")
    assert people.filter(action=AuditAction.SUBMITTED).count() == annotations.count()
    # The rule-based judge read every example through the reader API, apart from the people.
    assert events.filter(action=AuditAction.SUBMITTED, subject__username="rules-judge").count() == 57
    assert JudgeRead.objects.rated().filter(study=study).count() == 57
    assert events.filter(action=AuditAction.ADJUDICATED).count() == adjudications.count()
    assert events.filter(action=AuditAction.CONSENSUS).count() == 57
    assert events.filter(action=AuditAction.THIRD_READ_ROUTED).count() == annotations.filter(assignment__slot=3).count()
    assert events.filter(action=AuditAction.ADJUDICATION_ROUTED).count() == adjudications.count()
    assert people.filter(action=AuditAction.MEMBER_ADDED).count() == 10  # nine readers and the adjudicator
    # Shown before rated, as in the reading room: time on task and the A/B order are recorded.
    assert not annotations.filter(assignment__first_shown_at__isnull=True).exists()
    assert not annotations.filter(task=Task.EQUIVALENCE, report_a_type="").exists()
    assert not adjudications.filter(first_shown_at__isnull=True).exists()
    # Third reads included, no reader was given two items of one exam (the study keeps them apart).
    assert study.keep_versions_apart and exams_given_twice(study) == {}


def test_it_enrols_the_demo_readers_and_adjudicator(demo):
    study, _, _ = demo
    members = set(StudyMember.objects.filter(study=study, active=True).values_list("user__username", "role"))

    expected = {
        (username, MemberRole.READER if Role.READER in roles else MemberRole.ADJUDICATOR)
        for username, roles, _ in DEMO_USERS
        if Role.READER in roles or Role.ADJUDICATOR in roles
    }
    assert members == expected
    assert {username for username, role in members if role == MemberRole.READER} == {f"reader{i}" for i in range(1, 10)}


def test_it_is_idempotent(demo):
    before = _state()

    out = _load("--with-ratings")

    assert _state() == before
    assert "Nothing left to simulate" in out


def test_the_rated_demo_study_can_be_released_at_once(demo, settings, tmp_path, django_capture_on_commit_callbacks):
    study, _, _ = demo
    settings.RELEASES_DIR = tmp_path
    default_task_backend.clear()
    assert study.license_text  # the form and the API have a licence to start from

    with django_capture_on_commit_callbacks(execute=True):
        release = request_release(
            study,
            user=make_user(Role.DATA_MANAGER),
            version="1.0.0",
            datasets=None,
            include_unfinished=False,
            license_text=study.license_text,
        )
    build_release_task.call(str(release.public_id))

    release.refresh_from_db()
    assert release.status == ReleaseStatus.DONE
    annotations = Annotation.objects.filter(example__study=study)
    assert release.row_counts["task1/task1_consensus.csv"] == 38
    assert release.row_counts["task2/task2_consensus.csv"] == 19
    assert (
        release.row_counts["task1/task1_full.csv"] + release.row_counts["task2/task2_full.csv"] == annotations.count()
    )
    adjudicated = ConsensusLabel.objects.filter(example__study=study, label_source=LabelSource.ADJUDICATED)
    assert release.row_counts["task1/task1_disagreed.csv"] == adjudicated.filter(task=Task.REALISM).count()


def test_it_leaves_a_second_study_to_read_with_work_for_every_role(demo):
    _, out, _ = demo
    study = Study.objects.get(slug=TO_READ_SLUG)
    open_reads = Assignment.objects.filter(example__study=study, status=AssignmentStatus.OPEN)

    # Every demo reader logs in to a queue with Task 1 and Task 2 items.
    for number in range(1, 10):
        tasks = set(open_reads.filter(reader__username=f"reader{number}").values_list("task", flat=True))
        assert tasks == {Task.REALISM, Task.EQUIVALENCE}, number
    # ... and the adjudicator to one three-way split.
    (adjudication,) = Adjudication.objects.filter(example__study=study)
    assert adjudication.status == AdjudicationStatus.OPEN
    assert adjudication.adjudicator.username == "adjudicator"
    assert Annotation.objects.filter(example=adjudication.example).values("rating").distinct().count() == 3
    # The rest is unread.
    assert Annotation.objects.filter(example__study=study).count() == 3
    # The printed logins say so.
    assert f"reader1      reader (cardiothoracic); waiting in '{study.name}': Task 1 items and Task 2 items" in out
    assert (
        f"adjudicator  adjudicator (cardiothoracic); waiting in '{study.name}': 1 three-way split to adjudicate" in out
    )


def test_its_rationales_fit_the_variation_of_the_pair(demo):
    rated = Annotation.objects.exclude(rationale="").values_list("rating", "rationale", "example__pair__variation__key")
    adjudicated = Adjudication.objects.exclude(rationale="").values_list(
        "rating", "rationale", "example__pair__variation__key"
    )

    assert rated and adjudicated
    for rating, rationale, variation in [*rated, *adjudicated]:
        assert rationale in rationale_choices(rating, variation), (rating, rationale, variation)
    # A negation rationale never lands on another kind of pair.
    negation = {r for choices in RATIONALES["negation"].values() for r in choices}
    assert not rated.exclude(example__pair__variation__key__startswith="negation").filter(rationale__in=negation)


def test_it_says_what_it_imported_before_what_it_sampled(demo):
    _, out, _ = demo
    assert out.index("Imported 48 new pairs") < out.index("Sampled 19 pairs")


def test_the_split_is_read_even_when_the_examples_first_reads_wait_in_a_reserve():
    # Whether a read is held is a draw on the examples' random ids: the demo's adjudicator once found
    # no split in about one demo of six, when every Task 1 example had a first read in a reserve.
    study, _, _ = make_reading_study(pairs=3, reserve_percent=80)
    task1 = Assignment.objects.filter(example__study=study, task=Task.REALISM, status=AssignmentStatus.OPEN)
    task1.update(held=True)
    ReaderQueue.objects.recount(study)

    read_one_example_to_a_split(study)

    (adjudication,) = Adjudication.objects.filter(example__study=study)
    assert adjudication.status == AdjudicationStatus.OPEN
    assert Annotation.objects.filter(example=adjudication.example).values("rating").distinct().count() == 3
    assert queue_counter_mismatches(study) == {}


def test_the_study_to_read_has_a_guide_and_practice_items_to_try(demo):
    study = Study.objects.get(slug=TO_READ_SLUG)
    reader = get_user_model().objects.get(username="reader1")

    assert study.guide_number == 1
    assert study.practice_items_required == 2
    assert {task: study.practice_items.filter(task=task).count() >= 2 for task in Task.values} == {
        Task.REALISM: True,
        Task.EQUIVALENCE: True,
    }
    # reader1's first step there is the guide, then practice.
    assert pending_step(reader, study, Task.REALISM).kind == "guide"
