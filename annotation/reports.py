"""Reading original reports from the four datasets' own files, as they ship.

Each dataset has a reader: a generator of `SourceReport` (one report cut into the five sections),
`SkippedReport` (a report that cannot be stored, with the reason) and `ImportProblem` (something
wrong with the file, naming file, line and field). Readers stream: they hold one report at a time
(CheXpert Plus keeps one digest per study), so the 227,835 MIMIC-CXR reports never sit in memory.
`services.import_reports` checks what they yield against the database and writes it.

Where the layouts come from (see README, "Original reports"):
- MIMIC-CXR: the free-text files `files/pNN/pNNNNNNNN/sNNNNNNNN.txt` (a folder, or the zip as
  distributed), cut into sections by the rules of the MIMIC-CXR code's `txt/section_parser.py`
  (MIT-LCP/mimic-cxr): `mimic_sections` below restates them.
- IU X-ray: `indiana_reports.csv` (uid, MeSH, Problems, image, indication, comparison, findings,
  impression), as on Kaggle (raddar/chest-xrays-indiana-university).
- CheXpert Plus: `df_chexpert_plus_240401.csv`, one row per image with the report's `section_*`
  columns (Stanford-AIMI/chexpert-plus).
- ReXGradient-160K: the per-split metadata (`metadata/<split>_metadata.csv`, or
  `<split>_metadata_view_position.json`) with Indication, Comparison, Findings, Impression.
"""

import csv
import gzip
import hashlib
import io
import json
import os
import re
import zipfile
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath

import ijson

from annotation.importing import (
    DuplicateKey,
    ImportProblem,
    ImportRejected,
    duplicate_key_problem,
    loads_object_without_duplicates,
)
from annotation.models import REPORT_SECTIONS

# A report's text field is never larger than this (csv's default limit is 128 KiB).
MAX_FIELD_CHARS = 10_000_000


@dataclass(frozen=True)
class SourceReport:
    """One original report read from a dataset file: its study id, sections and where it was."""

    study_id: str
    sections: dict[str, str]
    file: str
    line: int | None = None

    @property
    def source(self) -> str:
        return f"{self.file}:{self.line}" if self.line else self.file

    @property
    def has_findings_or_impression(self) -> bool:
        return bool(self.sections["findings"] or self.sections["impression"])

    def content_hash(self) -> str:
        """A digest of the five sections (what a re-import compares)."""
        digest = hashlib.blake2b(digest_size=16)
        for name in REPORT_SECTIONS:
            text = self.sections[name].encode("utf-8")
            digest.update(len(text).to_bytes(8, "big"))
            digest.update(text)
        return digest.hexdigest()


@dataclass(frozen=True)
class SkippedReport:
    """A report the file holds but that cannot be stored (the reason is said in the summary)."""

    study_id: str
    reason: str
    file: str
    line: int | None = None

    @property
    def source(self) -> str:
        return f"{self.file}:{self.line}" if self.line else self.file


Item = SourceReport | SkippedReport | ImportProblem


@dataclass
class DatasetFile:
    """What a reader reads: the items, and how many there will be when that is known (progress)."""

    items: Iterator[Item]
    total: int | None = None
    notes: list[str] = field(default_factory=list)


def _sections(**texts: str) -> dict[str, str]:
    return {name: (texts.get(name) or "").strip() for name in REPORT_SECTIONS}


# --- MIMIC-CXR: the section parser ------------------------------------------------------------

# A header is upper case at the start of a line, after the single space MIMIC-CXR's lines begin
# with, and ends with a colon and one blank character.
MIMIC_HEADER = re.compile(r"\n ([A-Z ()/,-]+):\s", re.DOTALL)

# The header spellings the MIMIC-CXR parser maps to one name (its `frequent_sections` table,
# grouped here by the name they map to). Anything else is decided by MIMIC_MAIN_NAMES, then
# MIMIC_FINDINGS_WORDS, else keeps its own lower-cased spelling.
MIMIC_SPELLINGS: dict[str, tuple[str, ...]] = {
    "preamble": ("preamble",),
    "impression": (
        "impression",
        "conclusion",
        "findings and impression",
        "findings/impression",
        "findings/ impression",
        # The parser's typo list, kept: 'ndication' (a cut-off INDICATION) is read as impression.
        "ndication",
        "impresson",
        "imprression",
        "imoression",
        "impressoin",
        "imprssion",
        "impresion",
        "imperssion",
        "mpression",
        "impession",
    ),
    "findings": (
        "findings",
        "chest, two views",
        "finding",
        "findins",
        "findindgs",
        "findgings",
        "findngs",
        "findnings",
        "finidngs",
        "reference findings",
    ),
    "comparison": (
        "comparison",
        "comparisons",
        "reference exam",
        "comparison exam",
        "comparison film",
        "comparision",
        "comparsion",
        "comparrison",
        "comparisions",
    ),
    "indication": ("indication", "reason for examination", "reason for exam", "clinical indication", "idication"),
    "history": ("history", "clinical history", "clinical information", "patient history", "pfi"),
    "examination": ("examination", "exam", "type of examination"),
    "technique": ("technique",),
    "notification": ("notification",),
    "recommendations": ("recommendation(s)", "recommendations", "recommendation"),
    "addendum": ("addendum",),
    "date": ("date",),
    "comment": ("comment",),
    "wet read": ("wet read", "wetread"),
}
MIMIC_NAME_OF = {spelling: name for name, spellings in MIMIC_SPELLINGS.items() for spelling in spellings}
# Tried in this order when a header is not in the table: the first one it contains wins.
MIMIC_MAIN_NAMES = ("impression", "findings", "history", "comparison", "addendum")
# A header naming the views or the body part is taken for Findings.
MIMIC_FINDINGS_WORDS = re.compile(
    "chest|portable|pa and lateral|lateral and pa|ap and lateral|lateral and ap|frontal and|two views|"
    "frontal view|pa view|ap view|one view|lateral view|bone window|frontal upright|frontal semi-upright|"
    "ribs|pa and lat"
)


def mimic_section_name(header: str) -> str:
    """The name the MIMIC-CXR parser gives a header (lower-cased, then normalised)."""
    header = header.lower().strip()
    if header in MIMIC_NAME_OF:
        return MIMIC_NAME_OF[header]
    for name in MIMIC_MAIN_NAMES:
        if name in header:
            return name
    if MIMIC_FINDINGS_WORDS.search(header):
        return "findings"
    return header


def mimic_sections(text: str) -> list[tuple[str, str]]:
    """Cut a MIMIC-CXR report into (name, text) sections as the MIMIC-CXR section parser does.

    Text before the first header is the "preamble"; a report without any header is one "full
    report" section. Empty Findings and Impression sections are dropped. A report left with
    neither gets its last section split at the first blank line into a "last_paragraph". The
    texts are the raw slices (not stripped); `___` de-identification is untouched.
    """
    match = MIMIC_HEADER.search(text)
    if match is None:
        parts = [("full report", text)]
    else:
        parts = [("preamble", text[: match.start(1)])]
        while match is not None:
            header, start = match.group(1), match.end()
            # The parser resumes its search at the end of the header's line, which finds the
            # same next header as resuming here (a header needs a line break before it). When
            # the blank after the colon is the line break itself, a header on the next line has
            # lost it and is read as this section's text.
            match = MIMIC_HEADER.search(text, start)
            parts.append((header, text[start : match.start() if match else len(text)]))
    sections = [(mimic_section_name(name), body) for name, body in parts]
    sections = [(n, b) for n, b in sections if not (n in ("findings", "impression") and not b.strip())]
    names = {name for name, _ in sections}
    if "findings" not in names and "impression" not in names:
        name, body = sections[-1]
        if "\n \n" in body:
            head, tail = body.split("\n \n", 1)
            sections[-1] = (name, head)
            sections.append(("last_paragraph", tail))
    return sections


def mimic_report_sections(text: str) -> dict[str, str]:
    """The five sections of a MIMIC-CXR report: the last section of each name, stripped.

    Indication is the parser's "indication" section (INDICATION, REASON FOR EXAM, ...), or where
    a report has none, its "history" (HISTORY, CLINICAL HISTORY, ...). Other sections (preamble,
    examination, wet read, addendum, last_paragraph, ...) are not kept.
    """
    last: dict[str, str] = {}
    for name, body in mimic_sections(text):
        last[name] = body
    return _sections(
        indication=last.get("indication") or last.get("history", ""),
        comparison=last.get("comparison", ""),
        technique=last.get("technique", ""),
        findings=last.get("findings", ""),
        impression=last.get("impression", ""),
    )


MIMIC_FILE = re.compile(r"(?:^|/)p\d{2}/p\d+/s(\d+)\.txt$")


def read_split_csv(path: Path, split: str) -> set[str]:
    """The study ids of one split of MIMIC-CXR's split file (mimic-cxr-2.0.0-split.csv[.gz])."""
    if not path.is_file():
        raise ImportRejected([ImportProblem(f"{path}: no such file. Give the path of mimic-cxr-2.0.0-split.csv.gz.")])
    opener = gzip.open if path.name.endswith(".gz") else open
    name = path.name
    try:
        with opener(path, "rt", encoding="utf-8", newline="") as handle:
            reader = csv.DictReader(handle)
            missing = [column for column in ("study_id", "split") if column not in (reader.fieldnames or [])]
            if missing:
                raise ImportRejected(
                    [
                        ImportProblem(
                            f"The split file has no '{column}' column (its columns: "
                            f"{', '.join(reader.fieldnames or [])}). Give mimic-cxr-2.0.0-split.csv.gz.",
                            line=1,
                            field=column,
                            file=name,
                        )
                        for column in missing
                    ]
                )
            ids: set[str] = set()
            splits: set[str] = set()
            for row in reader:
                splits.add(row["split"])
                if row["split"] == split:
                    ids.add(row["study_id"].strip().removeprefix("s"))
    except (UnicodeDecodeError, OSError, EOFError, csv.Error) as error:
        raise ImportRejected([ImportProblem(f"The split file cannot be read ({error}).", file=name)]) from None
    if split not in splits:
        raise ImportRejected(
            [
                ImportProblem(
                    f"No study is in split '{split}'. The file's splits are: {', '.join(sorted(splits))}.",
                    field="split",
                    file=name,
                )
            ]
        )
    return ids


def _decode_report(data: bytes, name: str) -> str | ImportProblem:
    if b"\x00" in data:
        line = data.count(b"\n", 0, data.index(b"\x00")) + 1
        return ImportProblem("The report contains a NUL byte: it is not a text file.", line=line, file=name)
    try:
        return data.decode("utf-8").removeprefix("\ufeff")
    except UnicodeDecodeError as error:
        line = data.count(b"\n", 0, error.start) + 1
        return ImportProblem(
            f"Byte 0x{data[error.start]:02x} is not valid UTF-8. Take the file from the dataset as distributed.",
            line=line,
            file=name,
        )


def _mimic_item(name: str, data: bytes, study_id: str) -> Item:
    text = _decode_report(data, name)
    if isinstance(text, ImportProblem):
        return text
    return SourceReport(study_id=study_id, sections=mimic_report_sections(text), file=name)


def read_mimic_cxr(path: Path, *, only: set[str] | None = None) -> DatasetFile:
    """MIMIC-CXR's report files, from a folder or the zip as distributed (mimic-cxr-reports.zip).

    Files that are not `pNN/pNNNNNNNN/sNNNNNNNN.txt` are ignored; with `only`, so are the studies
    not in it (the split's).
    """
    if zipfile.is_zipfile(path):
        archive = zipfile.ZipFile(path)
        members = [(info, match[1]) for info in archive.infolist() if (match := MIMIC_FILE.search(info.filename))]
        notes = []
        if only is not None:
            kept = [(info, study_id) for info, study_id in members if study_id in only]
            notes.append(f"{len(members) - len(kept)} reports outside the split were left out.")
            members = kept

        def from_zip() -> Iterator[Item]:
            with archive:
                for info, study_id in members:
                    yield _mimic_item(info.filename, archive.read(info), study_id)

        return DatasetFile(items=from_zip(), total=len(members), notes=notes)
    if path.is_dir():
        files = []
        for folder, subfolders, names in os.walk(path):
            subfolders.sort()
            for name in sorted(names):
                relative = PurePosixPath(Path(folder, name).relative_to(path).as_posix())
                if match := MIMIC_FILE.search(str(relative)):
                    files.append((relative, match[1]))
        notes = []
        if only is not None:
            kept = [(relative, study_id) for relative, study_id in files if study_id in only]
            notes.append(f"{len(files) - len(kept)} reports outside the split were left out.")
            files = kept

        def from_folder() -> Iterator[Item]:
            for relative, study_id in files:
                yield _mimic_item(str(relative), (path / relative).read_bytes(), study_id)

        return DatasetFile(items=from_folder(), total=len(files), notes=notes)
    raise ImportRejected(
        [
            ImportProblem(
                f"{path} is neither a folder nor a zip file. Give the reports folder (files/) or "
                "mimic-cxr-reports.zip as distributed."
            )
        ]
    )


# --- CSV layouts ------------------------------------------------------------------------------


def _csv_rows(path: Path, required: Iterable[str]) -> Iterator[tuple[int, dict[str, str]] | ImportProblem]:
    """(line, row) of a CSV file with a header, or a problem naming file, line and field.

    Columns the reader does not use are ignored (the datasets' files have many).
    """
    name = path.name
    if not path.is_file():
        yield ImportProblem(f"{path}: no such file.", file=name)
        return
    csv.field_size_limit(MAX_FIELD_CHARS)
    with path.open("rb") as raw:
        handle = io.TextIOWrapper(raw, encoding="utf-8-sig", newline="")
        reader = csv.reader(handle, strict=True)
        try:
            header = next(reader)
        except StopIteration:
            yield ImportProblem("The file is empty. Take the file from the dataset as distributed.", file=name)
            return
        except (csv.Error, UnicodeDecodeError) as error:
            yield ImportProblem(f"The header cannot be read ({error}).", line=1, file=name)
            return
        header = [column.strip() for column in header]
        missing = [column for column in required if column not in header]
        if missing:
            for column in missing:
                yield ImportProblem(
                    f"Required column '{column}' is missing (the file's columns: {', '.join(header)}). "
                    "Is this the right file for the dataset?",
                    line=1,
                    field=column,
                    file=name,
                )
            return
        line = reader.line_num + 1
        while True:
            try:
                record = next(reader)
            except StopIteration:
                return
            except csv.Error as error:
                yield ImportProblem(
                    f"The CSV is malformed here ({error}): a field with commas, quotes or line breaks must be "
                    "quoted. Take the file from the dataset as distributed.",
                    line=line,
                    file=name,
                )
                return
            except UnicodeDecodeError as error:
                yield ImportProblem(
                    f"The file is not UTF-8 after line {line - 1} ({error.reason}). Take the file as distributed.",
                    line=line,
                    file=name,
                )
                return
            if record and record != [""]:
                if len(record) != len(header):
                    yield ImportProblem(
                        f"This row has {len(record)} fields but the header has {len(header)}.", line=line, file=name
                    )
                elif any("\x00" in value for value in record):
                    yield ImportProblem("The row contains a NUL byte.", line=line, file=name)
                else:
                    yield line, dict(zip(header, record, strict=True))
            line = reader.line_num + 1


def _study_id_problem(study_id: str, *, line: int | None, column: str, file: str) -> ImportProblem | None:
    if not study_id:
        return ImportProblem("The study id is empty.", line=line, field=column, file=file)
    if len(study_id) > 64:
        return ImportProblem("The study id is longer than 64 characters.", line=line, field=column, file=file)
    return None


def read_iu_xray(path: Path) -> DatasetFile:
    """IU X-ray's indiana_reports.csv: one report per row, the study id is `uid`.

    The `image` column (the examination's title, e.g. "Xray Chest PA and Lateral") is stored as
    Technique. `XXXX` de-identification and texts such as "None." are kept as written.
    """
    name = path.name

    def items() -> Iterator[Item]:
        for row in _csv_rows(path, ("uid", "indication", "comparison", "findings", "impression")):
            if isinstance(row, ImportProblem):
                yield row
                continue
            line, values = row
            study_id = values["uid"].strip()
            if problem := _study_id_problem(study_id, line=line, column="uid", file=name):
                yield problem
                continue
            yield SourceReport(
                study_id=study_id,
                sections=_sections(
                    indication=values["indication"],
                    comparison=values["comparison"],
                    technique=values.get("image", ""),
                    findings=values["findings"],
                    impression=values["impression"],
                ),
                file=name,
                line=line,
            )

    return DatasetFile(items=items())


CHEXPERT_IMAGE = re.compile(r"(?:^|/)(patient\d+)/(study\d+)/[^/]+$")


def chexpert_study_id(path_to_image: str) -> str | None:
    """The study id of a CheXpert Plus image: its patient and study folders, `patient00001/study1`."""
    match = CHEXPERT_IMAGE.search(path_to_image.strip())
    return f"{match[1]}/{match[2]}" if match else None


def read_chexpert_plus(path: Path) -> DatasetFile:
    """CheXpert Plus's report CSV (df_chexpert_plus_240401.csv): one row per image.

    The study id is the image's folder (`path_to_image` train/patient00001/study1/view1_frontal.jpg
    gives patient00001/study1); the rows of a study's images repeat its report and count once. A
    study whose rows disagree is skipped and named. Indication is `section_clinical_history`, or
    where empty `section_history`.

    Reads the file twice (first to find each study's rows, then to yield each study once), keeping
    one digest per study in between.
    """
    name = path.name
    required = ("path_to_image", "section_findings", "section_impression")

    def report_of(line: int, values: dict[str, str], study_id: str) -> SourceReport:
        return SourceReport(
            study_id=study_id,
            sections=_sections(
                indication=values.get("section_clinical_history") or values.get("section_history", ""),
                comparison=values.get("section_comparison", ""),
                technique=values.get("section_technique", ""),
                findings=values["section_findings"],
                impression=values["section_impression"],
            ),
            file=name,
            line=line,
        )

    def rows() -> Iterator[tuple[int, dict[str, str], str] | ImportProblem]:
        for row in _csv_rows(path, required):
            if isinstance(row, ImportProblem):
                yield row
                continue
            line, values = row
            study_id = chexpert_study_id(values["path_to_image"])
            if study_id is None:
                yield ImportProblem(
                    f"'{values['path_to_image']}' is not an image path of the form "
                    "train/patient00001/study1/view1_frontal.jpg, from which the study id is taken.",
                    line=line,
                    field="path_to_image",
                    file=name,
                )
                continue
            yield line, values, study_id

    def items() -> Iterator[Item]:
        first: dict[str, tuple[int, str]] = {}
        conflicts: dict[str, int] = {}
        problems = []
        for row in rows():
            if isinstance(row, ImportProblem):
                problems.append(row)
                continue
            line, values, study_id = row
            digest = report_of(line, values, study_id).content_hash()
            if study_id not in first:
                first[study_id] = (line, digest)
            elif first[study_id][1] != digest:
                conflicts.setdefault(study_id, line)
        if problems:
            yield from problems
            return
        for row in rows():
            line, values, study_id = row
            if first.get(study_id, (None,))[0] != line:
                continue
            if study_id in conflicts:
                yield SkippedReport(
                    study_id,
                    "its image rows hold different reports",
                    file=name,
                    line=line,
                )
            else:
                yield report_of(line, values, study_id)

    return DatasetFile(items=items())


REXGRADIENT_STUDY_ID = "StudyInstanceUid"
REXGRADIENT_SECTIONS = {
    "indication": "Indication",
    "comparison": "Comparison",
    "findings": "Findings",
    "impression": "Impression",
}


def _rexgradient_text(value: object) -> str:
    """A ReXGradient section: null, empty and "None" mean the report has no such section."""
    if value is None or isinstance(value, float):  # a float is pandas' NaN written out
        return ""
    text = str(value).strip()
    return "" if text.lower() == "none" else text


def _rexgradient_item(record: object, *, where: str, line: int | None, name: str) -> Item:
    if not isinstance(record, dict):
        return ImportProblem(f"{where} is not an object with the study's fields.", line=line, file=name)
    raw_id = record.get(REXGRADIENT_STUDY_ID)
    study_id = str(raw_id).strip() if isinstance(raw_id, str | int) and not isinstance(raw_id, bool) else ""
    if not study_id:
        return ImportProblem(
            f"{where} has no {REXGRADIENT_STUDY_ID}, which is the study id.",
            line=line,
            field=REXGRADIENT_STUDY_ID,
            file=name,
        )
    if problem := _study_id_problem(study_id, line=line, column=REXGRADIENT_STUDY_ID, file=name):
        return problem
    missing = [column for column in REXGRADIENT_SECTIONS.values() if column not in record]
    if missing:
        return ImportProblem(
            f"{where} has no field {', '.join(missing)}. Is this ReXGradient-160K's metadata?",
            line=line,
            field=missing[0],
            file=name,
        )
    sections = {ours: _rexgradient_text(record[theirs]) for ours, theirs in REXGRADIENT_SECTIONS.items()}
    return SourceReport(study_id=study_id, sections=_sections(**sections), file=name, line=line)


def read_rexgradient(path: Path) -> DatasetFile:
    """ReXGradient-160K's metadata: the per-split CSV (one row per study), or its JSON (an object
    keyed by study, or a list; read as a stream) or JSON Lines.

    The study id is `StudyInstanceUid`. A section that is empty, null or "None" is missing.
    """
    name = path.name
    suffix = path.suffix.lower()
    if suffix == ".csv":

        def from_csv() -> Iterator[Item]:
            for row in _csv_rows(path, (REXGRADIENT_STUDY_ID, *REXGRADIENT_SECTIONS.values())):
                if isinstance(row, ImportProblem):
                    yield row
                else:
                    line, values = row
                    yield _rexgradient_item(values, where=f"Line {line}", line=line, name=name)

        return DatasetFile(items=from_csv())
    if suffix not in (".json", ".jsonl", ".ndjson"):
        raise ImportRejected(
            [ImportProblem(f"{name}: give ReXGradient-160K's metadata as .csv, .json or .jsonl.", file=name)]
        )
    if not path.is_file():
        raise ImportRejected([ImportProblem(f"{path}: no such file.", file=name)])

    def from_jsonl() -> Iterator[Item]:
        with path.open("rb") as handle:
            for number, raw in enumerate(handle, start=1):
                if not raw.strip():
                    continue
                try:
                    record = loads_object_without_duplicates(raw)
                except DuplicateKey as duplicate:
                    yield duplicate_key_problem(duplicate.key, line=number, file=name)
                    continue
                except (json.JSONDecodeError, UnicodeDecodeError) as error:
                    yield ImportProblem(f"Not valid JSON ({error}).", line=number, file=name)
                    continue
                yield _rexgradient_item(record, where=f"Line {number}", line=number, name=name)

    def from_json() -> Iterator[Item]:
        with path.open("rb") as handle:
            start = handle.read(1024).lstrip()[:1]
            handle.seek(0)
            try:
                if start == b"{":
                    for key, record in ijson.kvitems(handle, "", use_float=True):
                        yield _rexgradient_item(record, where=f"Entry '{key}'", line=None, name=name)
                elif start == b"[":
                    for number, record in enumerate(ijson.items(handle, "item", use_float=True), start=1):
                        yield _rexgradient_item(record, where=f"Entry {number}", line=None, name=name)
                else:
                    yield ImportProblem("The file is not a JSON object or list.", line=1, file=name)
            except (ijson.JSONError, UnicodeDecodeError) as error:
                yield ImportProblem(f"Not valid JSON ({error}).", file=name)

    return DatasetFile(items=from_jsonl() if suffix in (".jsonl", ".ndjson") else from_json())


Reader = Callable[..., DatasetFile]

READERS: dict[str, Reader] = {
    "mimic-cxr": read_mimic_cxr,
    "iu-xray": read_iu_xray,
    "chexpert-plus": read_chexpert_plus,
    "rexgradient": read_rexgradient,
}
