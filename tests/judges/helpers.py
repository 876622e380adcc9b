"""Judges for tests: accounts with the judge role, enrolled through the service, rating through the API."""

import uuid

from django.test import Client

from annotation.guide import publish_guide
from annotation.models import RATINGS_WITHOUT_RATIONALE, TASK_RATINGS, Role, Study, Task
from annotation.practice import import_practice_items
from judges.services import enrol_judge
from tests.annotation.test_practice import practice_file, practice_row
from tests.factories import make_token, make_user


def make_judge(username: str | None = None):
    return make_user(Role.JUDGE, username=username)


def api_client(user) -> Client:
    token = make_token(user)
    return Client(HTTP_AUTHORIZATION=f"Token {token}")


def enrol(study: Study, judge, tasks=(Task.REALISM, Task.EQUIVALENCE), **options):
    return enrol_judge(study, judge=judge, tasks=list(tasks), **options)


def run_judge(judge, choose=None) -> int:
    """Rate every open read of the judge through the reader API; returns how many were rated.

    choose(item) -> rating value; default: the first label of the task.
    """
    client = api_client(judge)
    rated = 0
    for task in Task.values:
        while (response := client.get(f"/api/reading/next/?task={task}")).status_code == 200:
            item = response.json()
            rating = choose(item) if choose else TASK_RATINGS[task][0]
            rationale = "" if rating in RATINGS_WITHOUT_RATIONALE else "Judge's reason."
            answer = client.post(
                f"/api/reading/{item['id']}/rating/",
                {"rating": rating, "rationale": rationale, "form_token": item["form_token"]},
                content_type="application/json",
            )
            assert answer.status_code == 201, answer.content
            rated += 1
        assert response.status_code == 204
    return rated


def form_token() -> str:
    return str(uuid.uuid4())


def add_guide_and_practice(study: Study, *, required: int = 2) -> None:
    """A guide (version 1) and practice items (4 of Task 1, 2 of Task 2), `required` of each task first."""
    publish_guide(study, "# Guide\n\nRate what a radiologist would act on.", author=None)
    import_practice_items(study, practice_file(practice_row(1), practice_row(2)), filename="practice.csv")
    study.practice_items_required = required
    study.save(update_fields=["practice_items_required"])
