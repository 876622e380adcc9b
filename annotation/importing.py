"""Reading candidate-pair files (CSV or JSON Lines) into plain rows, with precise errors.

This module only parses and checks the file itself; `services.import_pairs` checks the rows
against the database and writes them.
"""

import csv
import io
import json
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

KEY_COLUMNS = ("dataset", "study_id", "reref_variation")
CONTEXT_COLUMNS = ("indication", "comparison", "technique")
REPORT_COLUMNS = ("original_findings", "original_impression", "alternative_findings", "alternative_impression")
REWRITE_REPORT_COLUMNS = ("alternative_findings", "alternative_impression")
# How the rewrite was made: optional in both layouts, kept as JSON on the pair.
GENERATOR_COLUMNS = ("model", "attempt", "verifier_reasons")
REQUIRED_COLUMNS = (*KEY_COLUMNS, "verdict", *REPORT_COLUMNS)
OPTIONAL_COLUMNS = (*CONTEXT_COLUMNS, *GENERATOR_COLUMNS)
ALL_COLUMNS = (*KEY_COLUMNS, "verdict", *CONTEXT_COLUMNS, *REPORT_COLUMNS, *GENERATOR_COLUMNS)


@dataclass(frozen=True)
class Layout:
    """The columns of one kind of import file."""

    required: tuple[str, ...]
    columns: tuple[str, ...]


# A candidate-pair file: both reports and their context.
PAIRS = Layout(required=REQUIRED_COLUMNS, columns=ALL_COLUMNS)
# A rewrite file: the rewrite only; the original comes from the stored original reports.
REWRITES = Layout(
    required=(*KEY_COLUMNS, "verdict", *REWRITE_REPORT_COLUMNS),
    columns=(*KEY_COLUMNS, "verdict", *REWRITE_REPORT_COLUMNS, *GENERATOR_COLUMNS),
)

# What each column means, as the import form shows it (the README has the same table).
COLUMN_HELP: tuple[tuple[str, bool, str], ...] = (
    ("dataset", True, "mimic-cxr, rexgradient, iu-xray, chexpert-plus, or a custom dataset added in the admin"),
    ("study_id", True, "the report's study id in its dataset (a MIMIC-CXR 's' prefix is stripped)"),
    ("reref_variation", True, "a variation key of the study's taxonomy, e.g. hedging"),
    ("verdict", True, "accepted, rejected, already_in_target_form or infeasible; only accepted pairs are sampled"),
    ("indication", False, "context shared by both reports (may be empty)"),
    ("comparison", False, "context shared by both reports (may be empty)"),
    ("technique", False, "context shared by both reports (may be empty)"),
    ("original_findings", True, "the original report (findings or impression may be empty, not both)"),
    ("original_impression", True, "the original report"),
    ("alternative_findings", True, "the rewrite (findings or impression may be empty, not both)"),
    ("alternative_impression", True, "the rewrite"),
)

# A small example file, offered for download next to the import form.
EXAMPLE_PAIRS = Path(__file__).resolve().parent.parent / "docs" / "example_pairs.csv"

MAX_PROBLEMS = 50


@dataclass(frozen=True)
class ImportProblem:
    """One thing wrong with an import file. line is 1-based; None means the whole file.

    file names the file (or the member of a zip) when an import reads several.
    """

    message: str
    line: int | None = None
    field: str | None = None
    file: str | None = None

    def __str__(self) -> str:
        where = [self.file] if self.file else []
        if self.line is not None:
            where.append(f"line {self.line}")
        if self.field:
            where.append(f"field '{self.field}'")
        return f"{', '.join(where)}: {self.message}" if where else self.message

    def as_dict(self) -> dict:
        where = {"file": self.file} if self.file else {}
        return {**where, "line": self.line, "field": self.field, "message": self.message}


class ImportRejected(Exception):
    """The file cannot be imported; nothing was written."""

    def __init__(self, problems: list[ImportProblem]) -> None:
        self.problems = problems
        super().__init__("; ".join(str(p) for p in problems))


@dataclass(frozen=True)
class ParsedRow:
    """One row of a file. Values are strings, except generator metadata from JSON Lines (kept as given)."""

    line: int
    values: dict[str, object]


def detect_format(filename: str, data: bytes) -> str:
    name = filename.lower()
    if name.endswith((".jsonl", ".ndjson")):
        return "jsonl"
    if name.endswith(".csv"):
        return "csv"
    return "jsonl" if data.lstrip()[:1] == b"{" else "csv"


def decode(data: bytes, *, max_bytes: int) -> str:
    """Check size, NUL bytes and encoding, and return the text without a byte-order mark."""
    if len(data) > max_bytes:
        raise ImportRejected(
            [
                ImportProblem(
                    f"The file is {len(data):,} bytes; the limit is {max_bytes:,} bytes. "
                    "Split it into smaller files and import them one after another."
                )
            ]
        )
    if not data.removeprefix(b"\xef\xbb\xbf").strip():
        raise ImportRejected(
            [ImportProblem("The file is empty. Export the candidate pairs again and upload that file.")]
        )
    nul = data.find(b"\x00")
    if nul >= 0:
        raise ImportRejected(
            [
                ImportProblem(
                    "The file contains a NUL byte, which text files never do. Is it a spreadsheet "
                    "(.xlsx) or UTF-16 file? Save it as UTF-8 CSV or JSON Lines.",
                    line=data.count(b"\n", 0, nul) + 1,
                )
            ]
        )
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as error:
        line = data.count(b"\n", 0, error.start) + 1
        raise ImportRejected(
            [
                ImportProblem(
                    f"Byte 0x{data[error.start]:02x} is not valid UTF-8. Save the file as UTF-8 "
                    "(in Excel: 'CSV UTF-8'; elsewhere choose the UTF-8 encoding) and upload it again.",
                    line=line,
                )
            ]
        ) from None
    return text.removeprefix("\ufeff")


def parse(data: bytes, *, filename: str, max_bytes: int, layout: Layout = PAIRS) -> list[ParsedRow]:
    """All rows of a file, or ImportRejected with every problem found in it (up to a limit)."""
    text = decode(data, max_bytes=max_bytes)
    if detect_format(filename, data) == "jsonl":
        rows = list(_parse_jsonl(text, layout))
    else:
        rows = list(_parse_csv(text, layout))
    if not rows:
        raise ImportRejected([ImportProblem("The file has a header but no rows. Add at least one pair.")])
    return rows


def _check_columns(columns: list[str], *, line: int, layout: Layout) -> list[ImportProblem]:
    problems = []
    unknown = [c for c in columns if c not in layout.columns]
    for column in unknown:
        problems.append(
            ImportProblem(
                f"Unknown column '{column}'. Rename or remove it; the columns are: {', '.join(layout.columns)}.",
                line=line,
                field=column,
            )
        )
    for column in layout.required:
        if column not in columns:
            problems.append(ImportProblem(f"Required column '{column}' is missing. Add it.", line=line, field=column))
    seen = set()
    for column in columns:
        if column in seen:
            problems.append(ImportProblem(f"Column '{column}' appears twice. Keep one.", line=line, field=column))
        seen.add(column)
    return problems


def _parse_csv(text: str, layout: Layout) -> Iterator[ParsedRow]:
    reader = csv.reader(io.StringIO(text, newline=""), strict=True)
    try:
        header = next(reader)
    except csv.Error as error:
        raise ImportRejected([_csv_problem(error, 1)]) from None
    header = [column.strip() for column in header]
    problems = _check_columns(header, line=1, layout=layout)
    if problems:
        raise ImportRejected(problems)
    start = reader.line_num + 1
    while True:
        try:
            record = next(reader)
        except StopIteration:
            break
        except csv.Error as error:
            raise ImportRejected([_csv_problem(error, start)]) from None
        if record == [] or record == [""]:
            start = reader.line_num + 1
            continue
        if len(record) != len(header):
            raise ImportRejected(
                [
                    ImportProblem(
                        f"This row has {len(record)} fields but the header has {len(header)}. "
                        "Check for an unquoted comma or a missing field.",
                        line=start,
                    )
                ]
            )
        yield ParsedRow(line=start, values=dict(zip(header, record, strict=True)))
        start = reader.line_num + 1


def _csv_problem(error: csv.Error, line: int) -> ImportProblem:
    return ImportProblem(
        f"The CSV is malformed here ({error}). A field that contains commas, quotes or line breaks "
        'must be wrapped in double quotes, with any quote inside it doubled ("").',
        line=line,
    )


class DuplicateKey(ValueError):
    """A JSON object that names one key twice: json.loads would silently keep the last value."""

    def __init__(self, key: str) -> None:
        super().__init__(key)
        self.key = key


def _refuse_duplicate_keys(pairs: list[tuple[str, object]]) -> dict[str, object]:
    obj: dict[str, object] = {}
    for key, value in pairs:
        if key in obj:
            raise DuplicateKey(key)
        obj[key] = value
    return obj


def loads_object_without_duplicates(raw: str | bytes) -> object:
    """json.loads, refusing any object (at any depth) that gives a key twice (raises DuplicateKey)."""
    return json.loads(raw, object_pairs_hook=_refuse_duplicate_keys)


def duplicate_key_problem(key: str, *, line: int, file: str | None = None) -> ImportProblem:
    return ImportProblem(
        f'The key "{key}" is given twice in this object; which value was meant is unclear. Keep one of '
        "them, then import the file again.",
        line=line,
        field=key,
        file=file,
    )


def _parse_jsonl(text: str, layout: Layout) -> Iterator[ParsedRow]:
    problems: list[ImportProblem] = []
    rows: list[ParsedRow] = []
    # Split on LF only: JSON strings may legally hold U+2028 and other characters that
    # str.splitlines() would treat as line ends.
    for number, raw in enumerate(text.split("\n"), start=1):
        if len(problems) >= MAX_PROBLEMS:
            break
        if not raw.strip():
            continue
        try:
            obj = loads_object_without_duplicates(raw)
        except DuplicateKey as duplicate:
            problems.append(duplicate_key_problem(duplicate.key, line=number))
            continue
        except json.JSONDecodeError as error:
            problems.append(
                ImportProblem(
                    f"Not valid JSON ({error.msg} at column {error.colno}). Each line must be one JSON object.",
                    line=number,
                )
            )
            continue
        except RecursionError:
            # Lists or objects nested thousands deep exhaust the decoder's stack.
            problems.append(
                ImportProblem(
                    "Nested too deeply to read. Each line must be one flat JSON object whose values are strings.",
                    line=number,
                )
            )
            continue
        if not isinstance(obj, dict):
            problems.append(ImportProblem("Each line must be one JSON object ({...}).", line=number))
            continue
        unstorable = [key for key, value in obj.items() if _unstorable(key) or _unstorable(value)]
        if unstorable:
            problems.extend(
                ImportProblem(
                    "Contains a \\u0000 (NUL) or an unpaired surrogate (\\ud800-\\udfff) escape, which is not "
                    "text. Remove it and export the file again.",
                    line=number,
                    field=None if _unstorable(key) else key,
                )
                for key in unstorable
            )
            continue
        column_problems = _check_columns(list(obj.keys()), line=number, layout=layout)
        if column_problems:
            problems.extend(column_problems)
            continue
        values: dict[str, object] = {}
        for key, value in obj.items():
            if key in GENERATOR_COLUMNS and _metadata_value(value):
                values[key] = value
            elif value is None:
                values[key] = ""
            elif isinstance(value, str):
                values[key] = value
            elif isinstance(value, int) and not isinstance(value, bool) and key == "study_id":
                values[key] = str(value)
            else:
                problems.append(
                    ImportProblem(
                        f"Must be a string, not {type(value).__name__}. Quote the value.", line=number, field=key
                    )
                )
        rows.append(ParsedRow(line=number, values=values))
    if problems:
        raise ImportRejected(problems)
    yield from rows


def _metadata_value(value: object) -> bool:
    """Generator metadata may be a number or a list of strings as well (kept as JSON)."""
    if isinstance(value, bool):
        return False
    if isinstance(value, int):
        return True
    return isinstance(value, list) and all(isinstance(item, str) for item in value)


def _unstorable(value: object) -> bool:
    """JSON can escape NUL and lone surrogates into a string; no database can store them."""
    if isinstance(value, list):
        return any(_unstorable(item) for item in value)
    if not isinstance(value, str):
        return False
    if "\x00" in value:
        return True
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        return True
    return False
