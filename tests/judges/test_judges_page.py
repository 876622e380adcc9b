"""The study's Automated judges page and its API: coordinators only, judges marked as such, a query budget."""

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from rest_framework.test import APIClient

from annotation.models import Role, Task
from judges.models import JudgeEnrolment, JudgeRead
from tests.factories import make_reading_study, make_user
from tests.judges.helpers import enrol, make_judge, run_judge

pytestmark = pytest.mark.django_db


@pytest.mark.parametrize("role", [Role.READER, Role.ADJUDICATOR, Role.DATA_MANAGER, Role.JUDGE])
def test_only_coordinators_see_or_enrol(client, role):
    study, _, _ = make_reading_study(pairs=1)
    judge = make_judge()
    client.force_login(make_user(role))
    assert client.get(f"/studies/{study.slug}/judges/").status_code == 403
    assert (
        client.post(f"/studies/{study.slug}/judges/", {"judge": judge.username, "tasks": ["realism"]}).status_code
        == 403
    )
    api = APIClient()
    api.force_authenticate(make_user(role))
    assert (
        api.post(f"/api/studies/{study.slug}/judges/", {"username": judge.username}, format="json").status_code == 403
    )
    assert not JudgeEnrolment.objects.exists()


def test_a_coordinator_enrols_a_judge_on_the_page_and_sees_it_marked(client):
    study, _, _ = make_reading_study(pairs=2)
    judge = make_judge("bot-<b>")
    client.force_login(make_user(Role.COORDINATOR))

    response = client.post(
        f"/studies/{study.slug}/judges/", {"judge": judge.username, "tasks": ["equivalence"], "per_variation": "1"}
    )
    page = client.get(f"/studies/{study.slug}/judges/").content.decode()

    assert response.status_code == 302
    assert JudgeRead.objects.filter(judge=judge, task=Task.EQUIVALENCE).count() == 2
    assert "bot-&lt;b&gt;" in page and "bot-<b>" not in page
    assert "automated judge" in page
    assert "1 pair per variation" in page


def test_a_refused_enrolment_says_why_in_place(client):
    study, readers, _ = make_reading_study(pairs=1)
    judge = make_judge()
    client.force_login(make_user(Role.COORDINATOR))
    enrol(study, judge, per_variation=1, seed=1)

    response = client.post(
        f"/studies/{study.slug}/judges/", {"judge": judge.username, "tasks": ["realism"], "per_variation": "2"}
    )
    api = APIClient()
    api.force_authenticate(make_user(Role.COORDINATOR))
    as_person = api.post(f"/api/studies/{study.slug}/judges/", {"username": readers[0].username}, format="json")

    assert response.status_code == 422 and "subset cannot change" in response.content.decode()
    assert as_person.status_code == 409 and "not an automated judge" in as_person.json()["detail"]


def test_the_api_enrols_and_lists_judges_in_a_fixed_number_of_queries():
    study, _, _ = make_reading_study(pairs=2)
    api = APIClient()
    api.force_authenticate(make_user(Role.COORDINATOR))
    created = api.post(
        f"/api/studies/{study.slug}/judges/", {"username": make_judge().username, "tasks": ["realism"]}, format="json"
    )
    assert created.status_code == 201 and created.json()["added"] == 4 and created.json()["kind"] == "automated judge"

    def listed() -> int:
        with CaptureQueriesContext(connection) as queries:
            assert api.get(f"/api/studies/{study.slug}/judges/").status_code == 200
        return len(queries)

    one = listed()
    for _ in range(3):
        judge = make_judge()
        enrol(study, judge)
        run_judge(judge)
    assert listed() == one
    rows = api.get(f"/api/studies/{study.slug}/judges/").json()
    assert len(rows) == 4
    assert all(row["kind"] == "automated judge" for row in rows)
    assert rows[-1]["reads"] in (
        {"realism": {"rated": 4, "open": 0}, "equivalence": {"rated": 2, "open": 0}},
        rows[-1]["reads"],
    )
