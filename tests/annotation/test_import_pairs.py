"""The import_pairs service: every bad file is rejected whole, with line, field and what to do."""

import json

import pytest
from django.db import DatabaseError
from django.test import override_settings

from annotation.importing import MAX_PROBLEMS, ImportProblem, ImportRejected
from annotation.models import CandidatePair, Study, Variation
from annotation.services import import_pairs
from tests.factories import CSV_HEADER, csv_bytes, csv_row, jsonl_bytes, make_study

COLUMNS = CSV_HEADER.split(",")
TEXT_FIELDS = (
    "indication",
    "comparison",
    "technique",
    "original_findings",
    "original_impression",
    "alternative_findings",
    "alternative_impression",
)
BOM = b"\xef\xbb\xbf"

# Everything a spreadsheet or a shell might mangle. Stored exactly as given.
TRICKY_TEXTS = {
    "indication": '=HYPERLINK("http://x", "click"), then more',
    "comparison": "+1 compared with 2019-01-01   ",
    "technique": "-PA and lateral\r\n@lateral view\twith a tab",
    "original_findings": "Line one,\r\nline two\nline three\rline four\r\n\r\n",
    "original_impression": "  Ünïcödé — 肺 \u201ccurly\u201d \u2018quotes\u2019 \u2028 \x85 nbsp\u00a0",
    "alternative_findings": '"Quoted" start, ""doubled"", and a lone " quote',
    "alternative_impression": "@mention ; semicolon , comma \\ backslash ",
}


def _counts() -> tuple[int, int, int]:
    return CandidatePair.objects.count(), Study.objects.count(), Variation.objects.count()


def _rejected(study: Study, data: bytes, *, filename: str = "pairs.csv", **kwargs) -> list[ImportProblem]:
    """The problems of a rejected import, after checking that it wrote nothing."""
    before = _counts()
    with pytest.raises(ImportRejected) as caught:
        import_pairs(study, data, filename=filename, **kwargs)
    assert _counts() == before
    assert caught.value.problems
    return caught.value.problems


def _only(problems: list[ImportProblem]) -> ImportProblem:
    assert len(problems) == 1, problems
    return problems[0]


def _stored(study: Study) -> list[dict]:
    return list(
        CandidatePair.objects.filter(study=study)
        .order_by("pk")
        .values("pk", "dataset__key", "source_study_id", "variation__key", "verdict", *TEXT_FIELDS)
    )


# --- Columns ------------------------------------------------------------------------------


def test_it_rejects_unknown_columns(study):
    data = csv_bytes([csv_row(notes="x")], columns=[*COLUMNS, "notes"])
    problem = _only(_rejected(study, data))
    assert (problem.line, problem.field) == (1, "notes")
    assert "Unknown column 'notes'. Rename or remove it; the columns are: dataset, study_id" in problem.message


def test_it_rejects_a_missing_required_column(study):
    data = csv_bytes([csv_row()], columns=[c for c in COLUMNS if c != "verdict"])
    problem = _only(_rejected(study, data))
    assert (problem.line, problem.field) == (1, "verdict")
    assert problem.message == "Required column 'verdict' is missing. Add it."


def test_it_reports_every_missing_column_at_once(study):
    data = csv_bytes([csv_row()], columns=["dataset", "study_id", "reref_variation", "verdict"])
    problems = _rejected(study, data)
    assert [p.field for p in problems] == [
        "original_findings",
        "original_impression",
        "alternative_findings",
        "alternative_impression",
    ]
    assert {p.line for p in problems} == {1}


def test_it_rejects_a_duplicated_column(study):
    data = csv_bytes([csv_row()], columns=[*COLUMNS, "verdict"])
    problem = _only(_rejected(study, data))
    assert (problem.line, problem.field) == (1, "verdict")
    assert problem.message == "Column 'verdict' appears twice. Keep one."


def test_it_tolerates_blanks_around_column_names(study):
    header = ", ".join(COLUMNS).encode()
    body = csv_bytes([csv_row()]).split(b"\r\n", 1)[1]
    report = import_pairs(study, header + b"\r\n" + body, filename="pairs.csv")
    assert report.created == 1


def test_it_rejects_unknown_and_missing_keys_in_jsonl(study):
    row = csv_row(notes="x")
    del row["verdict"]
    problems = _rejected(study, jsonl_bytes([csv_row(), row]), filename="pairs.jsonl")
    assert [(p.line, p.field) for p in problems] == [(2, "notes"), (2, "verdict")]


# --- Values -------------------------------------------------------------------------------


def test_it_rejects_an_unknown_variation(study):
    data = csv_bytes([csv_row(), csv_row(reref_variation="sarcasm")])
    problem = _only(_rejected(study, data))
    assert (problem.line, problem.field) == (3, "reref_variation")
    assert problem.message.startswith("Unknown variation 'sarcasm' for study s1. Use one of: structure--structured,")
    assert "hedging" in problem.message


def test_it_checks_variations_against_the_studys_own_taxonomy(db):
    study = Study.objects.create_with_taxonomy(slug="small", taxonomy=(("terminology", "Terminology", "Language"),))
    problem = _only(_rejected(study, csv_bytes([csv_row(reref_variation="hedging")])))
    assert problem.field == "reref_variation"
    assert problem.message.endswith("Use one of: terminology.")


def test_it_rejects_an_unknown_dataset(study):
    problem = _only(_rejected(study, csv_bytes([csv_row(dataset="mimic")])))
    assert (problem.line, problem.field) == (2, "dataset")
    assert problem.message.startswith(
        "Unknown dataset 'mimic'. Use one of: chexpert-plus, iu-xray, mimic-cxr, rexgradient; "
        "or ask an administrator to add it"
    )


def test_it_rejects_an_invalid_verdict(study):
    problem = _only(_rejected(study, csv_bytes([csv_row(verdict="Accepted")])))
    assert (problem.line, problem.field) == (2, "verdict")
    assert problem.message == (
        "Invalid verdict 'Accepted'. Use one of: accepted, rejected, already_in_target_form, infeasible."
    )


def test_it_rejects_a_pair_listed_twice_whatever_the_mimic_prefix(study):
    rows = [
        csv_row(study_id="s50414267"),
        csv_row(study_id="50414267"),
        csv_row(study_id="S50414267"),
        csv_row(study_id="50414267", reref_variation="terminology"),  # another variation: a different pair
    ]
    problems = _rejected(study, csv_bytes(rows))
    assert [(p.line, p.field) for p in problems] == [(3, None), (4, None)]
    assert problems[0].message == (
        "Duplicate pair: dataset mimic-cxr, study 50414267, variation hedging is already on line 2. "
        "Keep one of the two lines."
    )
    assert "already on line 2" in problems[1].message


def test_it_rejects_a_pair_listed_twice_in_jsonl(study):
    rows = [csv_row(study_id=50414267), csv_row(), csv_row(study_id="s50414267")]
    problem = _only(_rejected(study, jsonl_bytes(rows), filename="pairs.jsonl"))
    assert problem.line == 3
    assert "already on line 1" in problem.message


def test_it_rejects_a_reimport_that_changes_the_text_of_a_stored_pair(study):
    row = csv_row()
    import_pairs(study, csv_bytes([row]), filename="pairs.csv")
    stored = _stored(study)
    changed = {**row, "original_findings": row["original_findings"] + " "}
    problem = _only(_rejected(study, csv_bytes([csv_row(), changed])))
    assert (problem.line, problem.field) == (3, "original_findings")
    assert problem.message == (
        "This pair is already stored with a different original_findings. Stored pairs are never changed by an "
        "import: fix the line to match, or import the pair into a new study."
    )
    assert _stored(study) == stored


def test_it_names_every_changed_field_of_a_stored_pair(study):
    row = csv_row()
    import_pairs(study, csv_bytes([row]), filename="pairs.csv")
    stored = _stored(study)
    changed = {**row, "technique": "PA.", "alternative_impression": "Pneumonia."}
    problem = _only(_rejected(study, csv_bytes([changed])))
    assert problem.field == "technique"
    assert "a different technique, alternative_impression." in problem.message
    assert _stored(study) == stored


def test_it_rejects_a_reimport_that_changes_the_verdict(study):
    row = csv_row(verdict="accepted")
    import_pairs(study, csv_bytes([row]), filename="pairs.csv")
    stored = _stored(study)
    problem = _only(_rejected(study, csv_bytes([{**row, "verdict": "rejected"}])))
    assert (problem.line, problem.field) == (2, "verdict")
    assert "already stored with a different verdict" in problem.message
    assert _stored(study) == stored


def test_it_rejects_a_changed_pair_even_among_many_new_ones(study):
    row = csv_row()
    import_pairs(study, csv_bytes([row]), filename="pairs.csv")
    stored = _stored(study)
    rows = [csv_row() for _ in range(1200)] + [{**row, "verdict": "infeasible"}]
    problem = _only(_rejected(study, csv_bytes(rows)))
    assert (problem.line, problem.field) == (1202, "verdict")
    assert _stored(study) == stored


@pytest.mark.parametrize(
    "study_id",
    [
        "s5041426x",
        "p10/s50414267",
        "s",
        "50414267.0",
        "\uff15\uff10\uff14\uff11",  # full-width digits: str.isdigit() alone would accept them
        "\u00b2\u00b3",  # superscripts, likewise
    ],
)
def test_it_rejects_a_mimic_study_id_that_is_not_digits(study, study_id):
    problem = _only(_rejected(study, csv_bytes([csv_row(study_id=study_id)])))
    assert (problem.line, problem.field) == (2, "study_id")
    assert problem.message == (
        f"'{study_id}' is not a mimic-cxr study id: use digits only (optionally prefixed with 's')."
    )


def test_it_rejects_an_empty_study_id(study):
    problem = _only(_rejected(study, csv_bytes([csv_row(dataset="iu-xray", study_id="   ")])))
    assert (problem.line, problem.field) == (2, "study_id")
    assert "Give the report's id in its dataset." in problem.message


def test_it_rejects_a_study_id_longer_than_64_characters(study):
    problem = _only(_rejected(study, csv_bytes([csv_row(dataset="iu-xray", study_id="x" * 65)])))
    assert (problem.line, problem.field) == (2, "study_id")
    assert "Check that the columns are in the right place." in problem.message


@pytest.mark.parametrize("side", ["original", "alternative"])
@pytest.mark.parametrize("blank", ["", "   ", "\r\n\t"])
def test_it_rejects_a_report_with_neither_findings_nor_impression(study, side, blank):
    row = csv_row(**{f"{side}_findings": blank, f"{side}_impression": blank})
    problem = _only(_rejected(study, csv_bytes([csv_row(), row])))
    assert (problem.line, problem.field) == (3, f"{side}_findings")
    assert problem.message == (
        f"The {side} report has neither Findings nor Impression. Fill in at least one of "
        f"{side}_findings and {side}_impression."
    )


def test_it_reports_every_problem_of_every_line(study):
    rows = [
        csv_row(),
        csv_row(dataset="nope", verdict="maybe"),
        csv_row(),
        csv_row(reref_variation="nope", original_findings="", original_impression=""),
    ]
    problems = _rejected(study, csv_bytes(rows))
    assert [(p.line, p.field) for p in problems] == [
        (3, "dataset"),
        (3, "verdict"),
        (5, "reref_variation"),
        (5, "original_findings"),
    ]


def test_it_stops_after_a_limited_number_of_problems(study):
    problems = _rejected(study, csv_bytes([csv_row(verdict="nope") for _ in range(200)]))
    assert len(problems) == MAX_PROBLEMS


def test_it_imports_nothing_when_a_bad_row_follows_many_good_ones(study):
    rows = [csv_row() for _ in range(1500)] + [csv_row(verdict="nope")]
    problem = _only(_rejected(study, csv_bytes(rows)))
    assert (problem.line, problem.field) == (1502, "verdict")
    assert not CandidatePair.objects.exists()


def test_it_writes_nothing_when_the_database_fails_midway(study, monkeypatch):
    bulk_create = CandidatePair.objects.bulk_create
    batches = []

    def fail_on_second_batch(objs, *args, **kwargs):
        batches.append(len(objs))
        if len(batches) == 2:
            raise DatabaseError("disk full")
        return bulk_create(objs, *args, **kwargs)

    monkeypatch.setattr(CandidatePair.objects, "bulk_create", fail_on_second_batch)
    with pytest.raises(DatabaseError):
        import_pairs(study, csv_bytes([csv_row() for _ in range(1500)]), filename="pairs.csv")
    assert batches == [1000, 500]
    assert not CandidatePair.objects.exists()


# --- Bytes and encodings ------------------------------------------------------------------


def test_it_rejects_bytes_that_are_not_utf8(study):
    good = csv_bytes([csv_row(), csv_row()])
    lines = good.split(b"\r\n")
    lines[2] = lines[2].replace(b"Pneumonia.", b"Pneumonie \xe9tendue.", 1)
    problem = _only(_rejected(study, b"\r\n".join(lines)))
    assert (problem.line, problem.field) == (3, None)
    assert problem.message.startswith("Byte 0xe9 is not valid UTF-8. Save the file as UTF-8")


def test_it_counts_physical_lines_when_reporting_bad_bytes(study):
    # The first row spans lines 2 to 4; the bad byte is on line 5.
    data = csv_bytes([csv_row(original_findings="one\r\ntwo\r\nthree"), csv_row(indication="BAD")])
    problem = _only(_rejected(study, data.replace(b"BAD", b"Fi\xffver")))
    assert problem.line == 5
    assert "Byte 0xff" in problem.message


def test_it_rejects_nul_bytes(study):
    data = csv_bytes([csv_row(), csv_row(comparison="x\x00y")])
    problem = _only(_rejected(study, data))
    assert problem.line == 3
    assert "contains a NUL byte" in problem.message
    assert "Save it as UTF-8 CSV or JSON Lines." in problem.message


def test_it_rejects_a_utf16_file(study):
    data = csv_bytes([csv_row()]).decode().encode("utf-16")
    problem = _only(_rejected(study, data))
    assert problem.line == 1
    assert "UTF-16" in problem.message


def test_it_rejects_a_nul_escaped_in_jsonl(study):
    # No NUL byte in the file, but "\u0000" decodes to one, which PostgreSQL cannot store.
    data = jsonl_bytes([csv_row(), csv_row(dataset="iu-xray", study_id="CXR1", original_findings="a\x00b")])
    assert b"\x00" not in data
    problem = _only(_rejected(study, data, filename="pairs.jsonl"))
    assert (problem.line, problem.field) == (2, "original_findings")
    assert "NUL" in problem.message


def test_it_rejects_an_unpaired_surrogate_escaped_in_jsonl(study):
    line = json.dumps(csv_row(alternative_impression="\ud800"))
    problem = _only(_rejected(study, line.encode() + b"\n", filename="pairs.jsonl"))
    assert (problem.line, problem.field) == (1, "alternative_impression")
    assert "unpaired surrogate" in problem.message


def test_it_rejects_an_empty_file(study):
    problem = _only(_rejected(study, b""))
    assert (problem.line, problem.field) == (None, None)
    assert problem.message == "The file is empty. Export the candidate pairs again and upload that file."


def test_it_rejects_a_whitespace_only_file(study):
    problem = _only(_rejected(study, b"  \r\n\t\n \n"))
    assert problem.message.startswith("The file is empty.")


@pytest.mark.parametrize("data", [BOM, BOM + b"\r\n  \n"])
def test_it_rejects_a_file_with_only_a_byte_order_mark(study, data):
    problem = _only(_rejected(study, data))
    assert problem.message.startswith("The file is empty.")


@pytest.mark.parametrize("data", [CSV_HEADER.encode(), CSV_HEADER.encode() + b"\r\n", CSV_HEADER.encode() + b"\n\n\n"])
def test_it_rejects_a_file_with_a_header_and_no_rows(study, data):
    problem = _only(_rejected(study, data))
    assert problem.message == "The file has a header but no rows. Add at least one pair."


def test_it_rejects_a_file_over_the_size_limit(study):
    data = csv_bytes([csv_row() for _ in range(20)])
    with override_settings(READINGROOM_IMPORT_MAX_BYTES=len(data) - 1):
        problem = _only(_rejected(study, data))
    assert problem.message == (
        f"The file is {len(data):,} bytes; the limit is {len(data) - 1:,} bytes. "
        "Split it into smaller files and import them one after another."
    )


def test_it_accepts_a_file_of_exactly_the_size_limit(study):
    data = csv_bytes([csv_row() for _ in range(20)])
    with override_settings(READINGROOM_IMPORT_MAX_BYTES=len(data)):
        assert import_pairs(study, data, filename="pairs.csv").created == 20


# --- CSV structure ------------------------------------------------------------------------


def test_it_rejects_an_unterminated_quote_at_the_end(study):
    data = csv_bytes([csv_row()]) + b'mimic-cxr,50414267,hedging,accepted,"Fever,,,a,b,c,d\r\n'
    problem = _only(_rejected(study, data))
    assert problem.line == 3
    assert problem.message.startswith("The CSV is malformed here (")
    assert 'must be wrapped in double quotes, with any quote inside it doubled ("")' in problem.message


def test_it_rejects_text_after_a_closing_quote_on_the_line_where_the_record_starts(study):
    head = csv_bytes([csv_row(original_findings="spans\r\ntwo lines")])  # lines 1-3
    bad = b'mimic-cxr,50414267,hedging,accepted,"Fever"ish,,,a,b,c,d\r\n'  # line 4
    tail = csv_bytes([csv_row()]).split(b"\r\n", 1)[1]  # line 5
    problem = _only(_rejected(study, head + bad + tail))
    assert problem.line == 4
    assert "malformed" in problem.message


def test_it_reports_a_broken_quote_at_the_line_where_its_record_starts(study):
    head = csv_bytes([csv_row()])
    bad = b'mimic-cxr,50414267,hedging,accepted,"Fever\r\nstill open\r\n"closed"late,,,a,b,c,d\r\n'
    problem = _only(_rejected(study, head + bad))
    assert problem.line == 3


def test_it_rejects_a_row_with_the_wrong_number_of_fields(study):
    data = csv_bytes([csv_row(), csv_row()]) + b"mimic-cxr,50414267,hedging,accepted,Fever,a,b,c,d\r\n"
    problem = _only(_rejected(study, data))
    assert problem.line == 4
    assert problem.message == (
        "This row has 9 fields but the header has 11. Check for an unquoted comma or a missing field."
    )


def test_it_reports_the_line_where_a_record_starts_after_multiline_fields(study):
    # Lines 2-4, then 5-6, then the bad row on line 7.
    rows = [csv_row(original_findings="a\r\nb\r\nc"), csv_row(technique="x\ny"), csv_row(verdict="nope")]
    problem = _only(_rejected(study, csv_bytes(rows)))
    assert (problem.line, problem.field) == (7, "verdict")


def test_it_skips_blank_lines_and_keeps_counting_them(study):
    header, first, second = csv_bytes([csv_row(), csv_row(verdict="nope")]).split(b"\r\n")[:3]
    data = header + b"\r\n\r\n" + first + b"\r\n\r\n\r\n" + second + b"\r\n"
    problem = _only(_rejected(study, data))
    assert problem.line == 6


# --- JSON Lines structure -----------------------------------------------------------------


def test_it_rejects_a_jsonl_line_that_is_not_json(study):
    data = jsonl_bytes([csv_row()]) + b'{"dataset": "mimic-cxr",\n' + jsonl_bytes([csv_row()])
    problem = _only(_rejected(study, data, filename="pairs.jsonl"))
    assert problem.line == 2
    assert problem.message.startswith("Not valid JSON (")
    assert problem.message.endswith("Each line must be one JSON object.")


def _with_key_twice(row: dict, key: str, first: str, last: str) -> bytes:
    """One JSON object (a line) that gives `key` twice, first and last, around the row's other keys."""
    others = ", ".join(f"{json.dumps(k)}: {json.dumps(v)}" for k, v in row.items() if k != key)
    key = json.dumps(key)
    return ("{" + f"{key}: {json.dumps(first)}, {others}, {key}: {json.dumps(last)}" + "}\n").encode()


def test_it_rejects_a_jsonl_object_with_a_key_twice_naming_the_line_and_the_key(study):
    data = jsonl_bytes([csv_row()]) + _with_key_twice(csv_row(), "verdict", "accepted", "rejected")
    problem = _only(_rejected(study, data, filename="pairs.jsonl"))
    assert (problem.line, problem.field) == (2, "verdict")
    assert problem.message == (
        'The key "verdict" is given twice in this object; which value was meant is unclear. Keep one of '
        "them, then import the file again."
    )


def test_it_rejects_a_key_twice_inside_the_generator_metadata(study):
    row = {k: v for k, v in csv_row().items() if k != "model"}
    line = json.dumps(row)[:-1] + ', "model": {"name": "a", "name": "b"}}\n'
    problem = _only(_rejected(study, line.encode(), filename="pairs.jsonl"))
    assert (problem.line, problem.field) == (1, "name")


@pytest.mark.parametrize("line", [b"[1, 2]", b'"text"', b"42", b"null"])
def test_it_rejects_a_jsonl_line_that_is_not_an_object(study, line):
    data = jsonl_bytes([csv_row()]) + line + b"\n"
    problem = _only(_rejected(study, data, filename="pairs.jsonl"))
    assert problem.line == 2
    assert problem.message == "Each line must be one JSON object ({...})."


@pytest.mark.parametrize(
    "line",
    [b"[" * 100_000 + b"]" * 100_000, b'{"dataset": ' + b'{"a": ' * 100_000 + b"1" + b"}" * 100_001],
    ids=["list", "object"],
)
def test_it_rejects_a_jsonl_line_nested_too_deep_naming_the_line(study, line):
    data = jsonl_bytes([csv_row()]) + line + b"\n" + jsonl_bytes([csv_row()])
    problem = _only(_rejected(study, data, filename="pairs.jsonl"))
    assert problem.line == 2
    assert problem.message.startswith("Nested too deeply to read.")


@pytest.mark.parametrize(
    ("field", "value", "type_name"),
    [
        ("verdict", True, "bool"),
        ("original_findings", ["Clear."], "list"),
        ("indication", {"text": "Cough"}, "dict"),
        ("comparison", 3, "int"),
        ("study_id", 5.0, "float"),
        ("study_id", False, "bool"),
    ],
)
def test_it_rejects_a_jsonl_value_that_is_not_a_string(study, field, value, type_name):
    data = jsonl_bytes([csv_row(), csv_row(**{field: value})])
    problem = _only(_rejected(study, data, filename="pairs.jsonl"))
    assert (problem.line, problem.field) == (2, field)
    assert problem.message == f"Must be a string, not {type_name}. Quote the value."


def test_it_reports_problems_on_several_jsonl_lines(study):
    data = b"{oops\n" + jsonl_bytes([csv_row()]) + b"[]\n" + jsonl_bytes([csv_row(verdict=1)])
    problems = _rejected(study, data, filename="pairs.jsonl")
    assert [(p.line, p.field) for p in problems] == [(1, None), (3, None), (4, "verdict")]


def test_it_stops_after_a_limited_number_of_jsonl_problems(study):
    problems = _rejected(study, b"{oops\n" * 500, filename="pairs.jsonl")
    assert len(problems) == MAX_PROBLEMS


# --- Valid files --------------------------------------------------------------------------


def test_it_imports_a_csv_file(study):
    rows = [
        csv_row(study_id="50414267", verdict="accepted"),
        csv_row(dataset="iu-xray", study_id="CXR12", reref_variation="terminology", verdict="rejected"),
        csv_row(dataset="chexpert-plus", study_id="patient1/study2", verdict="already_in_target_form"),
    ]
    report = import_pairs(study, csv_bytes(rows), filename="pairs.csv")
    assert (report.rows, report.created, report.unchanged, report.dry_run) == (3, 3, 0, False)
    assert report.summary == "Imported 3 new pairs."
    stored = _stored(study)
    assert [(p["dataset__key"], p["source_study_id"], p["variation__key"], p["verdict"]) for p in stored] == [
        ("mimic-cxr", "50414267", "hedging", "accepted"),
        ("iu-xray", "CXR12", "terminology", "rejected"),
        ("chexpert-plus", "patient1/study2", "hedging", "already_in_target_form"),
    ]
    for pair, row in zip(stored, rows, strict=True):
        assert {name: pair[name] for name in TEXT_FIELDS} == {name: row[name] for name in TEXT_FIELDS}


def test_it_imports_a_jsonl_file(study):
    rows = [csv_row(comparison=None), csv_row(dataset="rexgradient", study_id="pGRDN1", verdict="infeasible")]
    report = import_pairs(study, jsonl_bytes(rows), filename="pairs.jsonl")
    assert (report.rows, report.created) == (2, 2)
    stored = _stored(study)
    assert stored[0]["comparison"] == ""
    assert (stored[1]["dataset__key"], stored[1]["source_study_id"], stored[1]["verdict"]) == (
        "rexgradient",
        "pGRDN1",
        "infeasible",
    )


def test_it_accepts_numeric_study_ids_in_jsonl(study):
    import_pairs(study, jsonl_bytes([csv_row(study_id=50414267)]), filename="pairs.jsonl")
    assert _stored(study)[0]["source_study_id"] == "50414267"


@pytest.mark.parametrize("filename", ["", "upload", "pairs.txt", "PAIRS.NDJSON"])
def test_it_recognises_jsonl_without_the_usual_file_name(study, filename):
    assert import_pairs(study, jsonl_bytes([csv_row()]), filename=filename).created == 1


def test_it_reads_a_csv_file_by_its_name_whatever_it_starts_with(study):
    assert import_pairs(study, csv_bytes([csv_row()]), filename="Pairs.CSV").created == 1


@pytest.mark.parametrize("study_id", ["s50414267", "S50414267", "50414267", " s50414267 "])
def test_it_strips_the_mimic_prefix(study, study_id):
    import_pairs(study, csv_bytes([csv_row(study_id=study_id)]), filename="pairs.csv")
    assert _stored(study)[0]["source_study_id"] == "50414267"


def test_it_keeps_the_study_id_of_datasets_without_a_prefix(study):
    import_pairs(study, csv_bytes([csv_row(dataset="iu-xray", study_id="s123")]), filename="pairs.csv")
    assert _stored(study)[0]["source_study_id"] == "s123"


def test_it_accepts_a_byte_order_mark(study):
    assert import_pairs(study, BOM + csv_bytes([csv_row()]), filename="pairs.csv").created == 1
    assert import_pairs(study, BOM + jsonl_bytes([csv_row()]), filename="pairs.jsonl").created == 1


def test_it_stores_csv_text_byte_exact(study):
    import_pairs(study, csv_bytes([csv_row(**TRICKY_TEXTS)]), filename="pairs.csv")
    pair = CandidatePair.objects.get(study=study)
    assert {name: getattr(pair, name) for name in TEXT_FIELDS} == TRICKY_TEXTS


def test_it_stores_text_byte_exact_from_a_csv_with_lf_line_ends(study):
    data = csv_bytes([csv_row(**TRICKY_TEXTS)])
    header, rest = data.split(b"\r\n", 1)
    import_pairs(study, header + b"\n" + rest.removesuffix(b"\r\n") + b"\n", filename="pairs.csv")
    pair = CandidatePair.objects.get(study=study)
    assert {name: getattr(pair, name) for name in TEXT_FIELDS} == TRICKY_TEXTS


def test_it_stores_a_handwritten_csv_byte_exact(study):
    data = (
        "\ufeffdataset,study_id,reref_variation,verdict,original_findings,original_impression,"
        "alternative_findings,alternative_impression\r\n"
        'mimic-cxr,s1,hedging,accepted,"=1+1","a,""b""\r\nc"," -x ",@y \r\n'
    ).encode()
    import_pairs(study, data, filename="pairs.csv")
    pair = CandidatePair.objects.get(study=study)
    assert (pair.original_findings, pair.original_impression) == ("=1+1", 'a,"b"\r\nc')
    assert (pair.alternative_findings, pair.alternative_impression) == (" -x ", "@y ")


def test_it_stores_jsonl_text_byte_exact(study):
    import_pairs(study, jsonl_bytes([csv_row(**TRICKY_TEXTS)]), filename="pairs.jsonl")
    pair = CandidatePair.objects.get(study=study)
    assert {name: getattr(pair, name) for name in TEXT_FIELDS} == TRICKY_TEXTS


def test_it_accepts_jsonl_with_crlf_line_ends(study):
    data = jsonl_bytes([csv_row(), csv_row()]).replace(b"\n", b"\r\n")
    assert import_pairs(study, data, filename="pairs.jsonl").created == 2


def test_the_context_columns_are_optional(study):
    columns = [c for c in COLUMNS if c not in ("indication", "comparison", "technique")]
    import_pairs(study, csv_bytes([csv_row()], columns=columns), filename="pairs.csv")
    pair = CandidatePair.objects.get(study=study)
    assert (pair.indication, pair.comparison, pair.technique) == ("", "", "")


def test_either_section_of_a_report_may_be_empty(study):
    rows = [csv_row(original_findings="", alternative_impression=""), csv_row(original_impression=" ")]
    assert import_pairs(study, csv_bytes(rows), filename="pairs.csv").created == 2


def test_the_same_study_id_may_come_with_several_variations_and_datasets(study):
    rows = [
        csv_row(study_id="1", reref_variation="hedging"),
        csv_row(study_id="1", reref_variation="terminology"),
        csv_row(dataset="iu-xray", study_id="1", reref_variation="hedging"),
    ]
    assert import_pairs(study, csv_bytes(rows), filename="pairs.csv").created == 3


def test_an_identical_reimport_changes_nothing_and_says_so(study):
    data = csv_bytes([csv_row(**TRICKY_TEXTS), csv_row()])
    import_pairs(study, data, filename="pairs.csv")
    stored = _stored(study)
    report = import_pairs(study, data, filename="pairs.csv")
    assert (report.rows, report.created, report.unchanged) == (2, 0, 2)
    assert report.summary == "Nothing to import: all 2 pairs in the file are already stored, unchanged."
    assert _stored(study) == stored


def test_a_reimport_with_the_other_form_of_a_mimic_id_is_unchanged(study):
    row = csv_row(study_id="s50414267")
    import_pairs(study, csv_bytes([row]), filename="pairs.csv")
    report = import_pairs(study, jsonl_bytes([{**row, "study_id": 50414267}]), filename="pairs.jsonl")
    assert (report.created, report.unchanged) == (0, 1)


def test_it_imports_only_the_new_pairs_of_a_file(study):
    old = [csv_row(), csv_row()]
    import_pairs(study, csv_bytes(old), filename="pairs.csv")
    stored = _stored(study)
    new = csv_row()
    report = import_pairs(study, csv_bytes([old[0], new, old[1]]), filename="pairs.csv")
    assert (report.rows, report.created, report.unchanged) == (3, 1, 2)
    assert report.summary == "Imported 1 new pair; 2 already stored, unchanged."
    assert _stored(study)[:2] == stored
    assert _stored(study)[2]["source_study_id"] == new["study_id"]


def test_a_dry_run_writes_nothing_but_says_what_it_would_import(study):
    old = csv_row()
    import_pairs(study, csv_bytes([old]), filename="pairs.csv")
    stored = _stored(study)
    report = import_pairs(study, csv_bytes([old, csv_row(), csv_row()]), filename="pairs.csv", dry_run=True)
    assert (report.rows, report.created, report.unchanged, report.dry_run) == (3, 2, 1, True)
    assert report.summary == "Would import 2 new pairs; 1 already stored, unchanged."
    assert _stored(study) == stored


def test_a_dry_run_rejects_a_bad_file_too(study):
    problem = _only(_rejected(study, csv_bytes([csv_row(verdict="nope")]), dry_run=True))
    assert problem.field == "verdict"


def test_it_reports_progress_batch_by_batch(study):
    calls = []
    import_pairs(
        study,
        csv_bytes([csv_row() for _ in range(2500)]),
        filename="pairs.csv",
        progress=lambda done, total: calls.append((done, total)),
    )
    assert calls == [(0, 2500), (1000, 2500), (2000, 2500), (2500, 2500)]


def test_it_reports_progress_of_a_dry_run(study):
    calls = []
    data = csv_bytes([csv_row()])
    import_pairs(study, data, filename="pairs.csv", dry_run=True, progress=lambda *args: calls.append(args))
    assert calls == [(0, 1), (1, 1)]


def test_it_reports_progress_of_a_reimport_that_changes_nothing(study):
    data = csv_bytes([csv_row()])
    import_pairs(study, data, filename="pairs.csv")
    calls = []
    import_pairs(study, data, filename="pairs.csv", progress=lambda *args: calls.append(args))
    assert calls[-1] == (0, 0)


def test_the_same_file_may_be_imported_into_two_studies(study):
    other = make_study("s2")
    data = csv_bytes([csv_row(), csv_row()])
    assert import_pairs(study, data, filename="pairs.csv").created == 2
    assert import_pairs(other, data, filename="pairs.csv").created == 2
    assert CandidatePair.objects.filter(study=study).count() == 2
    assert CandidatePair.objects.filter(study=other).count() == 2
    assert set(CandidatePair.objects.filter(study=other).values_list("variation__study", flat=True)) == {other.pk}


def test_it_imports_a_large_file_in_a_few_queries(study, django_assert_max_num_queries):
    data = csv_bytes([csv_row() for _ in range(3000)])
    with django_assert_max_num_queries(10):
        assert import_pairs(study, data, filename="pairs.csv").created == 3000
