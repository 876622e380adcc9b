"""manage.py assign_readers: automatic assignment from the command line, through the same service."""

import io

import pytest
from django.core.management import CommandError, call_command

from annotation.models import Assignment, AuditAction, AuditEvent, StudyMember, Task
from consensus.blinding import readers_needed
from tests.factories import make_reading_study

pytestmark = pytest.mark.django_db


def _run(*args: str) -> tuple[str, str]:
    stdout, stderr = io.StringIO(), io.StringIO()
    call_command("assign_readers", *args, stdout=stdout, stderr=stderr)
    return stdout.getvalue(), stderr.getvalue()


def _study(*, pairs: int = 3, readers: int = 6):
    # Six readers: as many as an exam's three items, kept apart, need for their initial reads.
    study, reader_users, _ = make_reading_study(pairs=pairs, readers=readers, adjudicators=0, assign=False)
    return study, reader_users


def _readers_line(study, readers: int, tasks=None) -> str:
    """What the command says first: the readers the study needs, and why."""
    needed = readers_needed(study, tasks)
    return (
        f"This study needs at least {needed.initial} active readers, {needed.with_third_reads} to give every "
        f"third read; it has {readers}. {needed.explanation}\n"
    )


def test_it_assigns_every_waiting_example_and_prints_the_summary():
    study, _ = _study()

    stdout, stderr = _run("--study", study.slug, "--no-progress")

    assert stdout == _readers_line(study, 6) + "Assigned 18 reads.\n"
    assert stdout.startswith("This study needs at least 6 active readers, 9 to give every third read; it has 6.")
    assert stderr == ""
    assert Assignment.objects.filter(study=study).count() == 18
    events = AuditEvent.objects.filter(study=study, action=AuditAction.ASSIGNED)
    assert events.count() == 18
    # Run from the shell, by nobody signed in.
    assert not events.filter(actor__isnull=False).exists()


def test_it_assigns_one_task_when_asked():
    study, _ = _study()

    stdout, _ = _run("--study", study.slug, "--task", Task.EQUIVALENCE, "--no-progress")

    # Task 2 only: one item per exam, two readers.
    assert stdout == _readers_line(study, 6, [Task.EQUIVALENCE]) + "Assigned 6 reads.\n"
    assert stdout.startswith("This study needs at least 2 active readers, 3 to give every third read; it has 6.")
    assert set(Assignment.objects.filter(study=study).values_list("task", flat=True)) == {Task.EQUIVALENCE}


def test_it_refuses_an_unknown_task():
    study, _ = _study()
    with pytest.raises(CommandError, match="invalid choice: 'task3'"):
        _run("--study", study.slug, "--task", "task3")
    assert not Assignment.objects.exists()


def test_it_refuses_an_unknown_study(db):
    with pytest.raises(CommandError, match="No study 'nope'"):
        _run("--study", "nope")


def test_it_reports_a_refusal_and_assigns_nothing():
    study, _ = _study(readers=5)

    with pytest.raises(CommandError, match=r"Study .* has 5 active readers and needs at least 6\.") as refused:
        _run("--study", study.slug, "--no-progress")

    assert "Nothing was assigned" in str(refused.value)
    assert not Assignment.objects.exists()
    assert not AuditEvent.objects.filter(action=AuditAction.ASSIGNED).exists()


def test_it_warns_about_reads_it_could_not_assign():
    study, _ = _study()
    StudyMember.objects.filter(study=study).update(max_assignments=2)

    stdout, stderr = _run("--study", study.slug, "--no-progress")

    assert stdout == _readers_line(study, 6) + "Assigned 12 reads. 6 reads could not be assigned.\n"
    assert (
        "6 reads found no eligible reader (caps reached, or too few readers who have not read the example or "
        "another item it is kept apart from)"
    ) in stderr


def test_it_shows_progress_in_examples_on_stderr():
    study, _ = _study()

    stdout, stderr = _run("--study", study.slug)

    assert stdout == _readers_line(study, 6) + "Assigned 18 reads.\n"
    assert "Assigning" in stderr
    assert "9/9" in stderr
