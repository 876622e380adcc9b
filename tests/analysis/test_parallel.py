"""Jobs side by side in forked processes (analysis.parallel): the results in the jobs' order, whether
they ran here or there; forked only where that is safe; one BLAS thread per forked process; the
parent's objects frozen for the fork and handed back to the collector after."""

import os
import subprocess
import sys
import textwrap
import threading
from pathlib import Path

import pytest

from analysis import parallel

ROOT = Path(__file__).resolve().parents[2]


def _run(script: str) -> str:
    """A script in a fresh interpreter (this one has threads: run_all would not fork here), with two
    BLAS threads whatever this process has (tests/conftest.py gives an xdist worker one) and
    `parallel` imported, seeing two cores."""
    env = os.environ | dict.fromkeys(("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"), "2")
    script = "from analysis import parallel\nparallel.cores = lambda: 2\n" + textwrap.dedent(script)
    done = subprocess.run(  # noqa: S603 (this interpreter, our own script)
        [sys.executable, "-c", script], cwd=ROOT, env=env, capture_output=True, text=True, check=False
    )
    assert done.returncode == 0, done.stderr
    return done.stdout


@pytest.mark.slow  # a fresh interpreter that imports numpy and threadpoolctl
def test_jobs_run_in_forked_processes_with_one_blas_thread_and_come_back_in_order():
    out = _run("""
        import gc, os
        import numpy, threadpoolctl
        parent = os.getpid()
        def job(number):
            def run():
                blas = {info["num_threads"] for info in threadpoolctl.threadpool_info()}
                nested = parallel.run_all([os.getpid, os.getpid])  # inside a child: here, not forked again
                return number, os.getpid() != parent, blas, len(set(nested)) == 1 and nested[0] == os.getpid()
            return run
        results = parallel.run_all([job(number) for number in range(6)])
        print({info["num_threads"] for info in threadpoolctl.threadpool_info()})  # here: as the machine has
        print([number for number, _, _, _ in results])
        print(all(forked for _, forked, _, _ in results))
        print(set().union(*(blas for _, _, blas, _ in results)))
        print(all(nested for _, _, _, nested in results))
        print(gc.get_freeze_count())
    """).splitlines()

    assert out == ["{2}", "[0, 1, 2, 3, 4, 5]", "True", "{1}", "True", "0"]


@pytest.mark.slow  # a fresh interpreter
def test_a_jobs_exception_is_raised_in_the_parent_and_the_objects_are_unfrozen():
    out = _run("""
        import gc
        def fails():
            raise ValueError("no such figure")
        try:
            parallel.run_all([lambda: 1, fails, lambda: 3])
        except ValueError as error:
            print(error)
        print(gc.get_freeze_count())
    """).splitlines()

    assert out == ["no such figure", "0"]


@pytest.mark.slow  # a fresh interpreter
def test_a_thread_that_stops_for_forks_is_stopped_while_they_fork_and_goes_on_after():
    out = _run("""
        import multiprocessing, os, threading
        from contextlib import contextmanager

        class Heartbeat:
            def __init__(self):
                self.thread, self.stop, self.forked_while_paused = None, threading.Event(), []
                self.start()
            def start(self):
                self.stop.clear()
                self.thread = threading.Thread(target=self.stop.wait)
                self.thread.start()
            @contextmanager
            def paused(self):
                self.stop.set()
                self.thread.join()
                yield
                self.forked_while_paused.append(len(multiprocessing.active_children()))
                self.start()

        beat = Heartbeat()
        parent = os.getpid()
        jobs = [os.getpid] * 4
        print(all(pid != parent for pid in parallel.run_all(jobs)) is False)  # another thread runs: here
        with parallel.stopped_for_forks(beat):
            print(all(pid != parent for pid in parallel.run_all(jobs)))  # forked
            print(beat.forked_while_paused, beat.thread.is_alive())
        print(parallel.run_all(jobs) == [parent] * 4)  # no longer registered: here again
        beat.stop.set()
    """).splitlines()

    # Both processes were forked while the thread was stopped, and it runs again.
    assert out == ["True", "True", "[2] True", "True"]


@pytest.mark.slow  # a fresh interpreter that imports numpy and threadpoolctl
def test_jobs_forked_beside_run_in_a_child_with_this_processs_data_while_the_others_run_here(tmp_path):
    # Each side waits for the other's file: run one after the other, the first would wait in vain.
    out = _run(f"""
        import gc, os, time
        from pathlib import Path
        import numpy, threadpoolctl
        parent, folder = os.getpid(), Path({str(tmp_path)!r})
        data = list(range(1000))  # made here, after the imports: the child has it without pickling

        def wait_for(name):
            deadline = time.monotonic() + 20
            while not (folder / name).exists():
                if time.monotonic() > deadline:
                    return False
                time.sleep(0.01)
            return True

        def there():
            (folder / "there").touch()
            return os.getpid() != parent, sum(data), wait_for("here")

        def here():
            met = wait_for("there")
            (folder / "here").touch()
            blas = {{info["num_threads"] for info in threadpoolctl.threadpool_info()}}
            return os.getpid() == parent, met, blas

        print(parallel.forked_beside([there], [here]))
        print({{info["num_threads"] for info in threadpoolctl.threadpool_info()}}, gc.get_freeze_count())
    """).splitlines()

    assert out == ["([(True, 499500, True)], [(True, True, {1})])", "{2} 0"]


def test_jobs_run_here_where_a_fork_is_not_safe_or_does_not_pay(monkeypatch):
    monkeypatch.setattr(parallel, "cores", lambda: 2)
    monkeypatch.setattr(parallel, "ProcessPoolExecutor", None)  # a fork would fail loudly
    here = threading.get_ident()

    def job(number):
        return lambda: (number, threading.get_ident())

    other = threading.Thread(target=lambda: None)
    monkeypatch.setattr(threading, "enumerate", lambda: [threading.current_thread(), other])  # another thread
    assert parallel.run_all([job(1), job(2)]) == [(1, here), (2, here)]
    monkeypatch.setattr(threading, "enumerate", lambda: [threading.current_thread()])
    assert parallel.run_all([job(1)]) == [(1, here)]  # one job: no fork
    monkeypatch.setattr(parallel, "cores", lambda: 1)
    assert parallel.run_all([job(1), job(2)]) == [(1, here), (2, here)]  # one core: no fork
    monkeypatch.setattr(parallel, "cores", lambda: 2)
    monkeypatch.setattr(parallel, "_in_child", True)
    assert parallel.run_all([job(1), job(2)]) == [(1, here), (2, here)]  # in a forked child: no fork
    assert parallel.forked_beside([job(1)], [job(2)]) == ([(1, here)], [(2, here)])
    assert parallel.run_all([]) == []
    monkeypatch.setattr(parallel, "_in_child", False)
    monkeypatch.setattr(parallel, "cores", lambda: 1)
    assert parallel.forked_beside([job(1), job(2)], [job(3)]) == ([(1, here), (2, here)], [(3, here)])
    monkeypatch.setattr(parallel, "cores", lambda: 2)
    monkeypatch.setattr(threading, "enumerate", lambda: [threading.current_thread(), other])
    assert parallel.forked_beside([job(1)], [job(2)]) == ([(1, here)], [(2, here)])


@pytest.mark.slow  # a fresh interpreter that imports numpy and threadpoolctl
def test_a_process_started_early_forks_the_jobs_processes_while_the_others_run_here_with_one_blas_thread():
    out = _run("""
        import os, sys
        from functools import partial
        parent = os.getpid()
        def ready():
            import json  # what the jobs need, imported once, before the jobs' processes are forked
        with parallel.early_processes(ready):
            print(parallel.early_processes_started())
            import numpy, threadpoolctl  # imported here after the process started: not in it
            def blas():
                return {info["num_threads"] for info in threadpoolctl.threadpool_info()}
            asked = partial(eval, "(__import__('os').getpid(), __import__('os').getppid(), "
                                  "'json' in __import__('sys').modules, 'numpy' in __import__('sys').modules)")
            there, here = parallel.run_beside([asked] * 4, [os.getpid, blas])
            pids, forked_by = {pid for pid, _, _, _ in there}, {ppid for _, ppid, _, _ in there}
            print(len(forked_by), parent not in pids | forked_by, forked_by.isdisjoint(pids))
            readied, numpy_there = {r for _, _, r, _ in there}, {n for _, _, _, n in there}
            print(readied, numpy_there, here == [parent, {1}], blas())
            # No thread here beside the early process: this process still forks (forked_beside).
            print(parallel.forked_beside([os.getpid], [os.getpid]) != ([parent], [parent]))
            try:
                parallel.run_beside([partial(eval, "1 / 0"), partial(eval, "2")], [])
            except ZeroDivisionError:
                print("raised here")
            with parallel.early_processes(ready):  # within: the same process
                print(parallel.run_beside([], [lambda: 2]) == ([], [2]))
        print(parallel.early_processes_started())
        print(parallel.run_beside([lambda: 1], [lambda: 2]) == ([1], [2]))  # as run_all, forked
    """).splitlines()

    # Run by processes that one process, not this one, forked; json there, numpy not; one BLAS thread here.
    assert out == ["True", "1 True True", "{True} {False} True {2}", "True", "raised here", "True", "False", "True"]


@pytest.mark.slow  # a fresh interpreter
def test_after_a_failure_here_the_early_processs_next_results_are_those_of_the_next_jobs():
    out = _run("""
        import time
        def fails():
            raise ValueError("no such fit")
        def first():
            time.sleep(0.2)
            return "first"
        def second():
            return "second"
        with parallel.early_processes(lambda: None):
            try:
                parallel.run_beside([first], [fails])
            except ValueError as error:
                print(error)
            print(parallel.run_beside([second], [])[0])
    """).splitlines()

    assert out == ["no such fit", "['second']"]


def test_no_process_is_started_early_where_a_fork_is_not_safe(monkeypatch):
    monkeypatch.setattr(parallel, "cores", lambda: 2)
    monkeypatch.setattr(parallel, "ProcessPoolExecutor", None)  # a fork would fail loudly
    other = threading.Thread(target=lambda: None)
    monkeypatch.setattr(threading, "enumerate", lambda: [threading.current_thread(), other])  # another thread

    with parallel.early_processes(lambda: None):
        assert not parallel.early_processes_started()
        assert parallel.run_beside([lambda: 1], [lambda: 2]) == ([1], [2])  # here, as run_all
