import locale
import random

import pytest
from django.core.management import CommandError, call_command
from hypothesis import given, settings
from hypothesis import strategies as st

from annotation.models import Assignment, CandidatePair, Example, ReportType, Role, Task, Verdict
from annotation.services import SampleCell, SamplingRefused, draw_sample, sample_pairs
from tests.factories import make_pair, make_study, make_user
from tests.hypothesis_profiles import examples

MIMIC_IDS = [str(50_000_000 + i) for i in range(1, 31)]
IU_IDS = [f"CXR{i}" for i in range(1, 13)]
IU_GOLDEN = {"CXR5", "CXR9", "CXR10", "CXR4", "CXR3"}


def _load_candidates(study, *, shuffle_seed: int | None = None) -> None:
    rows = [("mimic-cxr", sid, "hedging") for sid in MIMIC_IDS]
    rows += [("iu-xray", sid, "terminology") for sid in IU_IDS]
    if shuffle_seed is not None:
        random.Random(shuffle_seed).shuffle(rows)
    for dataset, sid, variation in rows:
        make_pair(study, dataset=dataset, study_id=sid, variation=variation)
    # Ineligible candidates in the same cells must never be drawn.
    make_pair(study, dataset="mimic-cxr", study_id="59999999", variation="hedging", verdict=Verdict.REJECTED)
    make_pair(study, dataset="iu-xray", study_id="CXR999", variation="terminology", verdict=Verdict.INFEASIBLE)


def _sampled(study) -> dict[tuple[str, str], set[str]]:
    result: dict[tuple[str, str], set[str]] = {}
    for pair in CandidatePair.objects.filter(study=study, sampled=True).select_related("dataset", "variation"):
        result.setdefault((pair.dataset.key, pair.variation.key), set()).add(pair.source_study_id)
    return result


def test_it_draws_the_same_sample_on_every_database(db):
    # Pinned: this exact draw must come out of SQLite and PostgreSQL alike, whatever the
    # primary keys or the database's ordering.
    study = make_study()
    _load_candidates(study)
    sample_pairs(study, per_variation=5, seed=42)
    assert _sampled(study) == {
        ("mimic-cxr", "hedging"): {"50000030", "50000004", "50000017", "50000020", "50000012"},
        ("iu-xray", "terminology"): IU_GOLDEN,
    }


# Ids whose code-point order (upper case first) differs from a locale's or a case-insensitive one.
MIXED_CASE_IDS = ["b7", "A3", "a10", "B2", "c1", "C0", "Z9", "e2", "E1", "d5", "D4", "f0"]


@pytest.mark.parametrize(
    "import_order",
    [sorted(MIXED_CASE_IDS), sorted(MIXED_CASE_IDS, reverse=True), sorted(MIXED_CASE_IDS, key=str.casefold)],
    ids=["code point", "reversed", "case-insensitive"],
)
def test_it_does_not_depend_on_import_order(db, import_order):
    # Pinned draw: the candidates are ordered by code point before drawing, whatever order they
    # were imported in and whatever the database's or the machine's collation.
    study = make_study()
    for study_id in import_order:
        make_pair(study, dataset="iu-xray", study_id=study_id, variation="hedging")

    sample_pairs(study, per_variation=4, seed=11)

    assert _sampled(study) == {("iu-xray", "hedging"): {"B2", "E1", "c1", "f0"}}


@settings(derandomize=True, max_examples=examples(40), deadline=None)
@given(order=st.permutations(MIXED_CASE_IDS))
def test_the_draw_depends_on_the_ids_not_on_the_order_they_come_in(order):
    # The database hands the candidates over in its own order (today the model's, by code point on
    # both databases here): the draw must not rely on it.
    drawn = draw_sample(list(order), n=4, seed=11, dataset="iu-xray", variation="hedging")
    assert set(drawn) == {"B2", "E1", "c1", "f0"}


# Locales whose collation differs from code point order (C and POSIX are code point).
COLLATING_LOCALES = ("en_US.UTF-8", "en_GB.UTF-8", "de_DE.UTF-8", "fr_FR.UTF-8")


def _a_collating_locale() -> str | None:
    saved = locale.setlocale(locale.LC_COLLATE)
    try:
        for name in COLLATING_LOCALES:
            try:
                locale.setlocale(locale.LC_COLLATE, name)
            except locale.Error:
                continue
            return name
        return None
    finally:
        locale.setlocale(locale.LC_COLLATE, saved)


@pytest.mark.skipif(
    _a_collating_locale() is None, reason=f"none of {', '.join(COLLATING_LOCALES)} is installed (locale -a)"
)
def test_the_draw_ignores_the_process_locale():
    saved = locale.setlocale(locale.LC_COLLATE)
    try:
        locale.setlocale(locale.LC_COLLATE, _a_collating_locale())
        drawn = draw_sample(MIXED_CASE_IDS, n=4, seed=11, dataset="iu-xray", variation="hedging")
    finally:
        locale.setlocale(locale.LC_COLLATE, saved)
    assert set(drawn) == {"B2", "E1", "c1", "f0"}


def test_a_different_seed_draws_a_different_sample(db):
    study = make_study()
    _load_candidates(study)
    sample_pairs(study, per_variation=5, seed=1)
    first = _sampled(study)
    sample_pairs(study, per_variation=5, seed=2)
    assert _sampled(study) != first


def test_it_never_draws_ineligible_candidates(db):
    study = make_study()
    _load_candidates(study)
    sample_pairs(study, per_variation=100, seed=3)
    assert not CandidatePair.objects.filter(study=study, sampled=True).exclude(verdict=Verdict.ACCEPTED).exists()


def test_it_takes_all_and_says_so_when_a_cell_is_short(db):
    study = make_study()
    _load_candidates(study)
    report = sample_pairs(study, per_variation=20, seed=3)
    assert len(_sampled(study)[("mimic-cxr", "hedging")]) == 20
    assert len(_sampled(study)[("iu-xray", "terminology")]) == 12
    messages = report.shortfall_messages()
    assert "iu-xray / terminology: 12 accepted candidates, 20 asked for; took all 12." in messages
    # Cells of the taxonomy with no accepted candidate at all are named together, in one line.
    (empty,) = [m for m in messages if m.startswith("No accepted candidate")]
    assert "mimic-cxr / structure--structured" in empty
    assert not any("only 0" in m or "mimic-cxr / hedging" in m for m in messages)
    short, empty_cells = len(report.short_cells), len(report.empty_cells)
    assert short and empty_cells
    filled = len(report.cells) - short - empty_cells
    assert report.cells_summary == (
        f"Of the {len(report.cells)} dataset and variation cells, {filled} "
        f"{'is' if filled == 1 else 'are'} filled, {short} {'is' if short == 1 else 'are'} short "
        f"(all their accepted candidates taken) and {empty_cells} are empty (no accepted candidate)."
    )
    assert report.summary.endswith(report.cells_summary)


def test_a_cell_with_one_candidate_is_told_in_the_singular(db):
    study = make_study()
    _load_candidates(study)
    report = sample_pairs(study, per_variation=100, seed=3)
    cell = SampleCell("iu-xray", "hedging", accepted=1, drawn=1)
    report.cells = [cell]

    assert report.shortfall_messages() == ["iu-xray / hedging: 1 accepted candidate, 100 asked for; took it."]
    assert report.cells_summary == (
        "Of the 1 dataset and variation cell, 0 are filled and 1 is short (all their accepted candidates taken)."
    )


def test_it_creates_three_examples_per_sampled_pair(db):
    study = make_study()
    _load_candidates(study)
    sample_pairs(study, per_variation=2, seed=3)
    pairs = CandidatePair.objects.filter(study=study, sampled=True)
    assert Example.objects.filter(study=study).count() == 3 * pairs.count() == 12
    for pair in pairs:
        kinds = set(pair.examples.values_list("task", "report_type"))
        assert kinds == {
            (Task.REALISM, ReportType.ORIGINAL),
            (Task.REALISM, ReportType.ALTERNATIVE),
            (Task.EQUIVALENCE, ""),
        }


def test_resampling_replaces_the_sample_before_reading(db):
    study = make_study()
    _load_candidates(study)
    sample_pairs(study, per_variation=5, seed=1)
    sample_pairs(study, per_variation=2, seed=1)
    assert CandidatePair.objects.filter(study=study, sampled=True).count() == 4
    assert Example.objects.filter(study=study).count() == 12
    study.refresh_from_db()
    assert (study.sample_per_variation, study.sample_seed) == (2, 1)


def test_it_can_be_restricted_to_datasets(db):
    study = make_study()
    _load_candidates(study)
    report = sample_pairs(study, per_variation=3, seed=1, datasets=["iu-xray"])
    assert set(_sampled(study)) == {("iu-xray", "terminology")}
    assert {cell.dataset for cell in report.cells} == {"iu-xray"}


def test_it_rejects_unknown_datasets(db):
    study = make_study()
    _load_candidates(study)
    with pytest.raises(SamplingRefused, match="Unknown dataset"):
        sample_pairs(study, per_variation=3, seed=1, datasets=["nope"])


def test_it_refuses_without_accepted_candidates(db):
    study = make_study()
    with pytest.raises(SamplingRefused, match="no accepted candidate pairs"):
        sample_pairs(study, per_variation=3, seed=1)


def test_it_refuses_to_resample_once_reading_has_started(db):
    study = make_study()
    _load_candidates(study)
    sample_pairs(study, per_variation=2, seed=1)
    before = _sampled(study)
    example = Example.objects.filter(study=study).first()
    Assignment.objects.create(example=example, reader=make_user(Role.READER), slot=1)
    with pytest.raises(SamplingRefused, match="Reading has started"):
        sample_pairs(study, per_variation=3, seed=9)
    assert _sampled(study) == before
    assert Example.objects.filter(study=study).count() == 12


def test_it_uses_the_study_seed_by_default(db):
    study = make_study()
    _load_candidates(study)
    report = sample_pairs(study, per_variation=2)
    assert report.seed == study.seed


def test_the_command_samples_and_reports_shortfalls(db, capsys):
    study = make_study(slug="cmd")
    _load_candidates(study)
    call_command("sample_pairs", "--study", "cmd", "--per-variation", "15", "--seed", "42")
    out, err = capsys.readouterr()
    assert "Sampled 27 pairs" in out
    assert "iu-xray / terminology: 12 accepted candidates, 15 asked for; took all 12." in err


def test_the_command_names_an_unknown_study(db):
    with pytest.raises(CommandError, match="No study 'missing'"):
        call_command("sample_pairs", "--study", "missing", "--per-variation", "1")


def test_a_sample_with_every_cell_filled_says_so_in_one_phrase(db):
    study = make_study()
    _load_candidates(study)
    report = sample_pairs(study, per_variation=1, seed=3)
    report.cells = [cell for cell in report.cells if cell.drawn == 1]
    assert len(report.cells) == 2
    assert report.cells_summary == "All 2 dataset and variation cells are filled."


# --- At most one pair per exam ----------------------------------------------------------------


def _exams_in_every_variation(study, exams: int = 12) -> None:
    """Every exam a candidate in each of the first three variations, as rewrite files often are."""
    variations = list(study.variations.order_by("position").values_list("key", flat=True)[:3])
    for i in range(exams):
        for variation in variations:
            make_pair(study, study_id=str(53_000_000 + i), variation=variation)


def _sampled_exams(study) -> list[tuple[str, str]]:
    return list(CandidatePair.objects.filter(study=study, sampled=True).values_list("dataset__key", "source_study_id"))


def test_one_pair_per_exam_draws_no_exam_twice_and_says_how_many_were_passed_over(db):
    study = make_study()
    _exams_in_every_variation(study)

    report = sample_pairs(study, per_variation=3, seed=7, one_pair_per_exam=True)

    exams = _sampled_exams(study)
    assert len(exams) == len(set(exams)) == 9
    assert report.one_pair_per_exam and study.sample_one_pair_per_exam is False  # the instance passed in
    study.refresh_from_db()
    assert study.sample_one_pair_per_exam
    assert report.skipped == sum(cell.skipped for cell in report.cells) > 0
    assert f"{report.skipped} candidates passed over because their exam was drawn already" in report.summary
    assert report.as_dict()["skipped"] == report.skipped


def test_one_pair_per_exam_is_reproducible_from_the_seed_and_depends_on_it(db):
    study = make_study()
    _exams_in_every_variation(study)
    sample_pairs(study, per_variation=3, seed=7, one_pair_per_exam=True)
    first = _sampled(study)
    sample_pairs(study, per_variation=3, seed=7, one_pair_per_exam=True)
    assert _sampled(study) == first
    sample_pairs(study, per_variation=3, seed=8, one_pair_per_exam=True)
    assert _sampled(study) != first


def test_without_the_option_an_exam_can_be_in_several_pairs(db):
    study = make_study()
    _exams_in_every_variation(study)

    report = sample_pairs(study, per_variation=6, seed=7)

    exams = _sampled_exams(study)
    assert len(exams) > len(set(exams))
    assert report.skipped == 0 and "passed over" not in report.summary


def test_a_cell_left_short_by_exams_drawn_already_says_so(db):
    study = make_study()
    _exams_in_every_variation(study, exams=4)

    report = sample_pairs(study, per_variation=3, seed=7, one_pair_per_exam=True)

    assert [cell.drawn for cell in report.cells if cell.accepted] == [3, 1, 0]
    assert report.empty_cells == [cell for cell in report.cells if cell.accepted == 0]
    messages = report.shortfall_messages()
    assert any("passed over (their exam was drawn already), took the 1 left" in m for m in messages), messages
    assert "of exams not drawn yet" in report.summary
