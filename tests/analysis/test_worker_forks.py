"""The worker's results computation may fork its figures' and fits' processes although its heartbeat
runs in a thread of its own: the thread is stopped while they are forked (analysis.parallel), then
beats again. On PostgreSQL, whose connection pool runs threads of its own too, the pool is closed
for the fork and opens again at the next query. analysis/test_parallel.py holds run_all to forking
only while such threads are stopped."""

import os
import threading
import time
from datetime import timedelta

import pytest
from django.db import connection
from django.tasks import default_task_backend

from analysis import computing, parallel
from analysis import tasks as analysis_tasks
from analysis.models import ResultsComputation
from analysis.queueing import request_results
from analysis.services import Scope
from annotation.models import Study
from exports import tasks as export_tasks
from tests.exports.release_helpers import rated_study
from tests.factories import make_study


def _heartbeats() -> list[threading.Thread]:
    return [thread for thread in threading.enumerate() if thread.name.endswith("-heartbeat")]


@pytest.mark.django_db(transaction=True)
def test_the_worker_stops_its_heartbeat_for_the_forks_and_it_beats_again_after(monkeypatch, settings, tmp_path):
    settings.RESULTS_DIR = tmp_path
    monkeypatch.setattr(export_tasks, "HEARTBEAT_INTERVAL", timedelta(seconds=0.05))
    monkeypatch.setattr(parallel, "cores", lambda: 2)
    # As in a worker's own process: other tests' threads (a live server's, for the whole session) hidden.
    # Closed first, the database pool (on PostgreSQL) opens again within the test, not among them.
    parallel.close_database_pools()
    others, listed = set(threading.enumerate()) - {threading.current_thread()}, threading.enumerate
    monkeypatch.setattr(threading, "enumerate", lambda: [t for t in listed() if t not in others])
    study = rated_study()
    default_task_backend.clear()
    state = request_results(study, Scope())
    seen = {}

    def compute(study, scope, *, progress):
        [monitor] = parallel._pausable  # what run_all stops before it forks
        seen["running"] = monitor.thread is not None and monitor.thread.is_alive() and _heartbeats() == [monitor.thread]
        with monitor.paused():
            seen["stopped"] = monitor.thread is None and _heartbeats() == []
            beat = ResultsComputation.objects.get().heartbeat_at
        time.sleep(0.3)
        seen["again"] = monitor.thread.is_alive() and ResultsComputation.objects.get().heartbeat_at > beat
        seen["forked"] = os.getpid() not in parallel.run_all([os.getpid, os.getpid])
        seen["queries after"] = ResultsComputation.objects.exists()
        return f"results/{state.version}"

    monkeypatch.setattr(analysis_tasks, "compute_results", compute)
    done = analysis_tasks.compute_results_task.call(str(study.public_id), "", "", state.version)

    assert done["status"] == "done"
    assert seen == {"running": True, "stopped": True, "again": True, "forked": True, "queries after": True}
    assert parallel._pausable == [] and _heartbeats() == []


@pytest.mark.django_db(transaction=True)
def test_reader_quality_and_the_metric_sensitivity_are_computed_in_a_forked_process_beside_the_analysis(
    monkeypatch, settings, tmp_path
):
    settings.RESULTS_DIR = tmp_path / "results"
    monkeypatch.setattr(parallel, "cores", lambda: 2)
    parallel.close_database_pools()
    others, listed = set(threading.enumerate()) - {threading.current_thread()}, threading.enumerate
    monkeypatch.setattr(threading, "enumerate", lambda: [t for t in listed() if t not in others])
    study = rated_study()

    def where(name, function):
        def spy(*args, **kwargs):
            (tmp_path / name).write_text(str(os.getpid()))  # a forked process' lists are its own
            return function(*args, **kwargs)

        return spy

    for name in ("reader_quality", "sensitivity", "analyze"):
        monkeypatch.setattr(computing, name, where(name, getattr(computing, name)))
    attached = []
    monkeypatch.setattr(computing, "attach", lambda results, sensitivity: attached.append(sensitivity))
    computing.compute_results(study, Scope())

    pids = {name: int((tmp_path / name).read_text()) for name in ("reader_quality", "sensitivity", "analyze")}
    assert pids["analyze"] == os.getpid()
    assert pids["reader_quality"] == pids["sensitivity"] != os.getpid()
    # The per-pair scores, written there, are in the stored results as the sensitivity has them.
    [scores] = (tmp_path / "results").rglob("metric_scores.csv")
    expected = attached[0].scores.to_csv(index=False, na_rep="", lineterminator="\n")
    assert scores.read_text(encoding="utf-8") == expected and len(attached[0].scores) > 0


@pytest.mark.django_db
def test_a_connection_in_a_transaction_keeps_its_pool_and_the_jobs_run_here(monkeypatch):
    if connection.vendor != "postgresql":
        pytest.skip("needs PostgreSQL: set DATABASE_URL to run it (SQLite has no pool)")
    monkeypatch.setattr(parallel, "cores", lambda: 2)
    study = make_study()  # written in the test's transaction

    assert parallel.run_all([os.getpid, os.getpid]) == [os.getpid(), os.getpid()]
    assert Study.objects.filter(pk=study.pk).exists()  # the same transaction goes on
