"""The commands' progress bars (tqdm), without tqdm's monitor thread.

tqdm starts that thread with a process's first bar and keeps it after the bar is closed, for the rest
of the process; and a process with a thread of that kind does not fork the analysis' processes
(analysis.parallel), so the analysis of a process that had shown a bar ran in turn. Its only use is
to redraw a bar that has not moved for ten seconds.
"""

from tqdm import tqdm


def progress_bar(**options) -> tqdm:
    """A tqdm bar with these options, and no monitor thread."""
    tqdm.monitor_interval = 0
    return tqdm(**options)
