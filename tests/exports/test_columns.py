"""exports.columns is the one list of every release file's columns: the headers, the queries' fields
and the analysis' frames all follow it, and a field without a column (or a column without a field) is
an error where the query is built, not a shifted column in a release."""

import json
from pathlib import Path

import pytest
from django.conf import settings

from analysis import frames, judges
from exports import columns, rows
from exports.columns import in_file_order
from tests.exports.test_build_release import HEADERS, JUDGE_HEADERS


def test_the_files_columns_are_the_specs_headers():
    for path, header in (HEADERS | JUDGE_HEADERS).items():
        expected = tuple(header.decode("ascii").removesuffix("\r\n").split(","))
        assert (columns.RELEASE_FILES | columns.JUDGE_FILES)[path] == expected, path


def test_the_analysis_frames_and_the_data_package_take_the_same_columns():
    assert {path: list(names) for path, names in columns.RELEASE_FILES.items()} == frames.RELEASE_FILES
    assert {f"judges/{task}_judges.csv": names for task, names in judges.JUDGE_COLUMNS.items()} == {
        path: list(names) for path, names in columns.JUDGE_FILES.items()
    }
    descriptor = json.loads((Path(settings.BASE_DIR) / "exports" / "datapackage.json").read_text(encoding="utf-8"))
    described = {
        resource["path"]: [f["name"] for f in resource["schema"]["fields"]] for resource in descriptor["resources"]
    }
    assert described == {path: list(names) for path, names in (columns.RELEASE_FILES | columns.JUDGE_FILES).items()}


def test_fields_are_put_in_the_files_column_order_whatever_order_they_were_built_in():
    assert in_file_order({"b": "2", "a": "1", "c": "3"}, ("a", "b", "c")) == ["1", "2", "3"]


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        ({"a": "1", "b": "2"}, "missing ['c'], extra []"),
        ({"a": "1", "b": "2", "c": "3", "d": "4"}, "missing [], extra ['d']"),
    ],
)
def test_a_field_without_its_column_or_a_column_without_its_field_is_refused_by_name(fields, message):
    with pytest.raises(ValueError, match=message.replace("[", r"\[").replace("]", r"\]")):
        in_file_order(fields, ("a", "b", "c"))


@pytest.mark.django_db
@pytest.mark.parametrize("task", ["realism", "equivalence"])
def test_every_query_builds_one_field_per_column_of_its_file(task, monkeypatch):
    # The queries pass their fields through in_file_order with their own file's columns: a
    # column added to a file without its field fails the query's construction.
    selection = rows.Selection(1, task, [], include_unfinished=False)
    built = []
    real = rows.in_file_order
    monkeypatch.setattr(rows, "in_file_order", lambda fields, names: built.append(names) or real(fields, names))
    rows.full_query(selection, 0)
    rows.disagreed_query(selection)
    rows.consensus_query(selection)
    rows.judges_query(selection, {1: 0})
    prefix = "task1" if task == "realism" else "task2"
    assert built == [
        columns.RELEASE_FILES[f"{prefix}/{prefix}_{kind}.csv"] for kind in ("full", "disagreed", "consensus")
    ] + [columns.JUDGE_FILES[f"judges/{prefix}_judges.csv"]]
    # (rows holds the same dict as exports.columns.)
    monkeypatch.setitem(columns.RELEASE_FILES, f"{prefix}/{prefix}_full.csv", (*built[0], "extra_column"))
    with pytest.raises(ValueError, match="extra_column"):
        rows.full_query(selection, 0)
