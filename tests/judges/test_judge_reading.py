"""An automated judge reads through the reader API, from its own queue, and touches nothing of people's."""

import pytest
from django.core.management import CommandError, call_command
from django.test import Client

from annotation.models import (
    Annotation,
    Assignment,
    AuditAction,
    AuditEvent,
    Example,
    RatingChoice,
    ReaderQueue,
    Role,
    Study,
    Task,
)
from annotation.roles import RoleRefused, grant_role, user_roles
from consensus.models import ConsensusLabel
from consensus.progress import study_progress
from judges.models import JudgeRead
from judges.services import EnrolmentRefused
from tests.factories import make_reading_study, make_user, rate_open_reads
from tests.judges.helpers import api_client, enrol, form_token, make_judge, run_judge

pytestmark = pytest.mark.django_db


def snapshot(study) -> dict:
    """Everything routing, consensus, queues and progress rest on."""
    return {
        "assignments": sorted(
            Assignment.objects.filter(study=study).values_list("example_id", "reader_id", "slot", "status")
        ),
        "annotations": sorted(Annotation.objects.filter(example__study=study).values_list("example_id", "reader_id")),
        "examples": sorted(Example.objects.filter(study=study).values_list("pk", "state", "unrouted")),
        "consensus": sorted(ConsensusLabel.objects.filter(example__study=study).values_list("example_id", "rating")),
        "queues": sorted(
            ReaderQueue.objects.filter(study=study).values_list("reader_id", "task", "open_count", "rated_count")
        ),
        "progress": study_progress(study),
    }


def test_create_user_makes_a_judge_with_a_token_and_no_other_role(capsys):
    call_command("create_user", "rules-judge", "--role", "judge", "--token")
    out = capsys.readouterr().out
    assert "API token:" in out
    from django.contrib.auth import get_user_model

    judge = get_user_model().objects.get(username="rules-judge")
    assert user_roles(judge) == {Role.JUDGE}
    with pytest.raises(CommandError, match="automated judge's account"):
        call_command("create_user", "rules-judge", "--role", "reader")
    with pytest.raises(RoleRefused, match="person's account"):
        grant_role(make_user(Role.READER), Role.JUDGE)


def test_a_superuser_is_never_a_judge():
    admin = make_user(is_superuser=True, is_staff=True)
    assert Role.JUDGE not in user_roles(admin)
    assert Role.READER in user_roles(admin)


def test_a_judge_reads_every_example_through_the_api_and_routing_never_sees_it():
    study, _, _ = make_reading_study(pairs=3)
    example = Example.objects.filter(study=study, task=Task.EQUIVALENCE).order_by("pk").first()
    rate_open_reads(example, RatingChoice.EQUIVALENT)  # one read in: the example waits for its second
    before = snapshot(study)
    judge = make_judge()

    result = enrol(study, judge)
    rated = run_judge(judge, choose=lambda item: item["labels"][2]["value"])

    assert result.added == rated == Example.objects.filter(study=study).count() == 9
    assert snapshot(study) == before
    assert JudgeRead.objects.filter(judge=judge, rating="").count() == 0
    assert AuditEvent.objects.filter(study=study, action=AuditAction.SUBMITTED, subject=judge).count() == 9
    event = AuditEvent.objects.filter(study=study, action=AuditAction.SUBMITTED, subject=judge).first()
    assert event.after["reader"] == "automated judge"
    # The radiologists' second read still completes the example as before.
    rate_open_reads(example, RatingChoice.EQUIVALENT)
    assert ConsensusLabel.objects.get(example=example).n_annotations == 2


def test_a_judge_rating_is_stored_once_and_final():
    study, _, _ = make_reading_study(pairs=1)
    judge = make_judge()
    enrol(study, judge, tasks=[Task.EQUIVALENCE])
    client = api_client(judge)
    item = client.get("/api/reading/next/?task=equivalence").json()
    body = {"rating": RatingChoice.MINOR_DISCREPANCY, "rationale": "Wording.", "form_token": item["form_token"]}
    url = f"/api/reading/{item['id']}/rating/"

    first = client.post(url, body, content_type="application/json")
    again = client.post(url, body, content_type="application/json")
    other = client.post(url, {**body, "form_token": form_token()}, content_type="application/json")

    assert (first.status_code, again.status_code, other.status_code) == (201, 200, 409)
    assert again.json()["created"] is False
    # Final at once: nothing to take back, in a study with an undo window too.
    Study.objects.filter(pk=study.pk).update(undo_window_seconds=120)
    assert first.json()["undo_seconds"] == 0
    undo = client.post("/api/reading/undo/")
    assert undo.status_code == 409 and "cannot be taken back" in undo.json()["detail"]
    read = JudgeRead.objects.get(judge=judge)
    assert (read.rating, read.rationale, read.report_a_type != "") == (RatingChoice.MINOR_DISCREPANCY, "Wording.", True)
    assert client.get("/api/reading/next/?task=equivalence").status_code == 204
    progress = client.get("/api/reading/progress/").json()
    assert progress == [
        {"study": study.slug, "study_name": study.name, "task": "equivalence", "done": 1, "waiting": False}
    ]


def test_a_judge_must_fetch_before_rating_and_give_a_rationale():
    study, _, _ = make_reading_study(pairs=1)
    judge = make_judge()
    enrol(study, judge, tasks=[Task.REALISM])
    read = JudgeRead.objects.filter(judge=judge).first()
    client = api_client(judge)
    url = f"/api/reading/{read.public_id}/rating/"

    unseen = client.post(url, {"rating": "realistic", "form_token": form_token()}, content_type="application/json")
    client.get(f"/api/reading/{read.public_id}/")
    wrong_task = client.post(url, {"rating": "equivalent", "form_token": form_token()}, content_type="application/json")
    no_reason = client.post(
        url, {"rating": "major_issues", "form_token": form_token()}, content_type="application/json"
    )

    assert unseen.status_code == wrong_task.status_code == no_reason.status_code == 400
    assert "Fetch the item first" in unseen.json()["detail"]
    assert (wrong_task.json()["field"], no_reason.json()["field"]) == ("rating", "rationale")
    assert JudgeRead.objects.rated().count() == 0


def test_a_judge_never_sees_another_judges_read_or_a_readers_assignment():
    study, readers, _ = make_reading_study(pairs=1)
    judge, other = make_judge(), make_judge()
    enrol(study, judge)
    enrol(study, other)
    others_read = JudgeRead.objects.filter(judge=other).first()
    assignment = Assignment.objects.filter(study=study).first()
    client = api_client(judge)

    for public_id in (others_read.public_id, assignment.public_id):
        assert client.get(f"/api/reading/{public_id}/").status_code == 404
        answer = client.post(
            f"/api/reading/{public_id}/rating/",
            {"rating": "realistic", "form_token": form_token()},
            content_type="application/json",
        )
        assert answer.status_code == 404
    # ... and a reader cannot reach a judge's read.
    assert api_client(readers[0]).get(f"/api/reading/{others_read.public_id}/").status_code == 404


def test_the_web_reading_pages_refuse_a_judge():
    study, _, _ = make_reading_study(pairs=1)
    judge = make_judge()
    enrol(study, judge)
    read = JudgeRead.objects.filter(judge=judge).first()
    client = Client()
    client.force_login(judge)
    assert client.get("/read/").status_code == 403
    assert client.get(f"/read/{read.public_id}/").status_code in (403, 404)


def test_a_subset_of_n_pairs_per_variation_is_seeded_and_reproducible():
    study, _, _ = make_reading_study(pairs=24, assign=False)  # two pairs of each of the 12 variations
    first, second, third = make_judge(), make_judge(), make_judge()
    enrol(study, first, per_variation=1, seed=5)
    enrol(study, second, per_variation=1, seed=5)
    enrol(study, third, per_variation=1, seed=6)

    def pairs(judge):
        return sorted(JudgeRead.objects.filter(judge=judge).values_list("example__pair_id", flat=True).distinct())

    assert pairs(first) == pairs(second) != pairs(third)
    assert len(pairs(first)) == len(pairs(third)) == 12
    variations = JudgeRead.objects.filter(judge=first).values_list("example__pair__variation_id", flat=True)
    assert len(set(variations)) == 12
    assert JudgeRead.objects.filter(judge=first).count() == 36


def test_enrolment_refuses_a_person_or_a_changed_subset():
    study, readers, _ = make_reading_study(pairs=1)
    with pytest.raises(EnrolmentRefused, match="not an automated judge"):
        enrol(study, readers[0])
    judge = make_judge()
    enrol(study, judge, tasks=[Task.REALISM], per_variation=1, seed=1)
    with pytest.raises(EnrolmentRefused, match="subset cannot change"):
        enrol(study, judge, per_variation=2, seed=1)
    again = enrol(study, judge, tasks=[Task.EQUIVALENCE], per_variation=1, seed=1)
    assert (again.created, again.added) == (False, 1)
    assert JudgeRead.objects.filter(judge=judge).count() == 3


def test_a_judges_rating_records_the_guide_version_in_force_when_it_rated():
    from annotation.guide import publish_guide
    from annotation.models import GuideVersion

    study, _, _ = make_reading_study(pairs=2)
    judge = make_judge()
    enrol(study, judge)
    publish_guide(study, "# Guide\n\nVersion one.", author=None)
    seen = []

    def choose(item):
        seen.append(item["id"])
        if len(seen) == 4:  # the guide changes before the fourth rating
            publish_guide(study, "# Guide\n\nVersion two.", author=None)
        return item["labels"][0]["value"]

    assert run_judge(judge, choose=choose) == 6
    versions = dict(GuideVersion.objects.filter(study=study).values_list("pk", "number"))
    recorded = [
        versions.get(pk)
        for pk in JudgeRead.objects.filter(judge=judge)
        .order_by("rated_at", "pk")
        .values_list("guide_version_id", flat=True)
    ]
    assert recorded == [1, 1, 1, 2, 2, 2]


def test_a_judges_rating_in_a_study_without_a_guide_records_none():
    study, _, _ = make_reading_study(pairs=1)
    judge = make_judge()
    enrol(study, judge)
    run_judge(judge)
    assert set(JudgeRead.objects.filter(judge=judge).values_list("guide_version_id", flat=True)) == {None}
