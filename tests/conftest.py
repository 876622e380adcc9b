import pytest
from django.db import connection

from annotation.models import Role
from tests.factories import make_study, make_user


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        if item.get_closest_marker("postgres") and connection.vendor != "postgresql":
            item.add_marker(pytest.mark.skip(reason="needs PostgreSQL: set DATABASE_URL to run it"))


@pytest.fixture
def coordinator(db):
    return make_user(Role.COORDINATOR, username="coord")


@pytest.fixture
def reader(db):
    return make_user(Role.READER, username="reader")


@pytest.fixture
def study(db):
    return make_study("s1")
