"""Ids that leave the server are random UUIDs; primary keys and user ids never do."""

import itertools
import uuid

import pytest
from django.apps import apps
from django.db import IntegrityError, transaction
from django.db.models import UUIDField
from django.urls import URLPattern, URLResolver, get_resolver

from annotation.models import Assignment, CandidatePair, Example, ReportType, Role, Study, Task
from tests.factories import make_assignment, make_example, make_pair, make_study, make_user

PUBLIC_MODELS = [Study, CandidatePair, Example, Assignment]
N = 20


def _make_many(model: type, n: int = N) -> list:
    """n objects of a model, created one after another."""
    if model is Study:
        return [make_study() for _ in range(n)]
    study = make_study()
    if model is CandidatePair:
        return [make_pair(study) for _ in range(n)]
    if model is Example:
        pair = make_pair(study)
        examples = [
            make_example(pair, task=Task.REALISM, report_type=ReportType.ORIGINAL),
            make_example(pair, task=Task.REALISM, report_type=ReportType.ALTERNATIVE),
            make_example(pair),
        ]
        return (examples + [make_example(make_pair(study)) for _ in range(n - len(examples))])[:n]
    reader = make_user(Role.READER)
    return [make_assignment(make_example(make_pair(study)), reader) for _ in range(n)]


def test_every_model_with_a_public_id_gets_a_random_unique_uuid():
    models = [
        model
        for label in ("annotation", "consensus", "exports")
        for model in apps.get_app_config(label).get_models()
        if any(f.name == "public_id" for f in model._meta.get_fields())
    ]

    assert set(PUBLIC_MODELS) <= set(models)
    for model in models:
        field = model._meta.get_field("public_id")
        assert isinstance(field, UUIDField), model
        assert field.default is uuid.uuid4, model
        assert field.unique, model
        assert not field.editable, model


@pytest.mark.parametrize("model", PUBLIC_MODELS, ids=lambda m: m.__name__)
def test_public_ids_are_random_uuid4(db, model):
    for obj in _make_many(model):
        obj.refresh_from_db()
        assert isinstance(obj.public_id, uuid.UUID)
        assert obj.public_id.version == 4
        assert obj.public_id.variant == uuid.RFC_4122
        assert obj.public_id != uuid.UUID(int=obj.pk)


@pytest.mark.parametrize("model", PUBLIC_MODELS, ids=lambda m: m.__name__)
def test_public_ids_are_not_sequential(db, model):
    objects = _make_many(model)
    ids = [obj.public_id.int for obj in objects]

    assert len(set(ids)) == N
    # Twenty random ids come out in creation order with probability 1/20!, about 4e-19.
    assert ids != sorted(ids)
    assert ids != sorted(ids, reverse=True)
    # Nor a constant step (a counter, or a time-based id made in quick succession).
    assert len({b - a for a, b in itertools.pairwise(ids)}) > 1
    # The 48-bit prefix of a UUIDv7 is a timestamp; random prefixes of ids made within a
    # second are (almost) never close to each other.
    prefixes = sorted(obj.public_id.int >> 80 for obj in objects)
    assert max(prefixes) - min(prefixes) > 2**32


@pytest.mark.parametrize("model", PUBLIC_MODELS, ids=lambda m: m.__name__)
def test_the_database_refuses_a_duplicate_public_id(db, model):
    first, second = _make_many(model, 2)

    second.public_id = first.public_id
    with pytest.raises(IntegrityError), transaction.atomic():
        second.save()


def _walk(data, path: str = "$"):
    """Every (path, key, value) of a JSON document."""
    if isinstance(data, dict):
        for key, value in data.items():
            yield path, key, value
            yield from _walk(value, f"{path}.{key}")
    elif isinstance(data, list):
        for i, value in enumerate(data):
            yield from _walk(value, f"{path}[{i}]")


USER_KEYS = {"user", "user_id", "reader", "reader_id", "owner", "created_by", "coordinator", "username", "email"}


def _assert_opaque(document, user) -> int:
    """Fail on a primary key or a user id anywhere in the document; return how many ids it holds."""
    ids = 0
    for path, key, value in _walk(document):
        assert key != "pk", path
        assert key.lower() not in USER_KEYS, f"{path}.{key}"
        assert value != user.username, f"{path}.{key}"
        # study_id is the report's id in its source dataset (data, not one of ours).
        if key == "id" or (key.endswith("_id") and key != "study_id"):
            assert isinstance(value, str), f"{path}.{key} = {value!r}"
            assert uuid.UUID(value).version == 4, f"{path}.{key} = {value!r}"
            ids += 1
    return ids


@pytest.fixture
def populated(db):
    study = make_study("opaque", name="Opaque")
    pairs = [make_pair(study, variation=key) for key in ("hedging", "terminology", "negation--explicit")]
    example = make_example(pairs[0])
    make_assignment(example, make_user(Role.READER))
    return study


@pytest.mark.parametrize(
    "path",
    [
        "/api/studies/",
        "/api/studies/opaque/",
        "/api/studies/opaque/pairs/",
        "/api/studies/opaque/summary/",
        "/api/datasets/",
    ],
)
def test_api_responses_hold_no_primary_keys_or_user_ids(client, populated, path):
    coordinator = make_user(Role.COORDINATOR)
    client.force_login(coordinator)

    response = client.get(path)

    assert response.status_code == 200
    _assert_opaque(response.json(), coordinator)


def test_api_responses_name_objects_by_their_public_id(client, populated):
    client.force_login(make_user(Role.COORDINATOR))

    study = client.get("/api/studies/opaque/").json()
    pairs = client.get("/api/studies/opaque/pairs/").json()["results"]

    assert study["id"] == str(populated.public_id)
    assert {pair["id"] for pair in pairs} == {str(p.public_id) for p in populated.pairs.all()}


def test_a_created_study_is_returned_without_its_primary_key(client, db):
    coordinator = make_user(Role.COORDINATOR)
    client.force_login(coordinator)

    response = client.post("/api/studies/", {"slug": "fresh", "name": "Fresh"}, content_type="application/json")

    assert response.status_code == 201
    assert _assert_opaque(response.json(), coordinator) == 1
    assert response.json()["id"] == str(Study.objects.get(slug="fresh").public_id)


def test_study_urls_use_the_slug(client, db):
    # Make the pk and the slug differ, and give another study a slug that looks like that pk.
    for _ in range(3):
        make_study()
    study = make_study("chest-2026")
    client.force_login(make_user(Role.COORDINATOR))

    assert study.get_absolute_url() == "/studies/chest-2026/"
    assert client.get("/studies/chest-2026/").status_code == 200
    assert client.get(f"/studies/{study.pk}/").status_code == 404
    assert client.get("/api/studies/chest-2026/").status_code == 200
    assert client.get(f"/api/studies/{study.pk}/").status_code == 404
    assert client.get(f"/api/studies/{study.public_id}/").status_code == 404
    assert 'href="/studies/chest-2026/"' in client.get("/studies/").content.decode()


def _patterns(resolver: URLResolver, prefix: str = ""):
    for pattern in resolver.url_patterns:
        route = prefix + str(pattern.pattern)
        if isinstance(pattern, URLResolver):
            yield from _patterns(pattern, route)
        elif isinstance(pattern, URLPattern):
            yield route


def test_no_url_outside_the_admin_takes_a_primary_key():
    routes = [route for route in _patterns(get_resolver()) if not route.startswith("admin/")]

    assert routes
    for route in routes:
        assert "<int:" not in route, route
        assert "pk>" not in route, route
        assert "<id>" not in route and "object_id" not in route, route
