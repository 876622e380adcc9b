"""A judge enrolled to practise meets the study's guide and practice round through the reader API, as a
reader does; a judge that skips them (the default) is never asked; its practice is never study data."""

import pytest
from django.core.management import call_command
from django.db import connection
from django.test.utils import CaptureQueriesContext
from rest_framework.test import APIClient

from analysis.live import study_frames
from analysis.results import analyze
from annotation.guide import publish_guide
from annotation.models import (
    AuditAction,
    AuditEvent,
    GuideAcknowledgement,
    PracticeAttempt,
    RatingChoice,
    Role,
    Task,
)
from exports.building import build_release
from judges.models import JudgeEnrolment, JudgeRead
from tests.factories import make_reading_study, make_user
from tests.judges.helpers import add_guide_and_practice, api_client, enrol, form_token, make_judge, run_judge
from tests.judges.test_release_judges import files, rated_study

pytestmark = pytest.mark.django_db

JSON = "application/json"


def practise(client, study, task: str, rating: str, rationale: str = "") -> int:
    """Rate every practice item due through the API; returns how many."""
    done = 0
    while (response := client.get(f"/api/reading/practice/?study={study.slug}&task={task}")).status_code == 200:
        item = response.json()
        body = {"rating": rating, "rationale": rationale, "form_token": item["form_token"]}
        answer = client.post(f"/api/reading/practice/{item['id']}/rating/", body, content_type=JSON)
        assert answer.status_code == 201, answer.content
        assert {"reference_rating", "explanation", "agrees"} <= set(answer.json())
        done += 1
    assert response.status_code == 204
    return done


def test_a_judge_set_to_practise_is_refused_until_it_confirms_the_guide_and_practises_then_reads():
    study, _, _ = make_reading_study(pairs=2)
    add_guide_and_practice(study, required=2)
    judge = make_judge()
    enrol(study, judge, practise=True)
    client = api_client(judge)
    read = JudgeRead.objects.filter(judge=judge, task=Task.REALISM).first()

    guide_first = client.get("/api/reading/next/?task=realism")
    by_id = client.get(f"/api/reading/{read.public_id}/")
    rating = client.post(
        f"/api/reading/{read.public_id}/rating/", {"rating": "realistic", "form_token": form_token()}, content_type=JSON
    )
    early_practice = client.get(f"/api/reading/practice/?study={study.slug}&task=realism")

    assert guide_first.status_code == by_id.status_code == early_practice.status_code == 409
    assert guide_first.json() | {"detail": ""} == {"detail": "", "required": "guide", "study": study.slug,
                                                   "task": "realism"}  # fmt: skip
    assert rating.status_code == 400 and "Fetch the item first" in rating.json()["detail"]
    assert not JudgeRead.objects.filter(judge=judge, first_shown_at__isnull=False).exists()

    guide = client.get(f"/api/reading/guide/?study={study.slug}").json()
    assert guide["needs_confirmation"] is True and "radiologist" in guide["text"]
    confirm = {"study": study.slug, "version": guide["version"]}
    confirmed = client.post("/api/reading/guide/", confirm, content_type=JSON)
    assert confirmed.status_code == 201
    practice_first = client.get("/api/reading/next/?task=realism")
    assert practice_first.status_code == 409 and practice_first.json()["required"] == "practice"

    assert practise(client, study, "realism", RatingChoice.MAJOR_ISSUES, "Practice reason.") == 2
    assert client.get("/api/reading/next/?task=realism").status_code == 200
    # Practice counts per judge and task: Task 2 still asks for its own.
    assert client.get("/api/reading/next/?task=equivalence").json()["required"] == "practice"
    assert practise(client, study, "equivalence", RatingChoice.EQUIVALENT) == 2
    assert run_judge(judge) == JudgeRead.objects.filter(judge=judge).count() == 6
    assert PracticeAttempt.objects.filter(reader=judge, rated_at__isnull=False).count() == 4
    assert GuideAcknowledgement.objects.filter(reader=judge, study=study).count() == 1

    # A new guide version: confirmed again before the judge's next item.
    publish_guide(study, "# Guide\n\nVersion two.", author=None)
    JudgeRead.objects.filter(judge=judge).update(rating="", rationale="", form_token=None, rated_at=None)
    changed = client.get("/api/reading/next/?task=realism")
    assert changed.status_code == 409 and changed.json()["required"] == "guide"
    assert client.get(f"/api/reading/guide/?study={study.slug}").json()["changes"]


def test_a_judge_that_skips_is_never_asked_and_has_no_guide_or_practice_to_fetch():
    study, _, _ = make_reading_study(pairs=2)
    add_guide_and_practice(study, required=2)
    judge = make_judge()
    enrol(study, judge)  # the default: skips
    client = api_client(judge)

    assert run_judge(judge) == 6
    assert client.get(f"/api/reading/guide/?study={study.slug}").status_code == 404
    assert client.get(f"/api/reading/practice/?study={study.slug}&task=realism").status_code == 404
    refused = client.post("/api/reading/guide/", {"study": study.slug, "version": 1}, content_type=JSON)
    assert refused.status_code == 404
    assert not GuideAcknowledgement.objects.filter(reader=judge).exists()
    assert not PracticeAttempt.objects.filter(reader=judge).exists()


def test_a_skipping_judges_next_item_costs_no_query_for_the_guide_or_practice():
    def queries_of_next(with_steps: bool) -> int:
        study, _, _ = make_reading_study(pairs=1)
        if with_steps:
            add_guide_and_practice(study)
        judge = make_judge()
        enrol(study, judge)
        client = api_client(judge)
        client.get("/api/reading/progress/")  # the token's user is cached alike
        with CaptureQueriesContext(connection) as captured:
            assert client.get(f"/api/reading/next/?task=realism&study={study.slug}").status_code == 200
        return len(captured)

    assert queries_of_next(with_steps=True) == queries_of_next(with_steps=False)


def test_a_judge_practising_in_one_study_is_not_asked_in_another():
    practising, _, _ = make_reading_study(pairs=1, slug="practising")
    skipping, _, _ = make_reading_study(pairs=1, slug="skipping")
    for study in (practising, skipping):
        add_guide_and_practice(study)
    judge = make_judge()
    enrol(practising, judge, practise=True)
    enrol(skipping, judge)
    client = api_client(judge)

    assert client.get("/api/reading/next/?task=realism&study=skipping").status_code == 200
    assert client.get("/api/reading/next/?task=realism&study=practising").status_code == 409
    assert client.get("/api/reading/guide/?study=skipping").status_code == 404
    assert client.get("/api/reading/guide/?study=practising").status_code == 200


def test_the_coordinator_sets_the_choice_on_the_page_the_api_and_the_command(client):
    study, _, _ = make_reading_study(pairs=1)
    make_judge("page-bot"), make_judge("cli-bot")
    api_judge = make_judge("api-bot")
    coordinator = make_user(Role.COORDINATOR)
    client.force_login(coordinator)
    api = APIClient()
    api.force_authenticate(coordinator)
    url = f"/api/studies/{study.slug}/judges/"

    client.post(f"/studies/{study.slug}/judges/", {"judge": "page-bot", "tasks": ["realism"], "practise": "on"})
    created = api.post(url, {"username": "api-bot", "tasks": ["realism"], "practise": True}, format="json")
    kept = api.post(url, {"username": "api-bot", "tasks": ["equivalence"]}, format="json")
    call_command("enrol_judge", "--study", study.slug, "--judge", "cli-bot", "--practise")

    assert (created.status_code, created.json()["practise"]) == (201, True)
    assert (kept.status_code, kept.json()["practise"]) == (200, True)
    enrolments = {e.judge.username: e.practise for e in JudgeEnrolment.objects.select_related("judge")}
    assert enrolments == {"page-bot": True, "api-bot": True, "cli-bot": True}
    assert "goes through them" in client.get(f"/studies/{study.slug}/judges/").content.decode()

    api.post(url, {"username": "api-bot", "tasks": ["realism"], "practise": False}, format="json")
    call_command("enrol_judge", "--study", study.slug, "--judge", "cli-bot", "--no-practise")
    client.post(f"/studies/{study.slug}/judges/", {"judge": "page-bot", "tasks": ["realism"]})
    assert not JudgeEnrolment.objects.filter(practise=True).exists()
    assert [row["practise"] for row in api.get(url).json()] == [False, False, False]
    last = AuditEvent.objects.filter(study=study, action=AuditAction.MEMBER_CHANGED, subject=api_judge).last()
    assert last.after["practise"] is False


def test_a_judges_practice_ratings_never_reach_the_results_or_the_release(tmp_path):
    study = rated_study()
    add_guide_and_practice(study, required=2)
    judge = make_judge("practising-bot")
    enrol(study, judge, practise=True)
    client = api_client(judge)
    client.post("/api/reading/guide/", {"study": study.slug, "version": 1}, content_type=JSON)
    # Practice answers no real read gets: were they counted, the files and tables would show them.
    assert practise(client, study, "realism", RatingChoice.MAJOR_ISSUES, "Practice only.") == 2
    assert practise(client, study, "equivalence", RatingChoice.MAJOR_DISCREPANCY, "Practice only.") == 2
    run_judge(judge, choose=lambda item: item["labels"][1]["value"])

    build_release(study, tmp_path / "with-practice", license_text="CC0\n", include_judges=True)
    tables = analyze(study_frames(study, text=False), seed=0).document["tables"]
    PracticeAttempt.objects.filter(reader=judge).delete()
    build_release(study, tmp_path / "without-practice", license_text="CC0\n", include_judges=True)

    released = files(tmp_path / "with-practice")
    assert released == files(tmp_path / "without-practice")
    assert analyze(study_frames(study, text=False), seed=0).document["tables"] == tables
    for data in released.values():
        assert b"Practice only." not in data and b"Practice 1." not in data
    task1 = released["judges/task1_judges.csv"].decode()
    assert "Major Issues" not in task1 and "Minor Issues" in task1
