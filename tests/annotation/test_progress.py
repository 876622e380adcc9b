"""The commands' progress bars leave no thread behind them (annotation.progress): a process with a
thread of that kind does not fork the analysis' processes."""

import io
import threading

from tqdm import tqdm

from annotation.progress import progress_bar


def test_a_progress_bar_leaves_no_thread_behind(monkeypatch):
    if tqdm.monitor is not None:  # started by a bar elsewhere in this process
        tqdm.monitor.exit()
        monkeypatch.setattr(tqdm, "monitor", None)
    monkeypatch.setattr(tqdm, "monitor_interval", 10)  # tqdm's default
    before = set(threading.enumerate())

    with progress_bar(total=3, file=io.StringIO()) as bar:
        bar.update(3)

    assert set(threading.enumerate()) <= before
