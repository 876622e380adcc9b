"""annotation.rows: instances made from a hand-written statement's rows equal the ORM's."""

import pytest
from django.db import transaction

from annotation.models import Assignment, AssignmentStatus, Example, Study, Task
from annotation.reading import next_assignment
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
