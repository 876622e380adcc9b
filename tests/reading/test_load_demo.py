import io
import json

import pytest
from django.contrib.auth import get_user_model
from django.core.management import CommandError, call_command
from django.test import override_settings

from annotation.models import DEFAULT_TAXONOMY, CandidatePair, Example, Role, Study, Verdict
from annotation.roles import has_role
from reading.management.commands.load_demo import DEMO_PAIRS


def _load() -> str:
    out = io.StringIO()
    with override_settings(DEBUG=True):
        call_command("load_demo", stdout=out)
    return out.getvalue()


def test_it_loads_the_demo_study_and_one_user_per_role(db):
    out = _load()
    study = Study.objects.get(slug="demo")
    assert study.variations.count() == 12
    assert CandidatePair.objects.filter(study=study).count() == 48
    sampled = CandidatePair.objects.filter(study=study, sampled=True)
    assert sampled.count() == 19
    # At most one pair per exam: an exam's three items, third reads included, need no more than nine readers.
    assert len(set(sampled.values_list("dataset", "source_study_id"))) == 19
    assert Example.objects.filter(study=study).count() == 57
    users = get_user_model().objects
    for role in Role:
        assert any(has_role(user, role) for user in users.all()), role
    assert "Demo logins" in out
    assert "readingroom-demo" in out


def test_it_is_idempotent(db):
    _load()
    before = (
        CandidatePair.objects.count(),
        Example.objects.count(),
        get_user_model().objects.count(),
        set(CandidatePair.objects.filter(sampled=True).values_list("pk", flat=True)),
    )
    out = _load()
    after = (
        CandidatePair.objects.count(),
        Example.objects.count(),
        get_user_model().objects.count(),
        set(CandidatePair.objects.filter(sampled=True).values_list("pk", flat=True)),
    )
    assert before[:3] == after[:3]
    # Sampling again with the same seed draws the same pairs.
    assert CandidatePair.objects.filter(sampled=True).count() == len(before[3])
    assert "already stored, unchanged" in out


def test_its_reports_cover_the_taxonomy_and_two_datasets(db):
    rows = [json.loads(line) for line in DEMO_PAIRS.read_text(encoding="utf-8").splitlines() if line.strip()]
    originals = {(r["dataset"], r["study_id"].removeprefix("s")) for r in rows}
    assert len(originals) >= 24
    assert {r["dataset"] for r in rows} >= {"mimic-cxr", "iu-xray"}
    keys = {key for key, _, _ in DEFAULT_TAXONOMY}
    for dataset in ("mimic-cxr", "iu-xray"):
        accepted = {r["reref_variation"] for r in rows if r["dataset"] == dataset and r["verdict"] == Verdict.ACCEPTED}
        assert accepted == keys


def test_it_refuses_to_run_outside_debug(db):
    with override_settings(DEBUG=False), pytest.raises(CommandError, match="published password"):
        call_command("load_demo")
    assert not Study.objects.filter(slug="demo").exists()
