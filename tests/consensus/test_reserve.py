"""The reserve (consensus.reserve): initial reads held back, given out with routed reads and when the study
is quiet, so that a third read does not stand out at the end of a queue."""

import random
import uuid
from datetime import timedelta

import pytest
from django.db import connection, transaction
from django.test import Client
from django.urls import reverse
from django.utils import timezone

from annotation import queues
from annotation.models import (
    TASK_RATINGS,
    Assignment,
    AssignmentStatus,
    Example,
    RatingChoice,
    ReaderQueue,
    Role,
    Study,
    Task,
    tiebreak,
)
from consensus import reserve
from consensus.assignment import assign_readers, withdraw_assignment
from consensus.services import NoSuchWork, eligible_readers, show_assignment, submit_annotation
from tests.consensus.test_routing_state_machine import REPLAYED_TABLES
from tests.factories import make_reading_study, make_user, rate
from tests.invariants import queue_counter_mismatches

pytestmark = pytest.mark.django_db

REALISTIC, MAJOR = RatingChoice.REALISTIC, RatingChoice.MAJOR_ISSUES


def _reserved_study(**options):
    options.setdefault("pairs", 12)
    options.setdefault("keep_versions_apart", False)
    return make_reading_study(reserve_percent=70, **options)


def _queue(reader, study, task=Task.REALISM) -> ReaderQueue:
    return ReaderQueue.objects.get(reader=reader, study=study, task=task)


def _hold_everything(reader, study, task=Task.REALISM) -> None:
    """Put every open read of the reader's queue in their reserve (an empty queue with a reserve)."""
    Assignment.objects.filter(reader=reader, study=study, task=task, status=AssignmentStatus.OPEN).update(held=True)
    ReaderQueue.objects.recount(study)


def _reading_now(reader, study, task=Task.REALISM, *, seconds_ago: float = 0) -> None:
    ReaderQueue.objects.filter(reader=reader, study=study, task=task).update(
        last_rated_at=timezone.now() - timedelta(seconds=seconds_ago)
    )


# --- Drawing the queues ------------------------------------------------------------------------


def test_assigning_holds_the_studys_share_of_initial_reads_by_a_seeded_draw_and_leaves_nobody_empty():
    study, _, _ = _reserved_study(pairs=24, readers=4)
    rows = list(Assignment.objects.filter(study=study).values_list("reader_id", "task", "example__public_id", "held"))
    drawn = {
        (reader, task, public_id): tiebreak(study.seed, "reserve", reader, public_id) % 100 < 70
        for reader, task, public_id, _ in rows
    }
    # Held exactly as drawn, but for at most one read per queue that was all drawn held (given out).
    released = [(reader, task) for reader, task, public_id, held in rows if drawn[(reader, task, public_id)] != held]
    assert all(not held for *_, held in rows if not drawn[(_[0], _[1], _[2])])
    assert len(released) == len(set(released))
    held = sum(held for *_, held in rows)
    assert 0.55 <= held / len(rows) <= 0.85, held / len(rows)
    # Every reader starts with something to read in each of their queues, and the counters agree.
    for queue in ReaderQueue.objects.filter(study=study):
        assert queue.open_count >= 1, queue
    assert queue_counter_mismatches(study) == {}


def test_without_a_reserve_nothing_is_held_and_routing_is_least_loaded_first():
    study, _, _ = make_reading_study(pairs=6, keep_versions_apart=False)
    assert study.reserve_percent == 0
    assert not Assignment.objects.filter(study=study, held=True).exists()


# --- What a reader can do with a read in their reserve: nothing ----------------------------------


def test_a_held_read_is_never_given_opened_or_rated():
    study, _, _ = _reserved_study(readers=4)
    held = Assignment.objects.filter(study=study, held=True).select_related("reader").first()
    reader = held.reader
    # First in the queue: a queue that ignored the reserve would give it next.
    Assignment.objects.filter(pk=held.pk).update(queue_order=0)
    client = Client()
    client.force_login(reader)

    given = reserve.next_assignment(reader, task=held.task, study_id=study.pk)

    assert given is not None and given.pk != held.pk and not given.held
    assert client.get(reverse("reading_page", args=[held.public_id])).status_code == 404
    assert client.get(f"/api/reading/{held.public_id}/").status_code == 404
    with pytest.raises(NoSuchWork):
        submit_annotation(
            reader=reader, assignment_id=held.public_id, rating=REALISTIC, rationale="", form_token=uuid.uuid4()
        )
    held.refresh_from_db()
    assert (held.status, held.held, held.first_shown_at) == (AssignmentStatus.OPEN, True, None)


def test_a_reader_with_only_a_reserve_left_is_told_nothing_waits_while_a_colleague_reads():
    study, readers, _ = _reserved_study(readers=4)
    reader, colleague = readers[0], readers[1]
    _hold_everything(reader, study)
    _reading_now(colleague, study)
    client = Client()
    client.force_login(reader)

    assert client.get(f"/api/reading/next/?task={Task.REALISM}&study={study.slug}").status_code == 204
    progress = {row["task"]: row for row in client.get("/api/reading/progress/").json()}
    assert progress.get(Task.REALISM, {}).get("waiting", False) is False
    assert _queue(reader, study).open_count == 0


# --- Pacing: the reserve opens when the study is quiet ------------------------------------------


def _paced_batch(study, reader, held: int) -> int:
    """The reads a quiet study gives out of a reserve of `held` at once: a routed read's escorts, and one."""
    return min(held, reserve.escort_count(study, Task.REALISM, reader.pk, f"paced:{held}") + 1)


def test_an_empty_queue_waits_while_a_colleague_with_items_rated_lately_then_opens_a_batch():
    study, readers, _ = _reserved_study(pairs=24, readers=4)
    reader, colleague = readers[0], readers[1]
    _hold_everything(reader, study)
    held_before = _queue(reader, study).held_count
    _reading_now(colleague, study, seconds_ago=reserve.quiet_seconds() - 5)

    assert reserve.next_assignment(reader, task=Task.REALISM, study_id=study.pk) is None
    assert _queue(reader, study).held_count == held_before

    _reading_now(colleague, study, seconds_ago=reserve.quiet_seconds() + 5)
    batch = _paced_batch(study, reader, held_before)
    given = reserve.next_assignment(reader, task=Task.REALISM, study_id=study.pk)

    assert given is not None and given.reader == reader and not given.held
    assert batch > 1
    assert (_queue(reader, study).open_count, _queue(reader, study).held_count) == (batch, held_before - batch)
    assert queue_counter_mismatches(study) == {}


def test_a_quiet_studys_batches_are_as_long_as_a_routed_reads_on_average():
    # p = (6 + 3) / (2 * 40 + 6 + 20) = 0.085: 10.8 escorts, so batches of 11.8 reads on average.
    study, readers, _ = _reserved_study(readers=4)
    ReaderQueue.objects.filter(study=study, task=Task.REALISM).update(third_read_count=0, second_read_count=0)
    ReaderQueue.objects.filter(pk=_queue(readers[1], study).pk).update(third_read_count=6, second_read_count=40)
    batches = [_paced_batch(study, readers[0], held) for held in range(100, 400)]
    assert set(batches) == {11, 12}
    assert abs(sum(batches) / len(batches) - (1 + 97 / 9)) < 0.1


def test_a_colleague_with_nothing_to_read_does_not_hold_the_reserve_back():
    study, readers, _ = _reserved_study(readers=4)
    reader, colleague = readers[0], readers[1]
    _hold_everything(reader, study)
    _hold_everything(colleague, study)
    _reading_now(colleague, study)
    for other in readers[2:]:
        _hold_everything(other, study)

    assert reserve.next_assignment(reader, task=Task.REALISM, study_id=study.pk) is not None


def test_a_colleagues_rating_waiting_to_settle_holds_the_reserve_back_but_the_readers_own_does_not():
    study, readers, _ = _reserved_study(readers=4)
    Study.objects.filter(pk=study.pk).update(undo_window_seconds=60)
    reader = readers[0]
    colleague = next(
        r
        for r in readers[1:]
        if Assignment.objects.filter(reader=r, study=study, task=Task.REALISM, held=False).exists()
    )
    theirs = Assignment.objects.filter(reader=colleague, study=study, task=Task.REALISM, held=False).first()
    rate(theirs, REALISTIC, "")  # in its undo window now
    for other in readers:
        _hold_everything(other, study)
    _reading_now(colleague, study, seconds_ago=reserve.quiet_seconds() + 5)

    assert reserve.next_assignment(reader, task=Task.REALISM, study_id=study.pk) is None
    # The colleague's own unsettled rating does not keep them waiting.
    assert reserve.next_assignment(colleague, task=Task.REALISM, study_id=study.pk) is not None


def test_the_home_page_opens_a_read_from_the_reserve_when_the_study_is_quiet():
    study, readers, _ = _reserved_study(readers=4)
    reader = readers[0]
    _hold_everything(reader, study)
    client = Client()
    client.force_login(reader)

    batch = _paced_batch(study, reader, _queue(reader, study).held_count)
    page = client.get(reverse("reader_home")).content.decode()

    assert _queue(reader, study).open_count == batch
    assert reverse("reading_next", args=[study.slug, Task.REALISM]) in page


# --- Escorts: routed reads come with reads from the reserve -------------------------------------


def test_escorts_average_one_minus_p_over_p_with_p_the_studys_share_of_third_reads():
    study, readers, _ = _reserved_study(readers=4)
    ReaderQueue.objects.filter(study=study, task=Task.REALISM).update(third_read_count=0, second_read_count=0)
    ReaderQueue.objects.filter(pk=_queue(readers[0], study).pk).update(third_read_count=27, second_read_count=100)
    # p = (27 + 3) / (2 * 100 + 27 + 20) = 0.1215: (1 - p) / p = 7.23 escorts on average.
    counts = [reserve.escort_count(study, Task.REALISM, readers[1].pk, uuid.UUID(int=i)) for i in range(600)]

    assert set(counts) == {7, 8}
    assert abs(sum(counts) / len(counts) - 217 / 30) < 0.06


def test_escorts_have_a_prior_before_the_study_has_ratings():
    study, readers, _ = _reserved_study(readers=4)
    ReaderQueue.objects.filter(study=study).update(third_read_count=0, second_read_count=0)
    counts = [reserve.escort_count(study, Task.REALISM, readers[1].pk, uuid.UUID(int=i)) for i in range(300)]
    # p = 3 / 20: 5.67 on average.
    assert set(counts) == {5, 6}


def test_a_third_read_comes_with_escorts_from_its_readers_reserve_each_after_the_item_on_screen():
    study, _, _ = _reserved_study(readers=5)
    example = Example.objects.filter(study=study, task=Task.REALISM).select_related("study").first()
    # Its two first reads given to their readers (out of any reserve).
    example.assignments.update(held=False)
    ReaderQueue.objects.recount(study)
    first, second = example.assignments.order_by("slot")
    rate(first, REALISTIC, "")
    expected = {}
    for reader in eligible_readers(Example.objects.select_related("study").get(pk=example.pk)):
        expected[reader.pk] = min(
            reserve.escort_count(study, Task.REALISM, reader.pk, example.public_id), _queue(reader, study).held_count
        )
    before = {
        q.reader_id: (q.open_count, q.held_count) for q in ReaderQueue.objects.filter(study=study, task=Task.REALISM)
    }
    was_held = set(Assignment.objects.filter(study=study, held=True).values_list("pk", flat=True))

    rate(second, MAJOR)

    third = example.assignments.get(slot=3)
    reader = third.reader
    opened, held = before[reader.pk]
    queue = _queue(reader, study)
    assert expected[reader.pk] >= 1
    assert (queue.open_count, queue.held_count) == (opened + 1 + expected[reader.pk], held - expected[reader.pk])
    escorts = Assignment.objects.filter(pk__in=was_held, held=False)
    assert {a.reader_id for a in escorts} == {reader.pk} and escorts.count() == expected[reader.pk]
    first_open = min(
        Assignment.objects.filter(reader=reader, study=study, task=Task.REALISM, status="open", held=False)
        .exclude(pk__in=[third.pk, *escorts.values_list("pk", flat=True)])
        .values_list("queue_order", flat=True)
    )
    assert all(a.queue_order > first_open for a in escorts)
    assert third.queue_order > first_open
    assert queue_counter_mismatches(study) == {}


def test_with_a_reserve_a_read_goes_to_the_eligible_reader_with_the_most_reads_ahead_in_its_task():
    # Seven readers, not keeping versions apart: three are eligible for a Task 1 example. The one the
    # seeded draw ranks last has the most reads ahead in Task 1 (open and held); the first has more
    # in Task 2, which does not count.
    study, _, _ = _reserved_study(pairs=1, readers=7)
    example = Example.objects.select_related("study").filter(study=study, task=Task.REALISM).first()
    by_draw = sorted(eligible_readers(example), key=lambda r: tiebreak(study.seed, "route", example.public_id, r.pk))
    assert len(by_draw) == 3
    ReaderQueue.objects.filter(study=study).update(open_count=0, held_count=0)
    for (opened, held), reader in zip(((1, 0), (0, 2), (1, 3)), by_draw, strict=True):
        queues.count(reader.pk, study.pk, Task.REALISM, opened=opened, held=held)
    queues.count(by_draw[0].pk, study.pk, Task.EQUIVALENCE, opened=50)

    assert eligible_readers(example) == [by_draw[2], by_draw[1], by_draw[0]]


def test_withdrawing_a_held_read_counts_it_out_of_the_reserve():
    study, _, _ = _reserved_study(readers=4)
    coordinator = make_user(Role.COORDINATOR)
    held = Assignment.objects.filter(study=study, held=True).first()

    withdraw_assignment(held.public_id, actor=coordinator)

    assert not Assignment.objects.filter(pk=held.pk).exists()
    assert queue_counter_mismatches(study) == {}


def test_two_releases_at_once_never_move_one_read_twice():
    # In one transaction the second release finds the rows the first moved no longer held.
    study, readers, _ = _reserved_study(readers=4)
    reader = readers[0]
    held = _queue(reader, study).held_count
    with transaction.atomic(), queues.counting():
        moved = reserve._release(study, Task.REALISM, reader.pk, 2, None)
        moved += reserve._release(study, Task.REALISM, reader.pk, 2, None)
    assert moved == min(4, held)
    assert _queue(reader, study).held_count == held - moved
    assert queue_counter_mismatches(study) == {}


def test_release_read_gives_that_one_held_read_after_the_first_open_item_and_counts_it():
    study, readers, _ = _reserved_study(readers=4)
    reader = readers[0]
    queue = Assignment.objects.filter(reader=reader, study=study, task=Task.REALISM, status=AssignmentStatus.OPEN)
    held = list(queue.filter(held=True).order_by("-queue_order"))
    assert len(held) >= 2
    # The last of the reserve's own order: a release of one would have moved the first.
    chosen = held[0]
    first_open = reserve.first_open_place(reader.pk, study.pk, Task.REALISM)
    counts = (_queue(reader, study).open_count, _queue(reader, study).held_count)

    assert reserve.release_read(chosen) is True

    chosen.refresh_from_db()
    assert not chosen.held and chosen.queue_order > first_open
    assert set(queue.filter(held=True)) == set(held[1:])
    assert (_queue(reader, study).open_count, _queue(reader, study).held_count) == (counts[0] + 1, counts[1] - 1)
    assert queue_counter_mismatches(study) == {}
    # Given once: a second call moves nothing.
    assert reserve.release_read(chosen) is False
    assert queue_counter_mismatches(study) == {}


# --- What a reader could guess: a simulated study ------------------------------------------------


def _simulate_reading(reserve_percent: int, *, seed: int, pairs: int = 200) -> list[list[str]]:
    """Nine readers (as many as the demo study has) read both tasks in random turns, rating at random
    through the services the pages and API use, until every queue has been asked since the last item
    was given and answered nothing. For each reader's queue, what they were given: "I" an initial read,
    "T" a third read, "|" the queue answered that nothing waits. Reproducible: the study's seed, its
    examples' ids and (on PostgreSQL) the ids the draws use are fixed. Everything it writes is rolled
    back, so several can run in one test."""
    with transaction.atomic():
        sequences = _read_a_simulated_study(reserve_percent, seed=seed, pairs=pairs)
        transaction.set_rollback(True)
    return sequences


def _read_a_simulated_study(reserve_percent: int, *, seed: int, pairs: int) -> list[list[str]]:
    if connection.vendor == "postgresql":
        with connection.cursor() as cursor:
            for table in REPLAYED_TABLES:
                cursor.execute("SELECT setval(pg_get_serial_sequence(%s, 'id'), 1000000, false)", [table])
    rng = random.Random(seed)
    study, readers, _ = make_reading_study(
        pairs=pairs, readers=9, keep_versions_apart=False, reserve_percent=reserve_percent, assign=False
    )
    Study.objects.filter(pk=study.pk).update(seed=seed)
    for example in Example.objects.filter(study=study).select_related("pair"):
        name = f"{seed}:{example.pair.source_study_id}:{example.task}:{example.report_type}"
        Example.objects.filter(pk=example.pk).update(public_id=uuid.uuid5(uuid.NAMESPACE_URL, name))
    study.refresh_from_db()
    assign_readers(study, actor=make_user(Role.COORDINATOR))

    queues = [(reader, task) for reader in readers for task in Task.values]
    seen: dict[tuple[int, str], list[str]] = {(reader.pk, task): [] for reader, task in queues}
    given_nothing: set[tuple[int, str]] = set()
    while len(given_nothing) < len(queues):
        reader, task = rng.choice(queues)
        queue = seen[(reader.pk, task)]
        item = reserve.next_assignment(reader, task=task, study_id=study.pk)
        if item is None:
            given_nothing.add((reader.pk, task))
            if queue and queue[-1] != "|":
                queue.append("|")
            continue
        given_nothing.clear()
        show_assignment(item)
        rating = rng.choice(TASK_RATINGS[task])
        submit_annotation(
            reader=reader,
            assignment_id=item.public_id,
            rating=rating,
            rationale="" if rating in (RatingChoice.REALISTIC, RatingChoice.EQUIVALENT) else "Because.",
            form_token=uuid.uuid4(),
        )
        queue.append("T" if item.is_third_read else "I")
    # Everything was read: nothing waits in a reserve, nor for a reader.
    left = Assignment.objects.filter(study=study, status=AssignmentStatus.OPEN)
    assert not left.exists(), list(left.values_list("reader_id", "task", "held", "slot"))
    return list(seen.values())


def _what_a_reader_could_guess(sequences) -> dict:
    """The share of third reads among all items, among the k-th last items before a queue ran out
    (k = 1, 2, 3), and among the first items after it had run out."""
    counts = {"all": [0, 0], "last": [0, 0], "second last": [0, 0], "third last": [0, 0], "after empty": [0, 0]}
    for sequence in sequences:
        runs = "".join(sequence).split("|")
        for number, run in enumerate(runs):
            for position, kind in enumerate(run):
                third = kind == "T"
                keys = ["all"]
                from_end = len(run) - position
                if (from_end <= 3 and number < len(runs) - 1) or (from_end <= 3 and sequence[-1:] == ["|"]):
                    keys.append(("last", "second last", "third last")[from_end - 1])
                if position == 0 and number > 0:
                    keys.append("after empty")
                for key in keys:
                    counts[key][0] += third
                    counts[key][1] += 1
    return {key: (thirds, n, thirds / n if n else None) for key, (thirds, n) in counts.items()}


def _table(figures: dict) -> str:
    return "\n".join(
        f"  {key:<12} {share:6.1%} of {n:4d} items are third reads" for key, (_, n, share) in figures.items()
    )


@pytest.mark.slow
def test_a_reader_can_guess_no_better_than_the_base_rate_which_items_at_the_end_of_a_queue_are_third_reads():
    # Three simulated studies with the default reserve, pooled.
    sequences = [sequence for seed in (1, 2, 3) for sequence in _simulate_reading(80, seed=seed)]
    figures = _what_a_reader_could_guess(sequences)
    base = figures["all"][2]
    print(f"\nWith a reserve of 80% (the default), three studies:\n{_table(figures)}")

    assert figures["all"][0] >= 200, "the simulation needs at least 200 third reads"
    for key in ("last", "second last", "third last", "after empty"):
        _, n, share = figures[key]
        assert n >= 100, (key, n)
        assert abs(share - base) <= 0.05, (key, share, base)


@pytest.mark.slow
def test_without_a_reserve_the_end_of_a_queue_tells_which_items_are_third_reads():
    # The same simulation with the reserve off: what the rule above buys.
    figures = _what_a_reader_could_guess(_simulate_reading(0, seed=1, pairs=60))
    print(f"\nWithout a reserve, one study:\n{_table(figures)}")

    assert figures["last"][2] > figures["all"][2] + 0.2
    assert figures["after empty"][2] > figures["all"][2] + 0.2


@pytest.mark.postgres
@pytest.mark.django_db(transaction=True)
def test_releases_from_one_reserve_at_the_same_moment_never_move_one_read_twice():
    # Two routed reads' escorts and a quiet study's release, at once, from one reader's reserve:
    # each read leaves the reserve once and the counters say so. Five rounds.
    from tests.consensus.test_concurrency import Racer

    study, readers, _ = _reserved_study(pairs=40, readers=4)
    reader = readers[0]
    assert _queue(reader, study).held_count >= 21
    racer = Racer(threads=3)

    def release(limit: int):
        def call() -> int:
            try:
                with transaction.atomic(), queues.counting():
                    first_open = reserve.first_open_place(reader.pk, study.pk, Task.REALISM)
                    return reserve._release(study, Task.REALISM, reader.pk, limit, first_open)
            finally:
                connection.close()

        return call

    try:
        for _ in range(5):
            held = _queue(reader, study).held_count
            if held < 7:
                break
            moved = racer.race(release(3), release(3), release(1))
            assert all(isinstance(n, int) for n in moved), moved
            assert sum(moved) == 7
            assert _queue(reader, study).held_count == held - 7
            assert queue_counter_mismatches(study) == {}
    finally:
        racer.close()
