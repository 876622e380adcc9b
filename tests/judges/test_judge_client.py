"""tools/judge_client.py: next -> judge -> rating through the reader API, in process and over HTTP."""

import pytest

from annotation.models import Assignment, Example, GuideAcknowledgement, PracticeAttempt, RatingChoice
from judges.client import InProcessTransport
from judges.models import JudgeRead
from tests.factories import make_reading_study, make_token
from tests.judges.helpers import add_guide_and_practice, enrol, make_judge
from tools.judge_client import HttpTransport, JudgeClientError, rule_based_judge, run


def _item(task: str, *reports: tuple[str, str]) -> dict:
    values = {"realism": ["realistic", "minor_issues", "major_issues"],
              "equivalence": ["equivalent", "minor_discrepancy", "major_discrepancy"]}[task]  # fmt: skip
    return {
        "task": task,
        "reports": [{"heading": "Report", "findings": f, "impression": i} for f, i in reports],
        "labels": [{"value": value} for value in values],
    }


def test_the_rule_based_judge_is_a_simple_documented_baseline():
    normal = ("Heart size is normal. The lungs are clear.", "No acute cardiopulmonary process.")
    assert rule_based_judge(_item("realism", normal)) == ("realistic", "")
    assert rule_based_judge(_item("realism", ("Clear.", "")))[0] == "major_issues"
    assert rule_based_judge(_item("equivalence", normal, normal)) == ("equivalent", "")
    left = ("Small left pleural effusion.", "Left effusion.")
    right = ("Small right pleural effusion.", "Right effusion.")
    assert rule_based_judge(_item("equivalence", left, right))[0] == "major_discrepancy"
    hedged = ("Small left pleural effusion, possibly.", "Probable left effusion.")
    rating, rationale = rule_based_judge(_item("equivalence", left, hedged))
    assert rating == "minor_discrepancy" and rationale


@pytest.mark.django_db
def test_the_client_rates_every_item_in_process():
    study, _, _ = make_reading_study(pairs=2)
    judge = make_judge()
    enrol(study, judge)
    before = list(Assignment.objects.filter(study=study).values_list("pk", "status"))
    seen = []

    report = run(InProcessTransport(judge), rule_based_judge, on_rated=lambda item, rating: seen.append(item))

    assert report.total == Example.objects.filter(study=study).count() == 6
    assert JudgeRead.objects.open().count() == 0
    assert list(Assignment.objects.filter(study=study).values_list("pk", "status")) == before
    assert all(set(item) >= {"id", "task", "reports", "labels", "form_token"} for item in seen)
    assert run(InProcessTransport(judge), rule_based_judge).total == 0  # nothing is asked for twice


@pytest.mark.django_db
def test_a_refused_rating_stops_the_client_with_the_servers_answer():
    study, _, _ = make_reading_study(pairs=1)
    judge = make_judge()
    enrol(study, judge)

    with pytest.raises(JudgeClientError, match="rationale is required"):
        run(InProcessTransport(judge), lambda item: (item["labels"][2]["value"], ""))
    assert JudgeRead.objects.rated().count() == 0


@pytest.mark.django_db
def test_the_client_confirms_the_guide_and_practises_when_the_judge_must_and_only_then():
    study, _, _ = make_reading_study(pairs=2)
    add_guide_and_practice(study, required=2)
    practising, skipping = make_judge("practising-bot"), make_judge("skipping-bot")
    enrol(study, practising, practise=True)
    enrol(study, skipping)
    guides = []

    report = run(InProcessTransport(practising), rule_based_judge, read_guide=guides.append)
    skipped = run(InProcessTransport(skipping), rule_based_judge)

    assert report.rated == skipped.rated == {"realism": 4, "equivalence": 2}
    assert report.practised == {"realism": 2, "equivalence": 2}
    assert skipped.practised == {"realism": 0, "equivalence": 0}
    assert [guide["version"] for guide in guides] == [1] and "radiologist" in guides[0]["text"]
    assert list(GuideAcknowledgement.objects.values_list("reader__username", flat=True)) == ["practising-bot"]
    assert set(PracticeAttempt.objects.values_list("reader__username", flat=True)) == {"practising-bot"}
    assert JudgeRead.objects.open().count() == 0


class AlwaysTheGuide:
    """A server that keeps asking for the guide however often it is confirmed."""

    def get(self, path: str):
        if path.startswith("/api/reading/guide/"):
            return 200, {"version": 1, "text": "Guide."}
        return 409, {"detail": "Read the guide.", "required": "guide", "study": "s", "task": "realism"}

    def post(self, path: str, body: dict):
        return 200, {"created": False}


def test_the_client_stops_when_a_step_it_did_is_asked_for_again():
    with pytest.raises(JudgeClientError, match="still 409"):
        run(AlwaysTheGuide(), rule_based_judge, tasks=("realism",))


@pytest.mark.django_db(transaction=True)
def test_the_client_rates_over_http(live_server):
    study, _, _ = make_reading_study(pairs=1)
    judge = make_judge()
    enrol(study, judge)

    token = make_token(judge)

    report = run(HttpTransport(live_server.url, token), lambda item: (item["labels"][0]["value"], ""))

    assert report.rated == {"realism": 2, "equivalence": 1}
    assert set(JudgeRead.objects.values_list("rating", flat=True)) == {RatingChoice.REALISTIC, RatingChoice.EQUIVALENT}
    assert HttpTransport(live_server.url, "not-a-token").get("/api/reading/next/?task=realism")[0] == 401
