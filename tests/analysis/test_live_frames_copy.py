"""study_frames outside a transaction, as the worker calls it: on PostgreSQL the tables come through
COPY's CSV output over several connections reading one snapshot (test_live_frames.py holds the
frames to the release inside the tests' transactions, where the records are read one by one)."""

import io

import pandas as pd
import pytest
from django.db import connection, transaction

from analysis.live import study_frames
from analysis.release_folder import read_release
from annotation.models import Study
from exports import rows
from exports.building import build_release
from tests.analysis.test_live_frames import assert_same_as_release
from tests.exports.test_build_release import hostile_study
from tests.judges.helpers import enrol, make_judge, run_judge


@pytest.mark.django_db(transaction=True)
def test_outside_a_transaction_the_tables_come_from_one_snapshot_and_equal_the_release(monkeypatch, tmp_path):
    """As in the worker, which reads outside any transaction: on PostgreSQL every table is COPY's own
    CSV output, over several connections that all import one snapshot; the frames are still the
    release's, hostile text and the judges' tables included, and the reads those read in a transaction."""
    study = hostile_study()
    judge = make_judge("copy-bot")
    enrol(study, judge)
    run_judge(judge, choose=lambda item: item["labels"][-1]["value"])
    snapshots = []

    def copy_csv(sql, params, into, snapshot_id=None):
        snapshots.append(snapshot_id)
        real_copy_csv(sql, params, into, snapshot_id)

    real_copy_csv = rows.copy_csv
    monkeypatch.setattr(rows, "copy_csv", copy_csv)

    frames = study_frames(study)

    build_release(Study.objects.get(pk=study.pk), tmp_path / "release", license_text="CC0\n", include_judges=True)
    released = read_release(tmp_path / "release")
    assert_same_as_release(frames, released)
    for name in ("task1_judges", "task2_judges"):
        assert len(getattr(frames, name)) > 0
        pd.testing.assert_frame_equal(getattr(frames, name), getattr(released, name), check_exact=True, obj=name)
    with transaction.atomic():
        pd.testing.assert_frame_equal(frames.reads, study_frames(study).reads, check_exact=True)
    assert frames.reads["rationale"].str.contains("\r\n").any()
    if connection.vendor == "postgresql":
        assert len(snapshots) == 8 and len(set(snapshots)) == 1 and snapshots[0]
    else:
        assert snapshots == []


@pytest.mark.skipif(connection.vendor != "postgresql", reason="COPY connections are PostgreSQL's")
@pytest.mark.django_db(transaction=True)
def test_the_copies_side_by_side_get_no_parallel_workers_of_their_own():
    """The analysis' copies run one per core at once: a query's own parallel workers would only compete
    with them (a third more of the server's CPU at 100,000 pairs). Without JIT either, as every copy."""
    into = io.BytesIO()
    sql = "SELECT current_setting('max_parallel_workers_per_gather'), current_setting('jit')"

    rows.copy_csv(sql, [], into)

    assert into.getvalue() == b"0,off\n"
    with connection.cursor() as cursor:  # the setting is the copy's own, not the server's
        cursor.execute("SELECT current_setting('max_parallel_workers_per_gather')")
        assert cursor.fetchone()[0] != "0"
