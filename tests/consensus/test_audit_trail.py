"""The audit trail is append-only: nothing in the application edits or deletes an event."""

import pytest
from django.db import DatabaseError, connection, transaction
from django.db.models.deletion import ProtectedError
from django.urls import reverse

from annotation.models import AuditAction, AuditEvent, Example, RatingChoice, Task
from tests.factories import make_reading_study, make_user, rate_open_reads

pytestmark = pytest.mark.django_db


@pytest.fixture
def event(db) -> AuditEvent:
    study, _, _ = make_reading_study(pairs=1)
    example = Example.objects.filter(study=study, task=Task.REALISM).order_by("pk").first()
    rate_open_reads(example, RatingChoice.REALISTIC)
    return AuditEvent.objects.get(example=example, action=AuditAction.SUBMITTED)


def _unchanged(event: AuditEvent) -> bool:
    stored = AuditEvent.objects.get(pk=event.pk)
    return (stored.action, stored.after, stored.actor_id) == (AuditAction.SUBMITTED, event.after, event.actor_id)


def test_saving_a_stored_event_is_refused(event):
    event.action = AuditAction.VOIDED
    event.after = {"rating": "major_issues"}

    with pytest.raises(TypeError, match="append-only"):
        event.save()

    event.refresh_from_db()
    assert event.action == AuditAction.SUBMITTED


def test_deleting_an_event_is_refused(event):
    with pytest.raises(TypeError, match="append-only"):
        event.delete()

    assert AuditEvent.objects.filter(pk=event.pk).exists()


def test_queryset_updates_and_deletes_are_refused(event):
    events = AuditEvent.objects.filter(pk=event.pk)

    with pytest.raises(TypeError, match="append-only"):
        events.update(action=AuditAction.VOIDED)
    with pytest.raises(TypeError, match="append-only"):
        events.delete()
    with pytest.raises(TypeError, match="append-only"):
        AuditEvent.objects.all().delete()
    event.action = AuditAction.VOIDED
    with pytest.raises(TypeError, match="append-only"), transaction.atomic():
        AuditEvent.objects.bulk_update([event], ["action"])

    assert AuditEvent.objects.filter(pk=event.pk, action=AuditAction.SUBMITTED).exists()


def test_deleting_the_study_or_the_example_is_refused_while_they_have_events(event):
    with pytest.raises(ProtectedError), transaction.atomic():
        event.example.delete()
    with pytest.raises(ProtectedError), transaction.atomic():
        event.study.delete()

    assert AuditEvent.objects.filter(pk=event.pk).exists()


def test_the_admin_shows_events_but_refuses_to_change_or_delete_them(client, event):
    client.force_login(make_user(username="root", is_superuser=True, is_staff=True))
    change = reverse("admin:annotation_auditevent_change", args=[event.pk])
    delete = reverse("admin:annotation_auditevent_delete", args=[event.pk])
    changelist = reverse("admin:annotation_auditevent_changelist")

    assert client.get(change).status_code == 200  # read-only view
    assert client.post(change, {"action": AuditAction.VOIDED, "after": "{}"}).status_code == 403
    assert client.get(delete).status_code == 403
    assert client.post(delete, {"post": "yes"}).status_code == 403
    client.post(changelist, {"action": "delete_selected", "_selected_action": [event.pk], "post": "yes"})
    assert client.get(reverse("admin:annotation_auditevent_add")).status_code == 403

    assert _unchanged(event)


@pytest.mark.postgres
def test_the_database_refuses_raw_updates_and_deletes(event):
    table = AuditEvent._meta.db_table
    with pytest.raises(DatabaseError, match="append-only"), transaction.atomic(), connection.cursor() as cursor:
        cursor.execute(f"UPDATE {table} SET action = %s WHERE id = %s", [AuditAction.VOIDED, event.pk])  # noqa: S608
    with pytest.raises(DatabaseError, match="append-only"), transaction.atomic(), connection.cursor() as cursor:
        cursor.execute(f"DELETE FROM {table} WHERE id = %s", [event.pk])  # noqa: S608

    assert _unchanged(event)
