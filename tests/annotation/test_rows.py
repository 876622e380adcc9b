"""annotation.rows: instances made from a hand-written statement's rows equal the ORM's."""

import uuid
from datetime import timedelta

import pytest
from django.db import IntegrityError, connection, transaction
from django.utils import timezone

from annotation.models import (
    Annotation,
    Assignment,
    AssignmentStatus,
    AuditAction,
    AuditEvent,
    Example,
    ReaderQueue,
    Study,
    Task,
)
from annotation.reading import next_assignment, next_assignment_id
from annotation.rows import Inserted, Selected, _made_plainly, insert, update_row
from consensus.services import ReadOf, lock_example
from tests.factories import make_reading_study

pytestmark = pytest.mark.django_db


def _fields(instance) -> dict:
    return {field.attname: getattr(instance, field.attname) for field in instance._meta.concrete_fields}


def test_the_locked_example_its_study_and_pair_equal_what_the_orm_reads(django_assert_num_queries):
    # Every kind of column the three tables have: ids, UUIDs, text, booleans, integers, JSON and
    # datetimes, each converted as a queryset converts it on this database.
    study, readers, _ = make_reading_study(pairs=2, pairs_per_exam=2, keep_versions_apart=False)
    Study.objects.filter(pk=study.pk).update(sample_datasets=["mimic-cxr"], license_text="CC-BY <4.0> \u00e9")
    example = Example.objects.filter(study=study).order_by("pk").last()
    assignment = example.assignments.order_by("pk").first()

    with transaction.atomic(), django_assert_num_queries(1):
        by_pk = lock_example(example.pk)
    with transaction.atomic(), django_assert_num_queries(1):
        by_read = lock_example(ReadOf(assignment.public_id, assignment.reader_id))
    with transaction.atomic():
        other_readers = lock_example(ReadOf(assignment.public_id, readers[-1].pk + 1000))

    orm = Example.objects.select_related("study", "pair").get(pk=example.pk)
    assert orm.study.sampled_at is not None and orm.study.sample_datasets
    for locked in (by_pk, by_read):
        with django_assert_num_queries(0):
            made = (locked, locked.study, locked.pair)
        for mine, theirs in zip(made, (orm, orm.study, orm.pair), strict=True):
            assert _fields(mine) == _fields(theirs)
            assert [type(value) for value in _fields(mine).values()] == [
                type(value) for value in _fields(theirs).values()
            ]
            assert (mine._state.adding, mine._state.db) == (False, "default")
    assert other_readers is None
    with transaction.atomic(), pytest.raises(Example.DoesNotExist):
        lock_example(orm.pk + 1000)


def test_the_next_assignment_and_what_it_carries_equal_what_the_orm_reads(django_assert_num_queries):
    study, _, _ = make_reading_study(pairs=2)
    # Which reader has a Task 1 item is the draw's (the public ids are random): one who has.
    reader = Assignment.objects.filter(study=study, task=Task.REALISM).order_by("pk").first().reader
    orm = (
        Assignment.objects.filter(reader=reader, task=Task.REALISM, status=AssignmentStatus.OPEN, held=False)
        .select_related("example__pair", "example__study")
        .order_by("study_id", "queue_order", "pk")
        .first()
    )
    assert orm is not None
    for where in ({}, {"study_id": study.pk}, {"study_slug": study.slug}):
        with django_assert_num_queries(1):
            found = next_assignment(reader, task=Task.REALISM, **where)
        with django_assert_num_queries(0):
            made = (found, found.example, found.example.pair, found.example.study)
        theirs = (orm, orm.example, orm.example.pair, orm.example.study)
        for mine, expected in zip(made, theirs, strict=True):
            assert _fields(mine) == _fields(expected)
            assert [type(v) for v in _fields(mine).values()] == [type(v) for v in _fields(expected).values()]
    assert next_assignment(reader, task=Task.REALISM, study_slug="no-such-study") is None
    assert next_assignment(reader, task=Task.REALISM, study_id=study.pk + 1000) is None


def test_an_instance_of_a_row_is_what_from_db_makes_of_it_however_it_is_made(monkeypatch):
    study, _, _ = make_reading_study(pairs=1)
    reader = Assignment.objects.filter(study=study, task=Task.REALISM).order_by("pk").first().reader
    part = Selected(Assignment, "a")
    with connection.cursor() as cursor:
        # The model's own columns and table, no outside text.
        statement = f"SELECT {part.columns(connection)} FROM {part.table(connection)} WHERE a.reader_id = %s"  # noqa: S608
        cursor.execute(statement, [reader.pk])
        row = cursor.fetchone()
    made = part.instance(row, connection)
    by_django = Assignment.objects.get(pk=made.pk)
    assert part._plain
    assert _fields(made) == _fields(by_django)
    assert (made._state.adding, made._state.db) == (by_django._state.adding, by_django._state.db)
    assert {k: v for k, v in vars(made).items() if k != "_state"} == {
        k: v for k, v in vars(by_django).items() if k != "_state"
    }
    # A related instance is cached, then the key changes: dropped, as for an instance __init__ made.
    example = made.example
    made.example_id = example.pk + 1000
    assert "example" not in made._state.fields_cache


def test_a_model_whose_instances_are_watched_or_whose_columns_do_more_is_made_by_its_init(monkeypatch):
    from django.db.models.query_utils import DeferredAttribute
    from django.db.models.signals import post_init

    study, _, _ = make_reading_study(pairs=1)
    reader = Assignment.objects.filter(study=study, task=Task.REALISM).order_by("pk").first().reader
    seen = []

    def watch(sender, instance, **kwargs):
        seen.append(instance)

    post_init.connect(watch, sender=Assignment)
    try:
        found = next_assignment(reader, task=Task.REALISM)
    finally:
        post_init.disconnect(watch, sender=Assignment)
    assert seen == [found]

    class Louder(DeferredAttribute):
        def __set__(self, instance, value):
            instance.__dict__[self.field.attname] = value

    monkeypatch.setattr(Assignment, "task", Louder(Assignment._meta.get_field("task")))
    assert not _made_plainly(Assignment, Selected(Assignment, "a").attnames)
    assert _made_plainly(Example, Selected(Example, "e").attnames)


def test_an_inserted_rating_is_the_row_the_orm_would_write(django_assert_num_queries):
    study, _, _ = make_reading_study(pairs=1)
    first, second = Assignment.objects.filter(study=study, task=Task.REALISM).order_by("pk")[:2]
    now = timezone.now()

    def rating(assignment: Assignment) -> Annotation:
        return Annotation(
            assignment=assignment,
            example=assignment.example,
            reader=assignment.reader,
            task=Task.REALISM,
            rating="minor_issues",
            rationale="Odd <wording> \u00e9.",
            form_token=uuid.uuid4(),
            report_a_type="",
            duration_ms=1234,
            settle_by=now + timedelta(minutes=2),
            settled_at=None,
        )

    mine, theirs = rating(first), rating(second)
    with django_assert_num_queries(1):
        assert insert(mine, connection) is mine
    theirs.save()
    assert mine.pk and mine.created_at and (mine._state.adding, mine._state.db) == (False, "default")
    read_back = {row.pk: row for row in Annotation.objects.filter(pk__in=[mine.pk, theirs.pk])}
    differ = {"id", "assignment_id", "example_id", "reader_id", "public_id", "form_token", "created_at"}
    assert _fields(read_back[mine.pk]) == _fields(mine)
    assert {k: v for k, v in _fields(read_back[mine.pk]).items() if k not in differ} == {
        k: v for k, v in _fields(read_back[theirs.pk]).items() if k not in differ
    }
    # A unique column refuses a second row as the ORM's insert does, and the caller's transaction decides.
    twice = rating(second)
    twice.form_token = mine.form_token
    with pytest.raises(IntegrityError), transaction.atomic():
        insert(twice, connection)


def test_an_inserted_audit_event_keeps_its_json_and_its_time():
    study, readers, _ = make_reading_study(pairs=1, assign=False)
    event = AuditEvent.objects.record(
        AuditAction.SUBMITTED,
        study=study,
        actor=readers[0],
        subject=readers[0],
        after={"rating": "x", "n": [1, "\u00e9"]},
    )
    stored = AuditEvent.objects.get(pk=event.pk)
    assert (stored.after, stored.before, stored.actor_id) == ({"rating": "x", "n": [1, "\u00e9"]}, {}, readers[0].pk)
    assert stored.created_at == event.created_at


def test_a_value_left_to_the_database_is_left_to_the_orm(monkeypatch):
    from django.db.models import NOT_PROVIDED, Value

    study, readers, _ = make_reading_study(pairs=1, assign=False)
    example = Example.objects.filter(study=study).first()
    expressed = Assignment(example=example, reader=readers[0], slot=1, queue_order=1, held=Value(False))
    expressed.take_queue_of_example()
    with pytest.raises(ValueError, match="expression"):
        insert(expressed, connection)
    # A database default without a Python one: the ORM leaves the column out of its INSERT.
    monkeypatch.setattr(Assignment._meta.get_field("held"), "default", NOT_PROVIDED)
    with pytest.raises(ValueError, match="only a database default"):
        Inserted(Assignment)


def test_an_inserted_assignment_is_the_row_and_the_count_that_save_makes():
    study, readers, _ = make_reading_study(pairs=1, assign=False)
    example = Example.objects.filter(study=study, task=Task.EQUIVALENCE).first()
    saved = Assignment.objects.create(example=example, reader=readers[0], slot=1, queue_order=7)
    mine = Assignment(example=example, reader=readers[1], slot=2, queue_order=7)
    mine.take_queue_of_example()
    insert(mine, connection)
    mine.count_as_new()

    rows = {row.reader_id: _fields(row) for row in Assignment.objects.filter(example=example)}
    differ = ("id", "public_id", "reader_id", "slot", "created_at")
    assert {k: v for k, v in rows[readers[1].pk].items() if k not in differ} == {
        k: v for k, v in rows[readers[0].pk].items() if k not in differ
    }
    assert rows[readers[1].pk]["public_id"] == mine.public_id and mine.pk == rows[readers[1].pk]["id"]
    counters = {
        q.reader_id: (q.study_id, q.task, q.open_count, q.held_count, q.third_read_count)
        for q in ReaderQueue.objects.filter(reader__in=readers[:2])
    }
    assert counters[readers[1].pk] == counters[readers[0].pk] == (study.pk, Task.EQUIVALENCE, 1, 0, 0)
    assert saved.study_id == mine.study_id == study.pk


def test_the_next_assignments_id_alone_is_the_next_assignments(django_assert_num_queries):
    study, _, _ = make_reading_study(pairs=2)
    other = make_reading_study(pairs=1)[0]
    for task in Task.values:
        for reader in {assignment.reader for assignment in Assignment.objects.filter(study=study, task=task)}:
            for where in ({}, {"study_id": study.pk}, {"study_id": other.pk}):
                with django_assert_num_queries(1):
                    found = next_assignment_id(reader, task=task, **where)
                expected = next_assignment(reader, task=task, **where)
                assert found == (expected.public_id if expected else None)
                assert found is None or isinstance(found, uuid.UUID)
            # Once rated, the next one.
            first = next_assignment(reader, task=task)
            Assignment.objects.filter(pk=first.pk).update(status=AssignmentStatus.DONE)
            expected = next_assignment(reader, task=task)
            assert next_assignment_id(reader, task=task) == (expected.public_id if expected else None)


def test_a_row_updated_by_its_pk_reads_back_as_the_orm_would_have_written_it():
    study, _, _ = make_reading_study(pairs=1)
    assignment, other = Assignment.objects.filter(study=study).order_by("pk")[:2]
    when = timezone.now() - timedelta(minutes=3)
    values = {"status": AssignmentStatus.DONE, "resumed_at": when, "held": True, "time_before_undo_ms": 1500}
    # A UUID too: SQLite stores its hex digits, as the field prepares it.
    assert update_row(Assignment, assignment.pk, connection, public_id=(new_id := uuid.uuid4()), **values) == 1
    Assignment.objects.filter(pk=other.pk).update(**values)
    mine, theirs = Assignment.objects.get(pk=assignment.pk), Assignment.objects.get(pk=other.pk)
    assert {name: getattr(mine, name) for name in values} == values == {name: getattr(theirs, name) for name in values}
    assert mine.public_id == new_id and Assignment.objects.filter(public_id=new_id).count() == 1
    assert update_row(Assignment, other.pk + 1000, connection, held=False) == 0
