"""Fuzz the whole API from its own OpenAPI schema: no 500 and no HTML error for any role, and a
refused request writes nothing.

Schemathesis turns every operation of the schema drf-spectacular builds into Hypothesis
strategies (bodies, query strings and path parameters that fit the schema, and ones that do
not); each case is sent in-process to the WSGI application, as each role with a real token,
against a small study with ratings, an adjudication and a release. Half of the cases name the
study's real objects in the path, so they reach the views' logic and not only their lookups.
Seeded and bounded (FUZZ_EXAMPLES per operation, mode and role).
"""

import json
from collections.abc import Iterator

import pytest
import schemathesis
from django.contrib.auth import get_user_model
from django.core.signals import request_finished, request_started
from django.core.wsgi import get_wsgi_application
from django.db import close_old_connections, connection
from drf_spectacular.generators import SchemaGenerator
from drf_spectacular.renderers import OpenApiJsonRenderer
from hypothesis import HealthCheck, Phase, given, seed, settings
from hypothesis import strategies as st
from schemathesis import GenerationMode

from annotation.models import (
    Annotation,
    ApiToken,
    Assignment,
    AuditEvent,
    CandidatePair,
    Example,
    Role,
    Study,
    StudyMember,
)
from consensus.models import Adjudication, ConsensusLabel
from exports.models import Release
from exports.services import request_release
from tests.factories import make_reading_study, make_token, make_user, rate_open_reads
from tests.hypothesis_profiles import examples

pytestmark = pytest.mark.fuzz

FUZZ_EXAMPLES = 2
FUZZ_SEED = 20261201
ROLES = ["anonymous", "reader", "adjudicator", "coordinator", "data manager"]
# Everything a request could write, and the audit trail that would record it.
WATCHED = [
    Study,
    CandidatePair,
    Example,
    StudyMember,
    Assignment,
    Annotation,
    Adjudication,
    ConsensusLabel,
    Release,
    AuditEvent,
    ApiToken,
    get_user_model(),
]

cases_run = {"total": 0}


# (table, condition): rows of every table a request could write, the audit trail, and the states that change.
COUNTED = [(model, "") for model in WATCHED] + [
    (CandidatePair, "sampled"),
    (Assignment, "status = 'open'"),
    (Assignment, "status = 'voided'"),
    (Annotation, "voided_at IS NOT NULL"),
    (Adjudication, "status = 'done'"),
]


def _row_counts() -> tuple:
    """Every count in COUNTED, in one query (table names come from the models, not from input)."""
    counts = ", ".join(
        f"(SELECT COUNT(*) FROM {model._meta.db_table}{' WHERE ' + where if where else ''})"  # noqa: S608
        for model, where in COUNTED
    )
    with connection.cursor() as cursor:
        cursor.execute(f"SELECT {counts}")
        return tuple(cursor.fetchone())


@pytest.fixture(scope="module")
def api_schema():
    document = SchemaGenerator().get_schema(request=None, public=True)
    schema = schemathesis.openapi.from_dict(json.loads(OpenApiJsonRenderer().render(document)))
    schema.app = get_wsgi_application()
    return schema


@pytest.fixture
def in_process(settings) -> Iterator[None]:
    """Requests share the test's connection and transaction, as Django's test client does."""
    settings.ALLOWED_HOSTS = ["localhost"]
    request_started.disconnect(close_old_connections)
    request_finished.disconnect(close_old_connections)
    yield
    request_started.connect(close_old_connections)
    request_finished.connect(close_old_connections)


@pytest.fixture
def world(db) -> dict:
    """A small study with data: rated examples, a three-way split with its adjudication, a release."""
    # Readers by default: as many as every third read can need (the split below needs one).
    study, readers, adjudicators = make_reading_study(pairs=2, adjudicators=1, slug="fuzz")
    examples = list(Example.objects.filter(study=study).order_by("pk"))
    rate_open_reads(examples[0], "realistic", "minor_issues", "major_issues")  # -> adjudication
    rate_open_reads(examples[1], "realistic", "realistic")  # -> consensus
    data_manager = make_user(Role.DATA_MANAGER)
    release = request_release(
        study, user=data_manager, version="1.0.0", datasets=[], include_unfinished=True, license_text="CC0"
    )
    users = {
        "reader": readers[0],
        "adjudicator": adjudicators[0],
        "coordinator": make_user(Role.COORDINATOR),
        "data manager": data_manager,
    }
    own = Assignment.objects.filter(reader=readers[0]).order_by("pk").first()
    return {
        "tokens": {role: make_token(user) for role, user in users.items()},
        "real": {
            "slug": study.slug,
            "key": "mimic-cxr",
            "example_id": str(examples[0].public_id),
            "assignment_id": str(own.public_id),
            "annotation_id": str(Annotation.objects.order_by("pk").first().public_id),
            "release_id": str(release.public_id),
            "username": readers[1].username,
        },
    }


def _strategy(operation, real: dict) -> st.SearchStrategy:
    names = {parameter.name for parameter in operation.path_parameters}
    fixed = {name: value for name, value in real.items() if name in names}
    modes = [GenerationMode.POSITIVE, GenerationMode.NEGATIVE]
    strategies = [operation.as_strategy(generation_mode=mode) for mode in modes]
    if fixed:
        strategies += [operation.as_strategy(generation_mode=mode, path_parameters=fixed) for mode in modes]
    return st.one_of(strategies)


def _fuzz(operation, role: str, world: dict) -> None:
    headers = {"Authorization": f"Token {world['tokens'][role]}"} if role != "anonymous" else {}

    @seed(FUZZ_SEED)
    @settings(
        max_examples=examples(FUZZ_EXAMPLES * 4),
        database=None,
        deadline=None,
        phases=[Phase.explicit, Phase.generate, Phase.shrink],
        suppress_health_check=list(HealthCheck),
    )
    @given(case=_strategy(operation, world["real"]))
    def run(case) -> None:
        response = case.call(headers=headers)
        cases_run["total"] += 1
        label = f"{role}: {case.method} {case.formatted_path} -> {response.status_code}"
        assert response.status_code < 500, label
        content_type = response.headers.get("content-type", [""])[0]
        assert "html" not in content_type, label
        # Compared with the counts after the previous case: one query per case.
        after = _row_counts()
        if response.status_code >= 400:
            assert after == last_counts[0], f"{label} wrote to the database"
        last_counts[0] = after

    last_counts = [_row_counts()]
    run()


@pytest.mark.parametrize("role", ROLES)
def test_no_operation_fails_or_writes_when_refused_for_any_role(api_schema, world, in_process, role):
    operations = [result.ok() for result in api_schema.get_all_operations()]
    before = cases_run["total"]

    for operation in operations:
        _fuzz(operation, role, world)

    ran = cases_run["total"] - before
    print(f"\nfuzz cases run as {role}: {ran} over {len(operations)} operations (seed {FUZZ_SEED})")
    assert len(operations) >= 28
    assert ran >= len(operations) * FUZZ_EXAMPLES
