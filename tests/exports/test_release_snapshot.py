"""A build reads one snapshot: ratings submitted or voided during a build cannot make its files disagree.

The build runs as the worker runs it (committed data, no transaction around it), and another
thread, with its own connection, submits one rating and voids another while the build is between
its files. PostgreSQL: a REPEATABLE READ transaction whose snapshot the COPY connections import.
SQLite (WAL): one read transaction; the other thread's writes commit, the build does not see them.
"""

import csv
import io
import threading
import zipfile
from collections import Counter

import pytest
from django.db import connection, connections

from annotation.models import Annotation, Example, RatingChoice, Role, Task
from consensus.models import ConsensusLabel
from consensus.services import void_annotation
from exports import rows
from exports.models import ReleaseStatus
from exports.tasks import build_release_task
from tests.exports.release_helpers import make_release
from tests.factories import make_reading_study, make_user, rate_open_reads

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture(autouse=True)
def releases_dir(settings, tmp_path):
    settings.RELEASES_DIR = tmp_path / "releases"
    return settings.RELEASES_DIR


def _study_with_one_read_to_go():
    """Every example rated twice in agreement, but one Task 1 example that waits for its second read."""
    study, _, _ = make_reading_study(pairs=2, readers=4, slug="snap")
    examples = list(Example.objects.filter(study=study).order_by("task", "pk"))
    waiting = next(e for e in examples if e.task == Task.REALISM)
    for example in examples:
        if example == waiting:
            rate_open_reads(example, RatingChoice.REALISTIC)
        elif example.task == Task.REALISM:
            rate_open_reads(example, RatingChoice.REALISTIC, RatingChoice.REALISTIC)
        else:
            rate_open_reads(example, RatingChoice.EQUIVALENT, RatingChoice.EQUIVALENT)
    return study, waiting


def _in_another_thread(work) -> None:
    failures = []

    def run():
        try:
            work()
        except BaseException as error:  # re-raised in the test's thread
            failures.append(error)
        finally:
            connections.close_all()

    thread = threading.Thread(target=run)
    thread.start()
    thread.join()
    if failures:
        raise failures[0]


def _csv(archive: zipfile.ZipFile, name: str) -> list[dict]:
    return list(csv.DictReader(io.StringIO(archive.read(name).decode("utf-8"), newline="")))


def test_ratings_submitted_and_voided_during_a_build_do_not_reach_it(monkeypatch):
    study, waiting = _study_with_one_read_to_go()
    voided = Annotation.objects.filter(example__study=study, example__task=Task.REALISM).exclude(example=waiting)
    voided = voided.order_by("pk").first()
    coordinator = make_user(Role.COORDINATOR)
    release = make_release(study)
    before = (ConsensusLabel.objects.filter(example__study=study).count(), Annotation.objects.count())

    def change_the_ratings():
        # The second read of the waiting example (a consensus appears) and a void (one goes away).
        rate_open_reads(Example.objects.get(pk=waiting.pk), RatingChoice.REALISTIC)
        void_annotation(voided.public_id, actor=coordinator, reason="Wrong example.")

    disagreed_query = rows.disagreed_query
    changed = []

    def between_files(selection):
        # task1_full.csv is written; the consensus files are not yet. Change the ratings now.
        if not changed:
            _in_another_thread(change_the_ratings)
            changed.append(True)
        return disagreed_query(selection)

    monkeypatch.setattr(rows, "disagreed_query", between_files)
    build_release_task.call(str(release.public_id))

    release.refresh_from_db()
    assert (release.status, release.error) == (ReleaseStatus.DONE, "")
    assert changed
    # The change did happen, committed, while the build was running.
    assert Annotation.objects.filter(voided_at__isnull=False).count() == 1
    assert (ConsensusLabel.objects.filter(example__study=study).count(), Annotation.objects.count()) != before
    with zipfile.ZipFile(release.zip_file()) as archive:
        root = release.root_folder
        for prefix in ("task1", "task2"):
            full = _csv(archive, f"{root}/{prefix}/{prefix}_full.csv")
            consensus = _csv(archive, f"{root}/{prefix}/{prefix}_consensus.csv")
            key = ("dataset", "study_id", "reref_variation") + (("report_type",) if prefix == "task1" else ())
            per_example = Counter(tuple(row[k] for k in key) for row in full)
            # Every file of the release tells the same story: each released example's annotations
            # in the full file are the n_annotations its consensus row states.
            assert {tuple(row[k] for k in key): int(row["n_annotations"]) for row in consensus} == dict(per_example)
            assert release.row_counts[f"{prefix}/{prefix}_full.csv"] == len(full)
            assert release.row_counts[f"{prefix}/{prefix}_consensus.csv"] == len(consensus)
        # The state of the database when the build began: 3 Task 1 examples with a consensus, 2 reads each.
        assert release.row_counts["task1/task1_consensus.csv"] == 3
        assert release.row_counts["task1/task1_full.csv"] == 6
        readme = archive.read(f"{root}/README.md").decode("utf-8")
        assert "- Annotations (`task1_full.csv`): 6\n- Examples with 2 annotations: 3;" in readme
        assert "left out (Task 1: Realism: 1; Task 2: Clinical Equivalence: 0)" in readme


def test_sqlite_runs_in_wal_mode_so_a_reading_build_does_not_hold_writers_up():
    if connection.vendor != "sqlite":
        pytest.skip("SQLite only")
    with connection.cursor() as cursor:
        cursor.execute("PRAGMA journal_mode")
        assert cursor.fetchone()[0] == "wal"
