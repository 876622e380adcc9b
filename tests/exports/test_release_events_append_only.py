"""A release's events are append-only in the database too, as the audit trail is (PostgreSQL)."""

import pytest
from django.db import DatabaseError, connection, transaction

from exports.models import ReleaseAction, ReleaseEvent
from tests.exports.release_helpers import make_release
from tests.factories import make_study


def test_the_application_refuses_to_change_or_delete_an_event(db):
    event = ReleaseEvent.objects.create(release=make_release(make_study("s1")), action=ReleaseAction.RETRIED)
    with pytest.raises(TypeError, match="append-only"):
        ReleaseEvent.objects.filter(pk=event.pk).update(detail="edited")
    with pytest.raises(TypeError, match="append-only"):
        event.delete()


@pytest.mark.postgres
@pytest.mark.django_db(transaction=True)
def test_the_database_refuses_to_change_or_delete_an_event_on_postgresql():
    event = ReleaseEvent.objects.create(release=make_release(make_study("s1")), action=ReleaseAction.RETRIED)
    for statement in (
        "UPDATE exports_releaseevent SET detail = 'edited' WHERE id = %s",
        "DELETE FROM exports_releaseevent WHERE id = %s",
    ):
        with pytest.raises(DatabaseError, match="append-only"), transaction.atomic(), connection.cursor() as cursor:
            cursor.execute(statement, [event.pk])
    assert ReleaseEvent.objects.get().detail == event.detail
