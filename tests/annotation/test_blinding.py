"""Blinding: nothing a reader receives tells the original from the rewrite, or reveals the variation,
the dataset, another reader's rating or an internal sequential id.

One reader holds both Task 1 examples of a pair. Every response about the original must be the
response about the alternative, byte for byte, once the assignment ids, the random tokens and the
report text itself are replaced by placeholders.
"""

import html
import re
import uuid
from dataclasses import dataclass

import pytest
from django.contrib.auth.models import AbstractBaseUser
from django.test import Client
from django.urls import reverse

from annotation.models import (
    DEFAULT_TAXONOMY,
    Annotation,
    Assignment,
    CandidatePair,
    Dataset,
    Example,
    MemberRole,
    RatingChoice,
    ReportType,
    Role,
    Study,
    StudyMember,
    Task,
    Verdict,
)
from tests.factories import make_study, make_user, rate

pytestmark = pytest.mark.django_db

UUID = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}", re.IGNORECASE)
CSRF_FIELD = re.compile(r'(name="csrfmiddlewaretoken" value=")[^"]*(")')
CSRF_HEADER = re.compile(r'("X-CSRFToken": ")[^"]*(")')

# The two reports have the same length, so that not even Content-Length differs between them.
ORIGINAL_TEXT = ("Heart size normal. No effusion seen.", "No acute cardiopulmonary process.")
ALTERNATIVE_TEXT = ("Normal heart size. No effusion seen.", "No cardiopulmonary acute process.")
SOURCE_STUDY_ID = "57391846"
OTHER_READER = "quillon-the-other"
OTHER_RATIONALE = "Pterodactyl phrasing in the second sentence."

# Distinctive primary keys, so that a scan for them means something.
PAIR_PK = 481516
ORIGINAL_EXAMPLE_PK, ALTERNATIVE_EXAMPLE_PK, EQUIVALENCE_EXAMPLE_PK = 623342, 623343, 623344
ORIGINAL_ASSIGNMENT_PK, ALTERNATIVE_ASSIGNMENT_PK, EQUIVALENCE_ASSIGNMENT_PK = 775201, 775202, 775203
OTHER_ASSIGNMENT_PK = 775204
OTHER_ANNOTATION_PK, OWN_ANNOTATION_PK = 889901, 889902

FORBIDDEN = [
    "original",
    "alternative",
    "rewrite",
    "report_type",
    "report-type",
    "slot",
    "third",
    "variation",
    "dataset",
    "mimic",
    SOURCE_STUDY_ID,
    OTHER_READER,
    OTHER_RATIONALE,
    # Every variation key and label, except "Terminology", a word of the protocol's own definitions.
    *(key for key, _, _ in DEFAULT_TAXONOMY if key != "terminology"),
    *(label for _, label, _ in DEFAULT_TAXONOMY if label != "Terminology"),
]
FORBIDDEN_PKS = [
    PAIR_PK,
    ORIGINAL_EXAMPLE_PK,
    ALTERNATIVE_EXAMPLE_PK,
    EQUIVALENCE_EXAMPLE_PK,
    ORIGINAL_ASSIGNMENT_PK,
    ALTERNATIVE_ASSIGNMENT_PK,
    EQUIVALENCE_ASSIGNMENT_PK,
    OTHER_ASSIGNMENT_PK,
    OTHER_ANNOTATION_PK,
    OWN_ANNOTATION_PK,
]


@dataclass
class World:
    study: Study
    reader: AbstractBaseUser
    other: AbstractBaseUser
    original: Assignment
    alternative: Assignment
    equivalence: Assignment
    other_assignment: Assignment


@pytest.fixture
def world() -> World:
    study = make_study("pilot", name="Pilot study", keep_versions_apart=False)
    pair = CandidatePair.objects.create(
        pk=PAIR_PK,
        study=study,
        dataset=Dataset.objects.get(key="mimic-cxr"),
        source_study_id=SOURCE_STUDY_ID,
        variation=study.variations.get(key="hedging"),
        verdict=Verdict.ACCEPTED,
        sampled=True,
        indication="Cough for two weeks.",
        comparison="Chest radiograph from last year.",
        technique="PA and lateral views.",
        original_findings=ORIGINAL_TEXT[0],
        original_impression=ORIGINAL_TEXT[1],
        alternative_findings=ALTERNATIVE_TEXT[0],
        alternative_impression=ALTERNATIVE_TEXT[1],
    )
    original = Example.objects.create(
        pk=ORIGINAL_EXAMPLE_PK, study=study, pair=pair, task=Task.REALISM, report_type=ReportType.ORIGINAL
    )
    alternative = Example.objects.create(
        pk=ALTERNATIVE_EXAMPLE_PK, study=study, pair=pair, task=Task.REALISM, report_type=ReportType.ALTERNATIVE
    )
    equivalence = Example.objects.create(pk=EQUIVALENCE_EXAMPLE_PK, study=study, pair=pair, task=Task.EQUIVALENCE)
    reader = make_user(Role.READER, username="marlowe")
    other = make_user(Role.READER, username=OTHER_READER)
    for user in (reader, other):
        StudyMember.objects.create(study=study, user=user, role=MemberRole.READER)
    return World(
        study=study,
        reader=reader,
        other=other,
        original=Assignment.objects.create(
            pk=ORIGINAL_ASSIGNMENT_PK, example=original, reader=reader, slot=1, queue_order=1
        ),
        alternative=Assignment.objects.create(
            pk=ALTERNATIVE_ASSIGNMENT_PK, example=alternative, reader=reader, slot=1, queue_order=2
        ),
        equivalence=Assignment.objects.create(pk=EQUIVALENCE_ASSIGNMENT_PK, example=equivalence, reader=reader, slot=1),
        other_assignment=Assignment.objects.create(pk=OTHER_ASSIGNMENT_PK, example=original, reader=other, slot=2),
    )


def _other_rates(world: World) -> None:
    """The other reader rates the original, with a rationale the scans look for."""
    annotation = rate(world.other_assignment, RatingChoice.MAJOR_ISSUES, OTHER_RATIONALE).annotation
    Annotation.objects.filter(pk=annotation.pk).update(id=OTHER_ANNOTATION_PK)


def _client(user: AbstractBaseUser) -> Client:
    # A fresh client per request, so that every response sets the same cookies.
    client = Client()
    client.force_login(user)
    return client


def _get(user: AbstractBaseUser, path: str, **headers):
    return _client(user).get(path, **headers)


def _page(assignment: Assignment) -> str:
    return reverse("reading_page", args=[assignment.public_id])


def _api(assignment: Assignment) -> str:
    return f"/api/reading/{assignment.public_id}/"


def _mask(text: str, *, items: tuple[Assignment, ...] = (), reports: tuple[tuple[str, str], ...] = ()) -> str:
    for findings, impression in reports:
        text = text.replace(html.escape(findings), "[findings]").replace(html.escape(impression), "[impression]")
    for assignment in items:
        text = text.replace(str(assignment.public_id), "[item]")
    text = CSRF_FIELD.sub(r"\1[csrf]\2", text)
    text = CSRF_HEADER.sub(r"\1[csrf]\2", text)
    return UUID.sub("[uuid]", text)


def _masked_headers(response, **mask) -> dict[str, str]:
    return {name.lower(): _mask(value, **mask) for name, value in response.headers.items()}


def _masked_json(data: dict, items: tuple[Assignment, ...]) -> dict:
    data = dict(data)
    assert data["id"] in {str(a.public_id) for a in items}
    data["id"] = "[item]"
    data["form_token"] = "[token]" if data["form_token"] else None
    data["reports"] = [{**report, "findings": "[findings]", "impression": "[impression]"} for report in data["reports"]]
    return data


def _assert_blind(body: str, where: str) -> None:
    masked = CSRF_HEADER.sub("", CSRF_FIELD.sub("", UUID.sub("", body)))
    for word in FORBIDDEN:
        assert word.lower() not in masked.lower(), f"{where} mentions {word!r}"
    for pk in FORBIDDEN_PKS:
        assert not re.search(rf"(?<![0-9]){pk}(?![0-9])", masked), f"{where} shows the primary key {pk}"


def _assert_response_blind(response, where: str) -> None:
    _assert_blind(response.content.decode(), where)
    for name, value in response.headers.items():
        _assert_blind(f"{name}: {value}", f"{where} (header {name})")
    for name in response.cookies:
        _assert_blind(name, f"{where} (cookie {name})")


def test_the_fixture_is_meaningful(world):
    assert len(ORIGINAL_TEXT[0]) == len(ALTERNATIVE_TEXT[0])
    assert len(ORIGINAL_TEXT[1]) == len(ALTERNATIVE_TEXT[1])
    assert all(html.escape(text) == text for text in (*ORIGINAL_TEXT, *ALTERNATIVE_TEXT))
    assert world.original.example.report_type == ReportType.ORIGINAL
    assert world.original.example.pair.dataset.name == "MIMIC-CXR"


@pytest.mark.parametrize("headers", [{}, {"HTTP_HX_REQUEST": "true"}], ids=["page", "htmx-fragment"])
def test_the_original_and_the_alternative_pages_are_identical_apart_from_the_text(world, headers):
    _other_rates(world)
    items = (world.original, world.alternative)
    reports = (ORIGINAL_TEXT, ALTERNATIVE_TEXT)

    first = _get(world.reader, _page(world.original), **headers)
    second = _get(world.reader, _page(world.alternative), **headers)

    assert first.status_code == second.status_code == 200
    assert ORIGINAL_TEXT[0] in first.content.decode()
    assert ALTERNATIVE_TEXT[0] in second.content.decode()
    assert _mask(first.content.decode(), items=items, reports=reports) == _mask(
        second.content.decode(), items=items, reports=reports
    )
    assert _masked_headers(first, items=items) == _masked_headers(second, items=items)
    assert sorted(first.cookies) == sorted(second.cookies)


@pytest.mark.parametrize("headers", [{}, {"HTTP_HX_REQUEST": "true"}], ids=["page", "htmx-fragment"])
def test_the_rated_pages_of_the_original_and_the_alternative_are_identical(world, headers):
    for assignment in (world.original, world.alternative):
        rate(assignment, RatingChoice.MINOR_ISSUES, "The same reason for both.")
    items = (world.original, world.alternative)
    reports = (ORIGINAL_TEXT, ALTERNATIVE_TEXT)

    first = _get(world.reader, _page(world.original), **headers)
    second = _get(world.reader, _page(world.alternative), **headers)

    assert "The same reason for both." in first.content.decode()
    assert _mask(first.content.decode(), items=items, reports=reports) == _mask(
        second.content.decode(), items=items, reports=reports
    )
    assert _masked_headers(first, items=items) == _masked_headers(second, items=items)


def test_the_api_answers_identically_for_the_original_and_the_alternative(world):
    _other_rates(world)
    items = (world.original, world.alternative)

    first = _get(world.reader, _api(world.original))
    second = _get(world.reader, _api(world.alternative))

    assert first.status_code == second.status_code == 200
    assert first.json()["reports"][0]["findings"] == ORIGINAL_TEXT[0]
    assert second.json()["reports"][0]["findings"] == ALTERNATIVE_TEXT[0]
    assert _masked_json(first.json(), items) == _masked_json(second.json(), items)
    assert _masked_headers(first, items=items) == _masked_headers(second, items=items)


def test_the_next_item_api_answers_identically_for_the_original_and_the_alternative(world):
    items = (world.original, world.alternative)

    first = _get(world.reader, "/api/reading/next/?task=realism")
    # Swap the queue order: the alternative now comes first, the original still open.
    Assignment.objects.filter(pk=world.original.pk).update(queue_order=3)
    second = _get(world.reader, "/api/reading/next/?task=realism")

    assert first.json()["id"] == str(world.original.public_id)
    assert second.json()["id"] == str(world.alternative.public_id)
    assert _masked_json(first.json(), items) == _masked_json(second.json(), items)
    assert _masked_headers(first, items=items) == _masked_headers(second, items=items)


def test_the_api_payload_holds_only_the_documented_fields(world):
    data = _get(world.reader, _api(world.original)).json()

    assert set(data) == {
        "id",
        "study",
        "task",
        "question",
        "position",
        "context",
        "reports",
        "labels",
        "status",
        "form_token",
        "rating",
        "rationale",
    }
    assert set(data["context"]) == {"indication", "comparison", "technique"}
    assert [set(report) for report in data["reports"]] == [{"heading", "findings", "impression"}]
    assert set(data["study"]) == {"slug", "name"}  # the study's own names, as the reading page shows them


def test_nothing_a_reader_receives_names_the_version_variation_dataset_or_internal_ids(world):
    _other_rates(world)
    reader = world.reader
    realism = (world.original, world.alternative)
    responses: dict[str, object] = {}
    for assignment in (*realism, world.equivalence):
        name = str(assignment.pk)
        responses[f"page {name}"] = _get(reader, _page(assignment))
        responses[f"fragment {name}"] = _get(reader, _page(assignment), HTTP_HX_REQUEST="true")
        responses[f"api {name}"] = _get(reader, _api(assignment))
    responses["home"] = _get(reader, reverse("reader_home"))
    responses["next realism"] = _get(reader, "/api/reading/next/?task=realism")
    responses["next equivalence"] = _get(reader, "/api/reading/next/?task=equivalence")
    responses["progress"] = _get(reader, "/api/reading/progress/")
    responses["continue"] = _get(reader, reverse("reading_next", args=[world.study.slug, Task.REALISM]))
    # A rating through the page, a failed one, and one through the API, then the rated item.
    client = _client(reader)
    responses["invalid rating"] = client.post(
        _page(world.original), {"rating": RatingChoice.MAJOR_ISSUES, "rationale": "", "form_token": uuid.uuid4()}
    )
    responses["htmx rating"] = client.post(
        _page(world.original),
        {"rating": RatingChoice.MINOR_ISSUES, "rationale": "Odd.", "form_token": uuid.uuid4()},
        HTTP_HX_REQUEST="true",
    )
    Annotation.objects.filter(assignment=world.original).update(id=OWN_ANNOTATION_PK)
    responses["again"] = client.post(
        _page(world.original),
        {"rating": RatingChoice.REALISTIC, "rationale": "", "form_token": uuid.uuid4()},
        HTTP_HX_REQUEST="true",
    )
    responses["api rating"] = client.post(
        f"{_api(world.alternative)}rating/",
        {"rating": RatingChoice.REALISTIC, "rationale": "", "form_token": str(uuid.uuid4())},
        content_type="application/json",
    )
    responses["rated page"] = _get(reader, _page(world.original))
    responses["rated api"] = _get(reader, _api(world.original))
    responses["queue done"] = _get(reader, reverse("reading_next", args=[world.study.slug, Task.REALISM]), follow=True)

    assert responses["invalid rating"].status_code == 422
    assert responses["htmx rating"].status_code == 200
    assert responses["again"].status_code == 409
    assert responses["api rating"].status_code == 201
    for where, response in responses.items():
        assert response.status_code in (200, 201, 302, 409, 422), (where, response.status_code)
        _assert_response_blind(response, where)


def test_the_reading_page_and_api_show_no_prior_rating(world):
    before_page = _get(world.reader, _page(world.original))
    before_api = _get(world.reader, _api(world.original))
    _other_rates(world)

    after_page = _get(world.reader, _page(world.original))
    after_api = _get(world.reader, _api(world.original))

    html_after = after_page.content.decode()
    assert OTHER_RATIONALE not in html_after
    assert OTHER_READER not in html_after
    assert "checked" not in html_after
    assert _mask(before_page.content.decode()) == _mask(html_after)
    items = (world.original,)
    assert _masked_json(before_api.json(), items) == _masked_json(after_api.json(), items)
    assert after_api.json()["rating"] is None
    assert after_api.json()["rationale"] is None


def test_the_reader_home_and_progress_show_nothing_about_other_readers(world):
    before_home = _get(world.reader, reverse("reader_home"))
    before_progress = _get(world.reader, "/api/reading/progress/")
    _other_rates(world)

    after_home = _get(world.reader, reverse("reader_home"))
    after_progress = _get(world.reader, "/api/reading/progress/")

    assert _mask(before_home.content.decode()) == _mask(after_home.content.decode())
    assert before_progress.json() == after_progress.json()
    assert OTHER_READER not in after_home.content.decode()
    assert {(q["task"], q["done"], q["waiting"]) for q in after_progress.json()} == {
        (Task.REALISM, 0, True),
        (Task.EQUIVALENCE, 0, True),
    }


@pytest.mark.parametrize(
    ("path", "headers"),
    [
        (lambda id: reverse("reading_page", args=[id]), {}),
        (lambda id: reverse("reading_page", args=[id]), {"HTTP_HX_REQUEST": "true"}),
        (lambda id: f"/api/reading/{id}/", {}),
    ],
    ids=["page", "htmx-fragment", "api"],
)
def test_another_readers_assignment_is_exactly_like_one_that_does_not_exist(world, path, headers):
    theirs = _get(world.reader, path(world.other_assignment.public_id), **headers)
    missing = _get(world.reader, path(uuid.uuid4()), **headers)

    assert theirs.status_code == missing.status_code == 404
    assert theirs.content == missing.content
    assert _masked_headers(theirs) == _masked_headers(missing)
    world.other_assignment.refresh_from_db()
    assert world.other_assignment.first_shown_at is None


def test_posting_to_another_readers_assignment_is_a_404_too(world):
    client = _client(world.reader)
    data = {"rating": RatingChoice.REALISTIC, "rationale": "", "form_token": str(uuid.uuid4())}

    page = client.post(_page(world.other_assignment), data)
    fragment = client.post(_page(world.other_assignment), data, HTTP_HX_REQUEST="true")
    api = client.post(f"{_api(world.other_assignment)}rating/", data, content_type="application/json")
    missing = client.post(f"/api/reading/{uuid.uuid4()}/rating/", data, content_type="application/json")

    assert page.status_code == fragment.status_code == api.status_code == missing.status_code == 404
    assert api.content == missing.content
    assert not Annotation.objects.exists()


@pytest.fixture
def third_read(world) -> tuple[Assignment, Assignment]:
    """The reader's third read of an example two others disagreed on, and an initial read of another."""
    study, reader = world.study, world.reader
    first, second = make_user(Role.READER), make_user(Role.READER)
    for user in (first, second):
        StudyMember.objects.create(study=study, user=user, role=MemberRole.READER)
    examples = []
    for n, texts in enumerate((ORIGINAL_TEXT, ALTERNATIVE_TEXT)):
        pair = CandidatePair.objects.create(
            study=study,
            dataset=Dataset.objects.get(key="mimic-cxr"),
            source_study_id=str(57391900 + n),
            variation=study.variations.get(key="negation--implicit"),
            verdict=Verdict.ACCEPTED,
            sampled=True,
            indication="Dyspnea.",
            comparison="",
            technique="AP portable.",
            original_findings=texts[0],
            original_impression=texts[1],
            alternative_findings="Unused.",
            alternative_impression="Unused.",
        )
        examples.append(
            Example.objects.create(study=study, pair=pair, task=Task.REALISM, report_type=ReportType.ORIGINAL)
        )
    disputed, fresh = examples
    # Only the reader is free to take the third read of the disputed example.
    StudyMember.objects.filter(user=world.other).update(active=False)
    Assignment.objects.filter(reader=reader).delete()
    initial = Assignment.objects.create(example=fresh, reader=reader, slot=1)
    rate(Assignment.objects.create(example=disputed, reader=first, slot=1), RatingChoice.REALISTIC, "")
    rate(Assignment.objects.create(example=disputed, reader=second, slot=2), RatingChoice.MAJOR_ISSUES, OTHER_RATIONALE)
    third = Assignment.objects.get(example=disputed, reader=reader)
    assert third.slot == 3
    return third, initial


@pytest.mark.parametrize("headers", [{}, {"HTTP_HX_REQUEST": "true"}], ids=["page", "htmx-fragment"])
def test_a_third_read_looks_exactly_like_an_initial_read(world, third_read, headers):
    items = third_read
    reports = (ORIGINAL_TEXT, ALTERNATIVE_TEXT)

    third = _get(world.reader, _page(third_read[0]), **headers)
    initial = _get(world.reader, _page(third_read[1]), **headers)

    assert third.status_code == initial.status_code == 200
    assert OTHER_RATIONALE not in third.content.decode()
    assert _mask(third.content.decode(), items=items, reports=reports) == _mask(
        initial.content.decode(), items=items, reports=reports
    )
    assert _masked_headers(third, items=items) == _masked_headers(initial, items=items)
    _assert_response_blind(third, "third read")


def test_a_third_read_looks_exactly_like_an_initial_read_in_the_api(world, third_read):
    third = _get(world.reader, _api(third_read[0]))
    initial = _get(world.reader, _api(third_read[1]))

    assert _masked_json(third.json(), third_read) == _masked_json(initial.json(), third_read)
    assert OTHER_RATIONALE not in third.content.decode()
