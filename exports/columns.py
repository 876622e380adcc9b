"""The columns of every release file, in file order (../shared/spec/RELEASE.md): the one list that the
header rows (exports.services), the rows' SQL (exports.rows, which builds each field by its column's
name and puts them in this order) and the analysis' frames (analysis.frames, analysis.judges) are
all taken from. The release README's data dictionary describes each of them
(tests/exports/test_build_release.py holds it complete).

Plain data, no models: the analysis of a release folder imports it without the database.
"""

KEYS = ("dataset", "study_id", "reref_variation")
CONTEXT = ("indication", "comparison", "technique")

TASK1_FULL = (*KEYS, "report_type", "annotation_index", "rating", "rationale", *CONTEXT, "findings", "impression")
TASK1_DISAGREED = (*KEYS, "report_type", "rating", "rationale")
TASK1_CONSENSUS = (*KEYS, "report_type", "rating", "label_source", "n_annotations")
TASK2_FULL = (
    *KEYS, "annotation_index", "report_a_type", "rating", "rationale", *CONTEXT,
    "report_a_findings", "report_a_impression", "report_b_findings", "report_b_impression",
)  # fmt: skip
TASK2_DISAGREED = (*KEYS, "rating", "rationale")
TASK2_CONSENSUS = (*KEYS, "rating", "label_source", "n_annotations")

# Only in a release built with --include-judges: the automated judges' ratings.
TASK1_JUDGES = (*KEYS, "report_type", "judge_index", "rating", "rationale")
TASK2_JUDGES = (*KEYS, "judge_index", "report_a_type", "rating", "rationale")

RELEASE_FILES: dict[str, tuple[str, ...]] = {
    "task1/task1_full.csv": TASK1_FULL,
    "task1/task1_disagreed.csv": TASK1_DISAGREED,
    "task1/task1_consensus.csv": TASK1_CONSENSUS,
    "task2/task2_full.csv": TASK2_FULL,
    "task2/task2_disagreed.csv": TASK2_DISAGREED,
    "task2/task2_consensus.csv": TASK2_CONSENSUS,
}
JUDGE_FILES: dict[str, tuple[str, ...]] = {
    "judges/task1_judges.csv": TASK1_JUDGES,
    "judges/task2_judges.csv": TASK2_JUDGES,
}


def in_file_order(fields: dict[str, str], columns: tuple[str, ...]) -> list[str]:
    """A file's fields (column name -> SQL expression) in its columns' order. Every column must be
    given, and nothing else: a field added to a query or a column to a file without the other is
    an error here, not a shifted column in a release."""
    if set(fields) != set(columns) or len(fields) != len(columns):
        missing, extra = set(columns) - set(fields), set(fields) - set(columns)
        raise ValueError(f"fields do not match the file's columns: missing {sorted(missing)}, extra {sorted(extra)}")
    return [fields[column] for column in columns]
