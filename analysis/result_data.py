"""What an analysis hands on as data: its results (`Results`, with the fits left to run, `Fits`), the
metric sensitivity (`Sensitivity`) and the rating scale's labels.

Kept apart from the modules that compute them (scipy, statsmodels): the processes that draw the
figures receive these objects pickled (analysis.figure_jobs), and unpickling one imports this module
only.
"""

from collections.abc import Callable
from dataclasses import dataclass, field

import pandas as pd

TASK1_LABELS = ("Realistic", "Minor Issues", "Major Issues")
TASK2_LABELS = ("Equivalent", "Minor Discrepancy", "Major Discrepancy")
LABELS = {"task1": TASK1_LABELS, "task2": TASK2_LABELS}


@dataclass
class Fits:
    """Model fits that analyze(..., defer_fits=True) left to run: `jobs` (functions of no arguments, each
    returning a table row) and `finish`, which puts the rows into the results' tables and document."""

    jobs: list[Callable[[], dict]]
    finish: Callable[[list[dict]], None]


@dataclass
class Results:
    document: dict
    tables: dict[str, pd.DataFrame] = field(default_factory=dict)
    # The mixed models' fits, while they have not been run (analysis.results.with_fits runs them).
    fits: Fits | None = None


@dataclass
class Sensitivity:
    """The table (analysis.sensitivity.COLUMNS), the per-pair scores with their consensus, and the JSON
    document."""

    table: pd.DataFrame
    scores: pd.DataFrame
    document: dict = field(default_factory=dict)
