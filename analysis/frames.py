"""The one DataFrame shape every analysis reads: the six release files, as text.

Both adapters produce it: `analysis.release_folder.read_release(path)` from a release folder and
`analysis.live.study_frames(study, ...)` from a study's rows. Every column is text (read with
dtype=str, keep_default_na=False): a study id with leading zeros and a report whose text is
"None" survive, and an empty value is "".
"""

from dataclasses import dataclass

import pandas as pd

from exports import columns

# Column order exactly as in the release files: exports.columns, the one definition the release's
# header rows and queries take too.
TASK1_FULL = list(columns.TASK1_FULL)
TASK2_FULL = list(columns.TASK2_FULL)
RELEASE_FILES: dict[str, list[str]] = {path: list(names) for path, names in columns.RELEASE_FILES.items()}

# Live studies only (never in a release): every individual read with its slot and an opaque
# reader key. task is "task1" or "task2"; report_type is "" for Task 2; slot is 1 or 2 for the
# initial reads, 3 for the third read; rating is the label as shown ("Minor Issues");
# duration_ms is "" when unknown.
READS = [
    "task", "dataset", "study_id", "reref_variation", "report_type", "slot", "reader", "rating", "rationale",
    "duration_ms",
]  # fmt: skip


@dataclass(frozen=True)
class ReleaseFrames:
    """The six release tables (text columns as listed above) and, for a live study, its reads."""

    task1_full: pd.DataFrame
    task1_disagreed: pd.DataFrame
    task1_consensus: pd.DataFrame
    task2_full: pd.DataFrame
    task2_disagreed: pd.DataFrame
    task2_consensus: pd.DataFrame
    reads: pd.DataFrame | None = None  # live only: columns READS
    # The automated judges' ratings (analysis.judges.JUDGE_COLUMNS): from a release built with
    # --include-judges, or a live study with judges; None when there are none to analyse.
    task1_judges: pd.DataFrame | None = None
    task2_judges: pd.DataFrame | None = None
