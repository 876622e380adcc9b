"""The judges against the radiologists: reference values, live equals release, the page, API and command."""

import json

import numpy as np
import pandas as pd
import pytest
from django.core.management import call_command
from django.tasks import default_task_backend
from rest_framework.test import APIClient
from statsmodels.stats.inter_rater import cohens_kappa
from statsmodels.stats.proportion import proportion_confint

from analysis.computing import compute_results
from analysis.judges import judge_tables, quadratic_weighted_kappa
from analysis.live import study_frames
from analysis.release_folder import read_release
from analysis.results import analyze
from analysis.services import Scope
from annotation.models import Example, RatingChoice, Role, Task
from exports.building import build_release
from tests.factories import make_reading_study, make_user, rate_open_reads
from tests.judges.helpers import enrol, make_judge, run_judge

T1 = ("Realistic", "Minor Issues", "Major Issues")


@pytest.mark.parametrize("seed", range(20))
def test_the_weighted_kappa_equals_statsmodels(seed):
    rng = np.random.default_rng(seed)
    table = rng.integers(0, 12, size=(3, 3))
    table[rng.integers(0, 3), :] = 0 if seed % 5 == 0 else table[0, :]  # sometimes an empty category
    expected = cohens_kappa(table, wt="quadratic").kappa
    assert quadratic_weighted_kappa(table) == pytest.approx(expected, abs=1e-9)


def test_a_kappa_with_one_category_everywhere_is_not_computable():
    table = np.zeros((3, 3), dtype=int)
    table[0, 0] = 7
    assert "single rating" in quadratic_weighted_kappa(table).reason
    assert quadratic_weighted_kappa(np.zeros((3, 3))).reason == "no examples"


def _frames():
    """Four Task 1 examples over two variations: reads, consensus and one judge, by hand."""
    examples = [
        # (variation, reads, consensus, judge)
        ("hedging", ["Realistic", "Realistic"], "Realistic", "Realistic"),
        ("hedging", ["Realistic", "Minor Issues", "Minor Issues"], "Minor Issues", "Realistic"),
        ("terminology", ["Major Issues", "Major Issues"], "Major Issues", "Minor Issues"),
        ("terminology", ["Realistic", "Minor Issues", "Major Issues"], "Minor Issues", "Minor Issues"),
    ]
    key = {"dataset": "mimic-cxr", "report_type": "original"}
    full, consensus, judges = [], [], []
    for n, (variation, reads, decided, judged) in enumerate(examples):
        ids = {**key, "study_id": f"0{n}", "reref_variation": variation}
        full += [{**ids, "rating": rating} for rating in reads]
        consensus.append({**ids, "rating": decided})
        judges.append({**ids, "judge_index": "0", "rating": judged, "rationale": ""})
    return {"task1": pd.DataFrame(judges)}, {"task1": pd.DataFrame(consensus)}, {"task1": pd.DataFrame(full)}


def test_the_judge_tables_give_the_hand_computed_numbers():
    tables = judge_tables(*_frames(), seed=3)

    agreement = tables["judge_agreement"].set_index("group")
    assert agreement.loc["all", "n_examples"] == 4
    assert agreement.loc["all", "exact_agreement"] == 0.5
    low, high = proportion_confint(2, 4, method="wilson")
    assert (agreement.loc["all", "ci_low"], agreement.loc["all", "ci_high"]) == pytest.approx((low, high), abs=1e-12)
    confusion = np.array([[1, 0, 0], [1, 1, 0], [0, 1, 0]])  # consensus x judge
    assert agreement.loc["all", "weighted_kappa"] == pytest.approx(
        cohens_kappa(confusion, wt="quadratic").kappa, abs=1e-9
    )
    assert agreement.loc["hedging", "exact_agreement"] == 0.5
    assert agreement.loc["terminology", "n_examples"] == 2
    cells = tables["judge_confusion"]
    overall = cells[cells["level"] == "overall"].pivot(index="consensus", columns="judge_rating", values="n")
    assert overall.reindex(index=T1, columns=T1).to_numpy().tolist() == confusion.tolist()

    [versus] = tables["judge_vs_readers"].to_dict(orient="records")
    # Judge vs each read: 2/2, 1/3, 0/2, 1/3 -> 4 of 10. Read pairs: 1/1, 1/3, 1/1, 0/3 -> 3 of 8.
    assert (versus["judge_reader_pairs"], versus["reader_reader_pairs"]) == (10, 8)
    assert versus["judge_reader"] == pytest.approx(0.4)
    assert versus["reader_reader"] == pytest.approx(3 / 8)
    assert versus["difference"] == pytest.approx(0.4 - 3 / 8)
    assert versus["judge_reader_ci_low"] <= 0.4 <= versus["judge_reader_ci_high"]
    again = judge_tables(*_frames(), seed=3)["judge_vs_readers"]
    assert again.equals(tables["judge_vs_readers"])


def test_the_judge_bootstrap_equals_resampling_examples():
    """The multinomial shortcut has the distribution of resampling examples with replacement."""
    judges, consensus, full = _frames()
    [versus] = judge_tables(judges, consensus, full, seed=11)["judge_vs_readers"].to_dict(orient="records")
    units = np.array([[2, 2, 1, 1], [1, 3, 1, 3], [0, 2, 1, 1], [1, 3, 0, 3]])
    rng = np.random.default_rng(0)
    draws = units[rng.integers(0, 4, size=(20_000, 4))].sum(axis=1)
    shares = draws[:, 0] / draws[:, 1]
    low, high = np.percentile(shares, [2.5, 97.5])
    assert versus["judge_reader_ci_low"] == pytest.approx(low, abs=0.05)
    assert versus["judge_reader_ci_high"] == pytest.approx(high, abs=0.05)


@pytest.fixture
def judged_study(db):
    # Enough readers for every third read (the default): every third example takes one.
    study, _, _ = make_reading_study(pairs=4)
    labels = {
        Task.REALISM: (RatingChoice.REALISTIC, RatingChoice.MINOR_ISSUES),
        Task.EQUIVALENCE: (RatingChoice.EQUIVALENT, RatingChoice.MINOR_DISCREPANCY),
    }
    for n, example in enumerate(Example.objects.filter(study=study).order_by("pk")):
        first, second = labels[example.task]
        rate_open_reads(example, *((first, first) if n % 3 else (first, second, second)))
    for name in ("alpha-bot", "beta-bot"):
        judge = make_judge(name)
        enrol(study, judge)
        run_judge(judge, choose=lambda item, name=name: item["labels"][0 if name == "alpha-bot" else 1]["value"])
    return study


@pytest.mark.django_db
def test_a_live_study_and_its_release_with_judges_give_the_same_judge_tables(judged_study, tmp_path):
    build_release(judged_study, tmp_path / "release", license_text="CC0\n", include_judges=True)
    live = analyze(study_frames(judged_study, text=False), seed=0)
    released = analyze(read_release(tmp_path / "release", text=False), seed=0)

    for name in ("judge_confusion", "judge_agreement", "judge_vs_readers"):
        assert live.document["tables"][name] == released.document["tables"][name]
    assert {row["judge"] for row in live.document["tables"]["judge_agreement"]} == {"0", "1"}
    assert "judges" in live.document["methods"]
    by_dataset = analyze(read_release(tmp_path / "release"), seed=0, dataset="mimic-cxr", task="task2")
    assert {row["task"] for row in by_dataset.document["tables"]["judge_agreement"]} == {"task2"}


@pytest.mark.django_db
def test_analyze_release_writes_the_judge_tables_and_figures(judged_study, tmp_path):
    build_release(judged_study, tmp_path / "release", license_text="CC0\n", include_judges=True)
    call_command("analyze_release", str(tmp_path / "release"), "--out", str(tmp_path / "out"))
    for name in ("judge_confusion", "judge_agreement", "judge_vs_readers"):
        assert (tmp_path / "out" / "tables" / f"{name}.csv").is_file()
    for name in ("judges_confusion", "judges_vs_readers"):
        assert (tmp_path / "out" / "figures" / f"{name}.svg").read_bytes().startswith(b"<?xml")
    assert "Automated judges" in (tmp_path / "out" / "results.md").read_text(encoding="utf-8")


@pytest.mark.django_db
def test_the_results_page_and_api_show_the_judges_section(judged_study, client, settings, tmp_path):
    settings.RESULTS_DIR = tmp_path / "results"
    default_task_backend.clear()
    compute_results(judged_study, Scope())
    coordinator = make_user(Role.COORDINATOR)
    client.force_login(coordinator)

    page = client.get(f"/studies/{judged_study.slug}/results/").content.decode()
    figure = client.get(f"/studies/{judged_study.slug}/results/figures/judges_vs_readers.svg")
    api = APIClient()
    api.force_authenticate(coordinator)
    document = api.get(f"/api/studies/{judged_study.slug}/results/").json()

    assert 'id="judges-heading"' in page and 'id="table-judge-vs-readers"' in page
    assert "alpha-bot" not in page and "beta-bot" not in page  # judges are numbered, as in the release
    assert figure.status_code == 200 and figure["Content-Type"] == "image/svg+xml"
    assert json.dumps(document["tables"]["judge_vs_readers"])


@pytest.mark.django_db
def test_a_study_without_judges_has_no_judge_section(client, settings, tmp_path):
    settings.RESULTS_DIR = tmp_path / "results"
    study, _, _ = make_reading_study(pairs=1)
    compute_results(study, Scope())
    client.force_login(make_user(Role.COORDINATOR))
    page = client.get(f"/studies/{study.slug}/results/").content.decode()
    assert 'id="judges-heading"' not in page
