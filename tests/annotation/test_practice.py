"""The practice round: import, the flow before the first real item, feedback, agreement, the API."""

import csv
import io
import uuid

import pytest
from django.test import Client
from django.urls import reverse

from annotation.importing import ImportRejected
from annotation.models import (
    Annotation,
    AuditAction,
    AuditEvent,
    PracticeAttempt,
    PracticeItem,
    RatingChoice,
    Role,
    StudyMember,
    Task,
)
from annotation.practice import (
    agreement_by_reader,
    import_practice_items,
    next_practice,
    practice_required,
    set_practice_requirement,
    show_practice,
    submit_practice,
)
from tests.factories import make_reading_study, make_token, make_user

pytestmark = pytest.mark.django_db

JSON = "application/json"
COLUMNS = (
    "dataset", "study_id", "reref_variation", "indication", "comparison", "technique",
    "original_findings", "original_impression", "alternative_findings", "alternative_impression",
    "task1_original_rating", "task1_original_explanation", "task1_alternative_rating",
    "task1_alternative_explanation", "task2_rating", "task2_explanation",
)  # fmt: skip


def practice_row(n: int, **overrides: str) -> dict:
    row = {
        "dataset": "mimic-cxr",
        "study_id": str(59_000_000 + n),
        "reref_variation": "hedging",
        "indication": "Cough.",
        "comparison": "",
        "technique": "PA.",
        "original_findings": f"Lungs are clear. Practice {n}.",
        "original_impression": "No acute process.",
        "alternative_findings": f"The lungs are observed to be clear. Practice {n}.",
        "alternative_impression": "No acute process.",
        "task1_original_rating": "realistic",
        "task1_original_explanation": "Routine wording.",
        "task1_alternative_rating": "Minor Issues",
        "task1_alternative_explanation": "'Observed to be' is not how radiologists write.",
        "task2_rating": "equivalent",
        "task2_explanation": "Same findings, same decisions.",
    }
    row.update(overrides)
    return row


def practice_file(*rows: dict) -> bytes:
    out = io.StringIO()
    writer = csv.DictWriter(out, fieldnames=COLUMNS)
    writer.writeheader()
    writer.writerows(rows)
    return out.getvalue().encode()


@pytest.fixture
def reading():
    study, readers, _ = make_reading_study(pairs=2, readers=5)
    for reader in readers:
        if reader.assignments.filter(task=Task.REALISM).count() >= 2:
            return study, reader
    raise AssertionError("no reader with two Task 1 items")


@pytest.fixture
def practising(reading):
    study, reader = reading
    import_practice_items(study, practice_file(practice_row(1), practice_row(2)), filename="p.csv")
    study.practice_items_required = 2
    study.save(update_fields=["practice_items_required"])
    return study, reader


# --- Import -----------------------------------------------------------------------------------------


def test_each_reference_rating_makes_one_practice_item(reading):
    study, _ = reading

    report = import_practice_items(study, practice_file(practice_row(1)), filename="p.csv")

    assert (report.created, report.by_task) == (3, {Task.REALISM: 2, Task.EQUIVALENCE: 1})
    items = {(i.task, i.report_type): i for i in PracticeItem.objects.all()}
    assert items[(Task.REALISM, "alternative")].reference_rating == RatingChoice.MINOR_ISSUES
    assert items[(Task.EQUIVALENCE, "")].source == "mimic-cxr/59000001/hedging"


def test_importing_the_same_file_again_changes_nothing(reading):
    study, _ = reading
    data = practice_file(practice_row(1))
    import_practice_items(study, data, filename="p.csv")

    report = import_practice_items(study, data, filename="p.csv")

    assert (report.created, report.unchanged, PracticeItem.objects.count()) == (0, 3, 3)


@pytest.mark.parametrize(
    ("overrides", "field", "message"),
    [
        ({"task1_original_rating": "equivalent"}, "task1_original_rating", "is not a rating of Task 1"),
        ({"task2_explanation": ""}, "task2_explanation", "needs its explanation"),
        ({"task2_rating": "", "task2_explanation": "why"}, "task2_rating", "explanation without a reference"),
        ({"original_findings": "", "original_impression": ""}, "original_findings", "report is empty"),
    ],
)
def test_a_bad_row_is_refused_naming_line_and_field_and_nothing_is_stored(reading, overrides, field, message):
    study, _ = reading

    with pytest.raises(ImportRejected) as rejected:
        import_practice_items(study, practice_file(practice_row(1), practice_row(2, **overrides)), filename="p.csv")

    problem = rejected.value.problems[0]
    assert (problem.line, problem.field) == (3, field) and message in problem.message
    assert not PracticeItem.objects.exists()


def test_a_stored_item_with_another_reference_is_refused(reading):
    study, _ = reading
    import_practice_items(study, practice_file(practice_row(1)), filename="p.csv")

    with pytest.raises(ImportRejected, match="another reference"):
        import_practice_items(study, practice_file(practice_row(1, task2_rating="major_discrepancy")), filename="p.csv")


def test_practice_items_are_not_pairs_examples_or_progress(practising):
    study, reader = practising
    pairs, examples = study.pairs.count(), study.examples.count()

    attempt = next_practice(reader, study, Task.REALISM)
    show_practice(attempt)
    submit_practice(reader=reader, attempt_id=attempt.public_id, rating=RatingChoice.REALISTIC, rationale="",
                    form_token=uuid.uuid4())  # fmt: skip

    assert (study.pairs.count(), study.examples.count()) == (pairs, examples)
    assert not Annotation.objects.exists()
    assert study.candidate_summary() == study.candidate_summary()  # practice is not a candidate
    assert sum(row["total"] for row in study.candidate_summary()) == pairs


# --- The flow -----------------------------------------------------------------------------------------


def test_a_reader_practises_before_the_first_real_item_and_sees_the_reference(client, practising):
    study, reader = practising
    client.force_login(reader)
    start = reverse("reading_next", args=[study.slug, Task.REALISM])

    response = client.get(start)
    assert response.url == reverse("practice_next", args=[study.slug, Task.REALISM])
    attempt_url = client.get(response.url).url
    page = client.get(attempt_url).content.decode()
    assert "Practice · Task 1: Realism" in page and "Practice 1." in page
    attempt = PracticeAttempt.objects.get()
    token = str(uuid.uuid4())

    feedback = client.post(attempt_url, {"rating": RatingChoice.MAJOR_ISSUES, "rationale": "Odd.", "form_token": token})
    text = feedback.content.decode()
    assert "Reference rating" in text and "Routine wording." in text and "Compare with the reference" in text
    # A repeat of the same form stores nothing new.
    client.post(attempt_url, {"rating": RatingChoice.MAJOR_ISSUES, "rationale": "Odd.", "form_token": token})
    attempt.refresh_from_db()
    assert (attempt.rating, attempt.agrees) == (RatingChoice.MAJOR_ISSUES, False)

    second_url = client.get(client.get(start).url).url
    assert second_url != attempt_url
    client.get(second_url)
    client.post(
        second_url, {"rating": RatingChoice.MINOR_ISSUES, "rationale": "Wording.", "form_token": str(uuid.uuid4())}
    )
    # Two practice items done: the real queue opens.
    assert client.get(start).url.startswith("/read/a/")
    assert practice_required(reader, study, Task.REALISM) == 0


def test_changing_the_practice_requirement_is_audited_with_the_old_value_and_an_unchanged_one_is_not(reading):
    study, _ = reading
    coordinator = make_user(Role.COORDINATOR)

    set_practice_requirement(study, 3, actor=coordinator)
    set_practice_requirement(study, 3, actor=coordinator)

    events = AuditEvent.objects.filter(study=study, action=AuditAction.PRACTICE_SETTINGS)
    assert [(e.actor, e.before, e.after) for e in events] == [
        (coordinator, {"practice_items_required": 0}, {"practice_items_required": 3})
    ]
    study.refresh_from_db()
    assert study.practice_items_required == 3


def test_practice_is_not_required_once_the_reader_rated_a_real_item(practising):
    study, reader = practising
    assignment = reader.assignments.filter(task=Task.REALISM).first()
    from annotation.queues import count

    count(reader.pk, study.pk, Task.REALISM, rated=1)
    assert practice_required(reader, study, Task.REALISM) == 0
    assert practice_required(reader, study, Task.EQUIVALENCE) == 2
    assert assignment is not None


def test_a_member_the_coordinator_lets_skip_practice_goes_straight_to_real_items(client, practising):
    study, reader = practising
    coordinator = make_user(Role.COORDINATOR)
    client.force_login(coordinator)
    client.post(reverse("study_practice_skip", args=[study.slug]), {"username": reader.username, "skip": "on"})
    assert StudyMember.objects.get(study=study, user=reader).skip_practice

    client.force_login(reader)
    assert client.get(reverse("reading_next", args=[study.slug, Task.REALISM])).url.startswith("/read/a/")


def test_the_practice_page_shows_the_item_blinded_like_a_real_one(client, practising):
    study, reader = practising
    client.force_login(reader)
    attempt = next_practice(reader, study, Task.REALISM)
    page = client.get(reverse("practice_page", args=[attempt.public_id])).content.decode()

    for leak in ("original", "alternative", "hedging", "mimic", "59000001", "Minor Issues</strong>", "Routine wording"):
        assert leak not in page.lower() if leak.islower() else leak not in page


def test_another_readers_practice_item_is_a_404(client, practising):
    study, reader = practising
    attempt = next_practice(reader, study, Task.REALISM)
    other = make_user(Role.READER)
    client.force_login(other)

    assert client.get(reverse("practice_page", args=[attempt.public_id])).status_code == 404


def test_the_coordinator_sees_each_readers_agreement_with_the_reference(client, practising):
    study, reader = practising
    for rating in (RatingChoice.REALISTIC, RatingChoice.REALISTIC):
        attempt = show_practice(next_practice(reader, study, Task.REALISM))
        submit_practice(reader=reader, attempt_id=attempt.public_id, rating=rating, rationale="",
                        form_token=uuid.uuid4())  # fmt: skip

    # Items 1 and 2 in order: the original (Realistic, agrees) and the alternative (Minor Issues, not).
    assert agreement_by_reader(study) == [
        {"username": reader.username, "tasks": {Task.REALISM: {"rated": 2, "agreed": 1, "percent": 50}}}
    ]
    client.force_login(make_user(Role.COORDINATOR))
    page = client.get(reverse("study_guide", args=[study.slug])).content.decode()
    assert "1 / 2 (50%)" in page


# --- The API --------------------------------------------------------------------------------------------


def test_an_automated_judge_practises_through_the_api(practising):
    study, reader = practising
    client = Client(HTTP_AUTHORIZATION=f"Token {make_token(reader)}")

    refused = client.get("/api/reading/next/?task=realism")
    assert refused.status_code == 409 and refused.json()["required"] == "practice"
    for _ in range(2):
        item = client.get(f"/api/reading/practice/?study={study.slug}&task=realism").json()
        assert item["practice"] is True and set(item) >= {"context", "reports", "labels", "form_token"}
        body = {"rating": "realistic", "rationale": "", "form_token": item["form_token"]}
        result = client.post(f"/api/reading/practice/{item['id']}/rating/", body, content_type=JSON)
        assert result.status_code == 201 and "explanation" in result.json()
    assert client.get(f"/api/reading/practice/?study={study.slug}&task=realism").status_code == 204
    assert client.get("/api/reading/next/?task=realism").status_code == 200


def test_the_coordinator_api_imports_practice_and_lets_a_judge_skip_it(practising):
    study, reader = practising
    coordinator = make_user(Role.COORDINATOR)
    client = Client(HTTP_AUTHORIZATION=f"Token {make_token(coordinator)}")
    upload = io.BytesIO(practice_file(practice_row(3)))
    upload.name = "more.csv"

    assert client.post(f"/api/studies/{study.slug}/practice/", {"file": upload}).status_code == 201
    status = client.post(
        f"/api/studies/{study.slug}/practice-settings/",
        {"username": reader.username, "skip_practice": True, "practice_items_required": 1},
        content_type=JSON,
    ).json()
    assert status["skip_practice"] == [reader.username] and status["practice_items_required"] == 1
    assert status["items"] == {Task.REALISM: 6, Task.EQUIVALENCE: 3}
    unknown = client.post(
        f"/api/studies/{study.slug}/practice-settings/",
        {"username": "nobody", "skip_practice": True, "practice_items_required": 5},
        content_type=JSON,
    )
    assert unknown.status_code == 400 and "nobody" in unknown.json()["detail"]
    study.refresh_from_db()
    assert study.practice_items_required == 1


# --- Blinding -----------------------------------------------------------------------------------------


def _masked_practice_page(client, attempt, texts) -> str:
    import re

    page = client.get(reverse("practice_page", args=[attempt.public_id])).content.decode()
    page = page.replace(str(attempt.public_id), "[item]")
    page = re.sub(r'(name="csrfmiddlewaretoken" value=")[^"]*(")', r"\1[csrf]\2", page)
    page = re.sub(r'("X-CSRFToken": ")[^"]*(")', r"\1[csrf]\2", page)
    page = re.sub(r'(name="form_token" value=")[^"]*(")', r"\1[token]\2", page)
    for text in texts:
        page = page.replace(text, "[text]")
    return page


def test_the_original_and_alternative_practice_pages_differ_only_in_the_text(client, reading):
    study, reader = reading
    import_practice_items(study, practice_file(practice_row(1)), filename="p.csv")
    study.practice_items_required = 2
    study.save(update_fields=["practice_items_required"])
    client.force_login(reader)
    original = next_practice(reader, study, Task.REALISM)
    row = practice_row(1)
    texts = [row["original_findings"], row["alternative_findings"]]
    first = _masked_practice_page(client, original, texts)
    show_practice(original)
    submit_practice(reader=reader, attempt_id=original.public_id, rating=RatingChoice.REALISTIC, rationale="",
                    form_token=uuid.uuid4())  # fmt: skip
    alternative = next_practice(reader, study, Task.REALISM)
    assert alternative.item.report_type == "alternative"
    second = _masked_practice_page(client, alternative, texts)

    # Only the count of practice items still to go differs (2, then 1).
    assert first.replace("2 to go", "[n] to go") == second.replace("1 to go", "[n] to go")
