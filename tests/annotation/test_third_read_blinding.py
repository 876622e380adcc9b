"""A third read must not stand out: nothing a reader receives tells them that two colleagues disagreed.

The end of a queue, where late arrivals would gather, is the reserve's (tests/consensus/test_reserve.py,
and README, "Blinding").
"""

import random
import re
from collections import Counter, defaultdict

import pytest
from django.test import Client
from django.urls import reverse

from annotation.models import TASK_RATINGS, Assignment, AssignmentStatus, Example, RatingChoice, Role, Task
from consensus.assignment import withdraw_assignment
from consensus.reserve import QUEUE_ORDER_END
from consensus.services import create_routed_assignment, show_assignment
from tests.factories import make_reading_study, make_user, rate
from tests.invariants import readers_barred_from

pytestmark = pytest.mark.django_db

UUID = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")
CSRF = re.compile(r'(name="csrfmiddlewaretoken" value=|"X-CSRFToken": )"[^"]+"')


def _masked(text: str) -> str:
    return CSRF.sub(r'\1"<csrf>"', UUID.sub("<uuid>", text))


def _everything_shown(client: Client, item: Assignment) -> list[str]:
    """What the reader can look at while an item is on their screen: home, progress, the item."""
    return [
        _masked(client.get(reverse("reader_home")).content.decode()),
        _masked(client.get("/api/reading/progress/").content.decode()),
        _masked(client.get(reverse("reading_page", args=[item.public_id])).content.decode()),
        _masked(client.get(f"/api/reading/{item.public_id}/").content.decode()),
        _masked(client.get(f"/api/reading/next/?task={item.task}").content.decode()),
    ]


def test_a_third_read_routed_to_a_reader_changes_nothing_they_see_before_they_reach_it(db):
    study, readers, _ = make_reading_study(pairs=3, readers=5, keep_versions_apart=False)
    reader = readers[0]
    # Free an example of the reader's: withdrawn before it was shown, it leaves no trace.
    coordinator = make_user(Role.COORDINATOR)
    disputed = Example.objects.filter(study=study, task=Task.REALISM, assignments__reader=reader).first()
    withdraw_assignment(disputed.assignments.get(reader=reader).public_id, actor=coordinator)
    for assignment in disputed.assignments.open():
        withdraw_assignment(assignment.public_id, actor=coordinator)
    # The two readers of its pair's Task 2 have seen its text: that leaves the reader and two others.
    first, second = [other for other in readers[1:] if other.pk not in readers_barred_from(disputed)]
    from consensus.assignment import assign_example

    assign_example(disputed.public_id, first, actor=coordinator)
    assign_example(disputed.public_id, second, actor=coordinator)
    client = Client()
    client.force_login(reader)
    on_screen = Assignment.objects.filter(reader=reader, task=Task.REALISM, status=AssignmentStatus.OPEN).first()
    before = _everything_shown(client, on_screen)

    rate(disputed.assignments.get(reader=first), RatingChoice.REALISTIC, "")
    rate(disputed.assignments.get(reader=second), RatingChoice.MAJOR_ISSUES, "Two colleagues disagree.")

    third = disputed.assignments.open().get()
    assert third.reader == reader and third.slot == 3
    assert _everything_shown(client, on_screen) == before


def test_a_routed_read_takes_a_uniformly_random_place_among_the_open_items_after_the_first(db):
    _, (reader, *_), _ = make_reading_study(pairs=6, readers=3, keep_versions_apart=False)
    queue = list(
        Assignment.objects.filter(reader=reader, task=Task.REALISM, status=AssignmentStatus.OPEN)
        .select_related("example__study")
        .order_by("queue_order")
    )
    # The reader has worked through most of their queue: four items are left, the first on screen.
    for assignment in queue[:-4]:
        show_assignment(assignment)
        rate(assignment, RatingChoice.REALISTIC, "")
    left = queue[-4:]
    example = Example.objects.select_related("study").filter(task=Task.REALISM).exclude(assignments__reader=reader)[0]
    example.assignments.filter(slot=2).delete()  # a free slot to route into

    # A reader's queue order is a seeded shuffle: the open items' places are independent uniform
    # draws above what the reader has done. Draw them afresh for each trial, as other studies would.
    rng = random.Random(7)
    ranks: Counter = Counter()
    for seed in range(400):
        done_up_to = rng.randrange(QUEUE_ORDER_END)
        orders = sorted(rng.randrange(done_up_to, QUEUE_ORDER_END) for _ in left)
        for assignment, order in zip(left, orders, strict=True):
            Assignment.objects.filter(pk=assignment.pk).update(queue_order=order)
        example.study.seed = seed
        routed = create_routed_assignment(example, reader, 2)
        ranks[sum(order < routed.queue_order for order in orders)] += 1
        routed.delete()

    # Never before the item on screen; after it, each of the four places (before the 2nd, 3rd
    # and 4th open item, or last) about equally often (100 each; a fair draw stays in 60-140).
    assert ranks[0] == 0
    assert set(ranks) == {1, 2, 3, 4}
    assert all(60 <= n <= 140 for n in ranks.values()), ranks


@pytest.mark.parametrize(
    "first_open, places",
    [
        # Two places are left after the first open item: each comes up.
        (QUEUE_ORDER_END - 3, {QUEUE_ORDER_END - 2, QUEUE_ORDER_END - 1}),
        # One place is left: every routed read takes it.
        (QUEUE_ORDER_END - 2, {QUEUE_ORDER_END - 1}),
    ],
)
def test_a_routed_read_takes_only_places_after_the_first_open_item_up_to_the_last(db, first_open, places):
    _, (reader, *_), _ = make_reading_study(pairs=2, readers=3, keep_versions_apart=False)
    on_screen = Assignment.objects.filter(reader=reader, task=Task.REALISM, status=AssignmentStatus.OPEN)
    on_screen.exclude(pk=on_screen.order_by("queue_order")[0].pk).delete()
    on_screen.update(queue_order=first_open)
    example = Example.objects.select_related("study").filter(task=Task.REALISM).exclude(assignments__reader=reader)[0]
    example.assignments.filter(slot=2).delete()

    taken = set()
    for seed in range(24):
        example.study.seed = seed
        routed = create_routed_assignment(example, reader, 2)
        taken.add(Assignment.objects.get(pk=routed.pk).queue_order)
        routed.delete()

    assert taken == places


def test_a_routed_read_behind_an_item_at_the_very_last_place_is_still_stored(db):
    # No place is left after the first open item: the read takes its own seeded place.
    _, (reader, *_), _ = make_reading_study(pairs=2, readers=3, keep_versions_apart=False)
    Assignment.objects.filter(reader=reader, task=Task.REALISM, status=AssignmentStatus.OPEN).update(
        queue_order=QUEUE_ORDER_END - 1
    )
    example = Example.objects.select_related("study").filter(task=Task.REALISM).exclude(assignments__reader=reader)[0]
    example.assignments.filter(slot=2).delete()

    routed = create_routed_assignment(example, reader, 2)

    assert 0 <= Assignment.objects.get(pk=routed.pk).queue_order < QUEUE_ORDER_END


def test_a_simulated_study_gives_a_reader_no_better_guess_than_the_base_rate():
    """Five readers rate at random through the API, in random turns. For every item a reader
    receives while they still have other open initial reads in that queue, record everything
    that changed in what they are shown since their last item (the item's position, their
    progress), beyond what their own rating explains. The best guess of "third read" from
    those changes must be no better than always guessing the more common answer."""
    rng = random.Random(20261201)
    study, readers, _ = make_reading_study(pairs=24, readers=5, keep_versions_apart=False)
    clients = {}
    for reader in readers:
        clients[reader.pk] = Client()
        clients[reader.pk].force_login(reader)
    last_seen: dict[tuple[int, str], tuple] = {}
    observations: list[tuple[tuple, bool]] = []

    def progress(reader_pk: int) -> dict:
        rows = clients[reader_pk].get("/api/reading/progress/").json()
        return {row["task"]: {k: v for k, v in row.items() if k != "task"} for row in rows}

    for _ in range(2000):
        open_work = list(
            Assignment.objects.filter(study=study, status=AssignmentStatus.OPEN)
            .values_list("reader_id", "task")
            .distinct()
            .order_by("reader_id", "task")
        )
        if not open_work:
            break
        reader_pk, task = rng.choice(open_work)
        client = clients[reader_pk]
        shown_progress = progress(reader_pk)
        item = client.get(f"/api/reading/next/?task={task}").json()
        assignment = Assignment.objects.get(public_id=item["id"])
        other_initial_open = (
            Assignment.objects.filter(reader_id=reader_pk, study=study, task=task, status=AssignmentStatus.OPEN)
            .exclude(pk=assignment.pk)
            .filter(slot__in=(1, 2))
            .exists()
        )
        row = shown_progress[task]
        shown = (item["position"], {k: v for k, v in row.items() if isinstance(v, int) and not isinstance(v, bool)})
        previous = last_seen.get((reader_pk, task))
        if previous is not None and other_initial_open:
            # Since the reader's last item of this queue they rated exactly that one item.
            position, counts = previous
            change = (
                item["position"] - position - 1,
                tuple(sorted((k, v - counts[k] - (k == "done")) for k, v in shown[1].items())),
                tuple(sorted((k, v) for k, v in row.items() if isinstance(v, bool))),
            )
            observations.append((change, assignment.slot == 3))
        last_seen[(reader_pk, task)] = shown
        rating = rng.choice(TASK_RATINGS[task])
        body = {"rating": rating, "rationale": "Because.", "form_token": item["form_token"]}
        assert (
            client.post(f"/api/reading/{item['id']}/rating/", body, content_type="application/json").status_code == 201
        )

    thirds = sum(is_third for _, is_third in observations)
    assert thirds >= 10, "the simulation must route third reads to readers with open work"
    by_change: dict[tuple, Counter] = defaultdict(Counter)
    for change, is_third in observations:
        by_change[change][is_third] += 1
    best_guess = sum(max(counts.values()) for counts in by_change.values()) / len(observations)
    base_rate = max(thirds, len(observations) - thirds) / len(observations)
    assert best_guess <= base_rate + 0.02, (best_guess, base_rate, dict(by_change))
