"""bin/mutate keeps each mutant's verdict with its function's hash and re-tests only what needs it."""

import importlib.util
import json
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def mutate(tmp_path, monkeypatch):
    spec = importlib.util.spec_from_file_location("bin_mutate", ROOT / "bin" / "mutate.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    monkeypatch.setattr(module, "VERDICTS", tmp_path)
    return module


MUTANTS = {
    "consensus.services.x_route_example__mutmut_1": "aaaa",
    "consensus.services.x_route_example__mutmut_2": "aaaa",
    "consensus.services.x_route_example__mutmut_3": "aaaa",
    "consensus.services.x_validate_rating__mutmut_1": "bbbb",
    "consensus.services.x_validate_rating__mutmut_2": "bbbb",
}


def test_verdicts_are_kept_one_a_line_and_only_once_a_mutant_ran(mutate, tmp_path):
    statuses = dict(zip(MUTANTS, ["killed", "survived", "not checked", "no tests", "timeout"], strict=True))

    mutate.save_verdicts("consensus/services.py", MUTANTS, statuses)

    text = (tmp_path / "consensus.services.json").read_text()
    assert text.splitlines()[1] == '"consensus.services.x_route_example__mutmut_1": ["killed", "aaaa"],'
    assert json.loads(text) == {
        "consensus.services.x_route_example__mutmut_1": ["killed", "aaaa"],
        "consensus.services.x_route_example__mutmut_2": ["survived", "aaaa"],
        "consensus.services.x_validate_rating__mutmut_1": ["no tests", "bbbb"],
        "consensus.services.x_validate_rating__mutmut_2": ["timeout", "bbbb"],
    }


def test_a_verdict_holds_while_its_function_is_unchanged(mutate):
    statuses = dict.fromkeys(MUTANTS, "killed")
    mutate.save_verdicts("consensus/services.py", MUTANTS, statuses)
    changed = {**MUTANTS, "consensus.services.x_validate_rating__mutmut_1": "cccc"}
    changed["consensus.services.x_validate_rating__mutmut_2"] = "cccc"

    recorded = mutate.recorded_verdicts("consensus/services.py", changed)

    assert set(recorded) == {name for name in MUTANTS if "route_example" in name}


def test_a_run_tests_what_has_no_verdict_or_the_survivors_or_what_is_named(mutate):
    recorded = {
        "consensus.services.x_route_example__mutmut_1": "killed",
        "consensus.services.x_route_example__mutmut_2": "survived",
        "consensus.services.x_validate_rating__mutmut_1": "no tests",
    }

    assert mutate.to_run(MUTANTS, recorded, survivors=False, only=[]) == [
        "consensus.services.x_route_example__mutmut_3",
        "consensus.services.x_validate_rating__mutmut_2",
    ]
    assert mutate.to_run(MUTANTS, recorded, survivors=True, only=[]) == [
        "consensus.services.x_route_example__mutmut_2",
        "consensus.services.x_validate_rating__mutmut_1",
    ]
    assert mutate.to_run(MUTANTS, recorded, survivors=False, only=["consensus.services.x_validate*"]) == [
        "consensus.services.x_validate_rating__mutmut_1",
        "consensus.services.x_validate_rating__mutmut_2",
    ]
    # Both: the named functions' survivors only.
    assert mutate.to_run(MUTANTS, recorded, survivors=True, only=["consensus.services.x_validate*"]) == [
        "consensus.services.x_validate_rating__mutmut_1",
    ]


def test_timeouts_are_tested_again_when_asked(mutate):
    # A run beside other work times out mutants that would survive; --timeouts tests them again.
    recorded = dict.fromkeys(MUTANTS, "killed") | {
        "consensus.services.x_route_example__mutmut_2": "timeout",
        "consensus.services.x_validate_rating__mutmut_1": "timeout",
        "consensus.services.x_validate_rating__mutmut_2": "survived",
    }

    assert mutate.to_run(MUTANTS, recorded, survivors=False, only=[]) == []
    assert mutate.to_run(MUTANTS, recorded, survivors=False, only=[], timeouts=True) == [
        "consensus.services.x_route_example__mutmut_2",
        "consensus.services.x_validate_rating__mutmut_1",
    ]
    assert mutate.to_run(MUTANTS, recorded, survivors=True, only=[], timeouts=True) == [
        "consensus.services.x_route_example__mutmut_2",
        "consensus.services.x_validate_rating__mutmut_1",
        "consensus.services.x_validate_rating__mutmut_2",
    ]
    assert mutate.to_run(
        MUTANTS, recorded, survivors=False, only=["consensus.services.x_validate*"], timeouts=True
    ) == [
        "consensus.services.x_validate_rating__mutmut_1",
    ]


def test_the_mutants_and_hashes_are_mutmuts_own(mutate, tmp_path):
    folder = tmp_path / "work"
    folder.mkdir()
    (folder / "setup.cfg").write_text("[mutmut]\nsource_paths =\n    consensus\n")

    mutants = mutate.module_mutants("consensus/conflicts.py", folder)

    assert "consensus.conflicts.x_hidden_pair_ids__mutmut_1" in mutants
    assert len(set(mutants.values())) == 4  # one hash per mutated function
    source = (ROOT / "consensus" / "conflicts.py").read_text()
    assert len(mutants) > source.count("def ")


def test_a_verdict_is_kept_with_the_hash_of_the_code_it_was_found_on(mutate, tmp_path):
    # route_example changed after the run mutated it: its verdict keeps the old hash, so the next
    # run tests it again; a verdict kept from before (not found now) keeps the current one.
    meta = tmp_path / "mutants" / "consensus" / "services.py.meta"
    meta.parent.mkdir(parents=True)
    meta.write_text(json.dumps({"hash_by_function_name": {"x_route_example": "old0", "x_validate_rating": "bbbb"}}))
    found = {"consensus.services.x_route_example__mutmut_1": "killed"}

    kept = mutate.found_on(MUTANTS, found, mutate.tested_hashes(tmp_path, "consensus/services.py"))

    assert kept["consensus.services.x_route_example__mutmut_1"] == "old0"
    assert kept["consensus.services.x_route_example__mutmut_2"] == "aaaa"
    assert mutate.function_of("consensus.assignment.xǁ_ReaderPoolǁtake__mutmut_14") == "xǁ_ReaderPoolǁtake"
