"""Read a release folder (ours or the published MIMIC-CXR-Ext-ReRef files) into `ReleaseFrames`.

Every column is read as text (`dtype=str, keep_default_na=False`): a study id with leading zeros
and a report whose text is "None" survive. Needs no database.
"""

from collections.abc import Collection
from pathlib import Path

import pandas as pd

from analysis.frames import RELEASE_FILES, ReleaseFrames
from analysis.judges import JUDGE_FILES

# The columns the analysis reads; with text=False the report sections and rationales are skipped,
# which keeps a 100,000-pair release's text out of memory.
ANALYSIS_COLUMNS = {
    "dataset",
    "study_id",
    "reref_variation",
    "report_type",
    "annotation_index",
    "report_a_type",
    "rating",
    "label_source",
    "n_annotations",
}


class NotARelease(Exception):
    """The folder is not a release: the message names the file or column and what to do."""


def _header(path: Path, relative: str) -> list[str]:
    try:
        with path.open(encoding="utf-8", newline="") as handle:
            first = handle.readline()
    except UnicodeDecodeError:
        raise NotARelease(f"{relative}: not UTF-8 text. Release files are UTF-8 CSV.") from None
    if not first.strip():
        raise NotARelease(f"{relative}: empty file; a release file starts with its header row.")
    return pd.read_csv(path, nrows=0, dtype=str, keep_default_na=False, encoding="utf-8-sig").columns.tolist()


def _read(folder: Path, relative: str, columns: list[str], text: bool) -> pd.DataFrame:
    path = folder / relative
    if not path.is_file():
        raise NotARelease(
            f"{relative}: missing from {folder}. A release folder holds task1/ and task2/ with the six CSV "
            f"files of RELEASE.md; point at the folder that contains task1/ and task2/."
        )
    header = _header(path, relative)
    missing = [column for column in columns if column not in header]
    if missing:
        raise NotARelease(
            f"{relative}: no column {', '.join(repr(c) for c in missing)}. Its header must be: {','.join(columns)}."
        )
    wanted = columns if text else [c for c in columns if c in ANALYSIS_COLUMNS]
    frame = pd.read_csv(
        path, dtype=str, keep_default_na=False, usecols=wanted, encoding="utf-8-sig", engine="c", na_filter=False
    )
    return frame[wanted]


def read_release(path: str | Path, *, text: bool | Collection[str] = True) -> ReleaseFrames:
    """The six release files of the folder at `path`, as text DataFrames.

    With `text=False` only the key, rating and count columns are kept (the report sections and
    rationales are not read): enough for `analysis.results.analyze`, and far lighter. Given the
    names of some files (e.g. `{"task2_full"}`, whose reports the metric sensitivity scores), only
    those are read with their text.
    Raises `NotARelease` naming the file or column when the folder is not a release.
    """
    folder = Path(path)
    if not folder.is_dir():
        raise NotARelease(f"{folder}: not a folder. Give the release folder (the one holding task1/ and task2/).")
    tables = {
        Path(relative).stem: _read(
            folder, relative, columns, text if isinstance(text, bool) else Path(relative).stem in text
        )
        for relative, columns in RELEASE_FILES.items()
    }
    if (folder / "judges").is_dir():
        # A release built with --include-judges: the judges' ratings are read whole (they are few).
        tables |= {
            Path(relative).stem: _read(folder, relative, columns, True) for relative, columns in JUDGE_FILES.items()
        }
    return ReleaseFrames(**tables)
