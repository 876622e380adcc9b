"""The worker's results computation may fork its figures' and fits' processes although its heartbeat
runs in a thread of its own: the thread is stopped while they are forked (analysis.parallel), then
beats again. analysis/test_parallel.py holds run_all to forking only while such threads are stopped."""

import threading
import time
from datetime import timedelta

import pytest
from django.tasks import default_task_backend

from analysis import parallel
from analysis import tasks as analysis_tasks
from analysis.models import ResultsComputation
from analysis.queueing import request_results
from analysis.services import Scope
from exports import tasks as export_tasks
from tests.exports.release_helpers import rated_study


def _heartbeats() -> list[threading.Thread]:
    return [thread for thread in threading.enumerate() if thread.name.endswith("-heartbeat")]


@pytest.mark.django_db(transaction=True)
def test_the_worker_stops_its_heartbeat_for_the_forks_and_it_beats_again_after(monkeypatch, settings, tmp_path):
    settings.RESULTS_DIR = tmp_path
    monkeypatch.setattr(export_tasks, "HEARTBEAT_INTERVAL", timedelta(seconds=0.05))
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
        return f"results/{state.version}"

    monkeypatch.setattr(analysis_tasks, "compute_results", compute)
    done = analysis_tasks.compute_results_task.call(str(study.public_id), "", "", state.version)

    assert done["status"] == "done"
    assert seen == {"running": True, "stopped": True, "again": True}
    assert parallel._pausable == [] and _heartbeats() == []
