"""Release frames and folders made in memory, with no database: examples given as their reads."""

from collections import Counter
from pathlib import Path

import pandas as pd

from analysis.frames import READS, RELEASE_FILES, ReleaseFrames
from analysis.result_data import TASK1_LABELS, TASK2_LABELS


def _consensus(reads: tuple[int, ...], adjudication: int | None) -> tuple[int, str]:
    if len(reads) == 2:
        assert reads[0] == reads[1], "two reads must agree; give a third"
        return reads[0], "unanimous"
    winner, votes = Counter(reads).most_common(1)[0]
    if votes >= 2:
        return winner, "majority"
    assert adjudication is not None, "a three-way split needs an adjudication"
    return adjudication, "adjudicated"


REPORT_A = ("original", "alternative", "original", "original")


def make_frames(task1=(), task2=(), *, dataset: str = "mimic-cxr", live: bool = False) -> ReleaseFrames:
    """task1: (variation, study_id, report_type, reads, adjudication); task2: (variation, study_id, reads, adj).

    Reads are 0-2 scores in slot order. With live=True the frames carry `reads` (slot 1, 2, 3).
    """
    tables = {Path(name).stem: [] for name in RELEASE_FILES}
    live_reads = []
    for variation, study_id, report_type, reads, adjudication in task1:
        rating, source = _consensus(reads, adjudication)
        key = {"dataset": dataset, "study_id": study_id, "reref_variation": variation, "report_type": report_type}
        for index, score in enumerate(reads):
            label = TASK1_LABELS[score]
            tables["task1_full"].append(key | {"annotation_index": str(index), "rating": label, "rationale": "r"})
            live_reads.append(_read("task1", key, index, label))
        if source == "adjudicated":
            tables["task1_disagreed"].append(key | {"rating": TASK1_LABELS[rating], "rationale": "adjudicated"})
        tables["task1_consensus"].append(
            key | {"rating": TASK1_LABELS[rating], "label_source": source, "n_annotations": str(len(reads))}
        )
    for number, (variation, study_id, reads, adjudication) in enumerate(task2):
        rating, source = _consensus(reads, adjudication)
        key = {"dataset": dataset, "study_id": study_id, "reref_variation": variation}
        for index, score in enumerate(reads):
            label = TASK2_LABELS[score]
            shown_first = REPORT_A[(number * 3 + index) % 4]  # a fixed, unbalanced pattern of the coin
            tables["task2_full"].append(
                key | {"annotation_index": str(index), "report_a_type": shown_first, "rating": label, "rationale": "r"}
            )
            live_reads.append(_read("task2", key | {"report_type": ""}, index, label))
        if source == "adjudicated":
            tables["task2_disagreed"].append(key | {"rating": TASK2_LABELS[rating], "rationale": "adjudicated"})
        tables["task2_consensus"].append(
            key | {"rating": TASK2_LABELS[rating], "label_source": source, "n_annotations": str(len(reads))}
        )
    frames = {
        Path(name).stem: pd.DataFrame(tables[Path(name).stem], columns=columns, dtype=object).fillna("").astype(str)
        for name, columns in RELEASE_FILES.items()
    }
    reads = pd.DataFrame(live_reads, columns=READS).astype(str) if live else None
    return ReleaseFrames(**frames, reads=reads)


def _read(task: str, key: dict, index: int, label: str) -> dict:
    slot = str(index + 1)
    return {"task": task, **key, "slot": slot, "reader": f"reader-{slot}", "rating": label, "rationale": "r"} | {
        "duration_ms": ""
    }


def write_release(frames: ReleaseFrames, folder: Path) -> Path:
    """The frames as a release folder's six CSV files (RFC 4180, CRLF), as build_release writes them."""
    for name in RELEASE_FILES:
        path = folder / name
        path.parent.mkdir(parents=True, exist_ok=True)
        getattr(frames, path.stem).to_csv(path, index=False, lineterminator="\r\n")
    return folder
