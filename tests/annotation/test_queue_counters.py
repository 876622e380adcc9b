"""annotation.queues: each reader's queue counters (ReaderQueue), collected in a block and written once."""

from collections import Counter

import pytest
from django.db import IntegrityError, transaction

from annotation import queues
from annotation.models import RatingChoice, ReaderQueue, Role, Task
from consensus.services import void_annotation
from tests.factories import make_reading_study, make_study, make_user, rate_open_reads
from tests.invariants import queue_counter_mismatches

pytestmark = pytest.mark.django_db


def counters(reader, study, task=Task.REALISM) -> tuple[int, int] | None:
    row = ReaderQueue.objects.filter(reader=reader, study=study, task=task).first()
    return None if row is None else (row.open_count, row.rated_count)


def test_changes_inside_one_block_add_up_per_queue():
    study, first, second = make_study(), make_user(Role.READER), make_user(Role.READER)
    with transaction.atomic(), queues.counting():
        queues.count(first.pk, study.pk, Task.REALISM, opened=2)
        queues.count(first.pk, study.pk, Task.REALISM, opened=1)
        queues.count(first.pk, study.pk, Task.REALISM, rated=1)
        queues.count(first.pk, study.pk, Task.REALISM, opened=-1, rated=1)
        queues.count_opened(Counter({(second.pk, study.pk, Task.REALISM): 3}))
        # Nothing is written before the block ends.
        assert not ReaderQueue.objects.exists()
    assert counters(first, study) == (2, 2)
    assert counters(second, study) == (3, 0)
    assert counters(first, study, Task.EQUIVALENCE) is None


def test_a_queue_counted_for_the_first_time_holds_exactly_what_was_counted():
    study, opener, rater = make_study(), make_user(Role.READER), make_user(Role.READER)
    queues.count(opener.pk, study.pk, Task.REALISM, opened=1)
    queues.count(rater.pk, study.pk, Task.REALISM, rated=1)
    assert counters(opener, study) == (1, 0)
    assert counters(rater, study) == (0, 1)
    # Later changes add to the row.
    queues.count(opener.pk, study.pk, Task.REALISM, opened=-1, rated=1)
    assert counters(opener, study) == (0, 1)


def test_a_nested_block_adds_to_the_outer_one_and_a_failed_block_writes_nothing():
    study, reader = make_study(), make_user(Role.READER)
    with queues.counting():
        with queues.counting():
            queues.count(reader.pk, study.pk, Task.REALISM, opened=1)
        assert counters(reader, study) is None
        queues.count(reader.pk, study.pk, Task.REALISM, opened=1)
    assert counters(reader, study) == (2, 0)

    with pytest.raises(RuntimeError), queues.counting():
        queues.count(reader.pk, study.pk, Task.REALISM, opened=5)
        raise RuntimeError
    assert counters(reader, study) == (2, 0)


def test_a_counter_that_would_go_below_zero_fails_the_transaction():
    study, reader = make_study(), make_user(Role.READER)
    queues.count(reader.pk, study.pk, Task.REALISM, opened=1)
    with pytest.raises(IntegrityError), transaction.atomic():
        queues.count(reader.pk, study.pk, Task.REALISM, opened=-2)
    assert counters(reader, study) == (1, 0)


def test_the_counters_follow_a_study_through_assignment_ratings_a_third_read_and_a_void():
    # Readers by default: as many as every third read can need, and the refill after the void.
    study, _, _ = make_reading_study(pairs=2, adjudicators=1)
    assert queue_counter_mismatches(study) == {}
    examples = list(study.examples.order_by("pk"))
    agreed, disputed = examples[0], examples[1]
    first_ratings = {Task.REALISM: RatingChoice.REALISTIC, Task.EQUIVALENCE: RatingChoice.EQUIVALENT}
    other_ratings = {Task.REALISM: RatingChoice.MAJOR_ISSUES, Task.EQUIVALENCE: RatingChoice.MAJOR_DISCREPANCY}
    annotations = rate_open_reads(agreed, first_ratings[agreed.task], first_ratings[agreed.task])
    rate_open_reads(disputed, first_ratings[disputed.task], other_ratings[disputed.task])
    assert disputed.assignments.count() == 3
    assert queue_counter_mismatches(study) == {}

    void_annotation(annotations[0].public_id, actor=make_user(Role.COORDINATOR), reason="Rated the wrong report.")
    assert queue_counter_mismatches(study) == {}
