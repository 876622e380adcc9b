"""The study's analysis margins: set by its coordinator, audited, and carried into the results."""

import json
import re
from decimal import Decimal

import pytest
from django.core.management import CommandError, call_command
from django.db import IntegrityError, transaction
from django.tasks import default_task_backend

from analysis.computing import compute_results
from analysis.services import Scope, data_version, results_state
from annotation.models import AuditAction, AuditEvent, Role, Study
from exports.building import build_release
from tests.exports.release_helpers import rated_study
from tests.factories import make_study, make_user

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def results_dir(settings, tmp_path):
    settings.RESULTS_DIR = tmp_path / "results"
    default_task_backend.clear()


def _post(client, study, **data):
    return client.post(f"/studies/{study.slug}/margins/", data, HTTP_HX_REQUEST="true")


def test_a_coordinator_sets_both_margins_and_the_change_is_audited_with_the_old_values(client):
    study = make_study()
    coordinator = make_user(Role.COORDINATOR)
    client.force_login(coordinator)

    response = _post(client, study, noninferiority_margin="10", equivalence_margin="2.5")

    assert response.status_code == 200
    assert "Task 1 non-inferiority margin 10.0 percentage points" in response.content.decode()
    study.refresh_from_db()
    assert (study.noninferiority_margin, study.equivalence_margin) == (Decimal("10.0"), Decimal("2.5"))
    event = AuditEvent.objects.get(study=study, action=AuditAction.MARGINS_CHANGED)
    assert event.actor == coordinator
    assert event.before == {"noninferiority_margin": None, "equivalence_margin": None}
    assert event.after == {"noninferiority_margin": "10.0", "equivalence_margin": "2.5"}


def test_saving_the_same_margins_again_records_nothing_and_empty_fields_clear_them(client):
    study = make_study()
    client.force_login(make_user(Role.COORDINATOR))
    _post(client, study, noninferiority_margin="10", equivalence_margin="")
    _post(client, study, noninferiority_margin="10.0", equivalence_margin="")
    assert AuditEvent.objects.filter(study=study, action=AuditAction.MARGINS_CHANGED).count() == 1

    _post(client, study, noninferiority_margin="", equivalence_margin="")

    study.refresh_from_db()
    assert study.noninferiority_margin is None and study.equivalence_margin is None
    assert AuditEvent.objects.filter(study=study, action=AuditAction.MARGINS_CHANGED).count() == 2


@pytest.mark.parametrize(
    ("field", "value", "message"),
    [
        ("noninferiority_margin", "0", "greater than or equal to 0.1"),
        ("noninferiority_margin", "60", "less than or equal to 50"),
        ("equivalence_margin", "five", "Enter a number"),
        ("equivalence_margin", "2.55", "no more than 1 decimal place"),
    ],
)
def test_a_margin_out_of_range_is_refused_naming_the_field_and_nothing_changes(client, field, value, message):
    study = make_study()
    client.force_login(make_user(Role.COORDINATOR))
    data = {"noninferiority_margin": "10", "equivalence_margin": "5", field: value}

    response = _post(client, study, **data)

    assert response.status_code == 422
    html = response.content.decode()
    assert message in html and f'id="id_{field}_error"' in html
    study.refresh_from_db()
    assert study.noninferiority_margin is None and study.equivalence_margin is None
    assert not AuditEvent.objects.filter(action=AuditAction.MARGINS_CHANGED).exists()


def test_the_database_holds_a_margin_in_range_too():
    study = make_study()

    with pytest.raises(IntegrityError), transaction.atomic():
        Study.objects.filter(pk=study.pk).update(equivalence_margin=Decimal("75"))


def test_a_margin_change_makes_the_results_compute_again_and_they_judge_by_it(tmp_path):
    study = rated_study()
    before = data_version(study)

    study.set_margins(noninferiority=Decimal("50"), equivalence=Decimal("50"), actor=None)

    assert data_version(study) != before
    compute_results(study, Scope())
    document = results_state(study, Scope()).document()
    assert document["margins"] == {"task1_realistic": 0.5, "task2_major": 0.5}
    verdicts = {row["verdict"] for row in document["tables"]["task1_realistic_difference"]}
    assert verdicts <= {"non-inferior", "inferior", "not shown", "not computable"} and verdicts
    no_major = [r for r in document["tables"]["task2_proportions"] if r["measure"] == "no_major_discrepancy"]
    assert {r["verdict"] for r in no_major} <= {"equivalent", "not shown", "not computable"}

    # The same margins given to analyze_release on the study's release give the same verdicts.
    build_release(Study.objects.get(pk=study.pk), tmp_path / "release", license_text="CC0\n")
    call_command(
        "analyze_release", str(tmp_path / "release"), "--out", str(tmp_path / "out"), "--no-metrics",
        "--noninferiority-margin", "50", "--equivalence-margin", "50",
    )  # fmt: skip
    released = json.loads((tmp_path / "out" / "results.json").read_text())
    for table in ("task1_realistic_difference", "task2_proportions"):
        assert [r["verdict"] for r in released["tables"][table]] == [r["verdict"] for r in document["tables"][table]]


def test_analyze_release_refuses_a_margin_out_of_range(tmp_path):
    message = "--equivalence-margin: 0 is out of range; give a margin from 0.1 to 50"
    with pytest.raises(CommandError, match=re.escape(message)):
        call_command("analyze_release", str(tmp_path), "--out", str(tmp_path / "o"), "--equivalence-margin", "0")
