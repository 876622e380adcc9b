"""The one DataFrame shape every analysis reads: the six release files, as text.

Both adapters produce it: `analysis.release_folder.read_release(path)` from a release folder and
`analysis.live.study_frames(study, ...)` from a study's rows. Every column is text (read with
dtype=str, keep_default_na=False): a study id with leading zeros and a report whose text is
"None" survive, and an empty value is "".
"""

from dataclasses import dataclass

import pandas as pd

# Column order exactly as in the release files (../shared/spec/RELEASE.md).
CONTEXT = ["indication", "comparison", "technique"]
TASK1_FULL = [
    "dataset", "study_id", "reref_variation", "report_type", "annotation_index", "rating", "rationale",
    *CONTEXT, "findings", "impression",
]  # fmt: skip
TASK1_DISAGREED = ["dataset", "study_id", "reref_variation", "report_type", "rating", "rationale"]
TASK1_CONSENSUS = ["dataset", "study_id", "reref_variation", "report_type", "rating", "label_source", "n_annotations"]
TASK2_FULL = [
    "dataset", "study_id", "reref_variation", "annotation_index", "report_a_type", "rating", "rationale",
    *CONTEXT, "report_a_findings", "report_a_impression", "report_b_findings", "report_b_impression",
]  # fmt: skip
TASK2_DISAGREED = ["dataset", "study_id", "reref_variation", "rating", "rationale"]
TASK2_CONSENSUS = ["dataset", "study_id", "reref_variation", "rating", "label_source", "n_annotations"]

RELEASE_FILES: dict[str, list[str]] = {
    "task1/task1_full.csv": TASK1_FULL,
    "task1/task1_disagreed.csv": TASK1_DISAGREED,
    "task1/task1_consensus.csv": TASK1_CONSENSUS,
    "task2/task2_full.csv": TASK2_FULL,
    "task2/task2_disagreed.csv": TASK2_DISAGREED,
    "task2/task2_consensus.csv": TASK2_CONSENSUS,
}

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
