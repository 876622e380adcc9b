"""Showing an assignment starts its time on task and fixes the Task 2 order, once, in one UPDATE."""

from datetime import timedelta

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from annotation.models import Assignment, ReportType, Role, Task
from consensus.services import show_assignment
from tests.factories import make_assignment, make_example, make_pair, make_study, make_user

pytestmark = pytest.mark.django_db


def _loaded(assignment: Assignment) -> Assignment:
    return Assignment.objects.select_related("example__pair", "example__study").get(pk=assignment.pk)


def _initial_reads(study, count: int) -> list[tuple[Assignment, Assignment]]:
    readers = [make_user(Role.READER), make_user(Role.READER)]
    reads = []
    for _ in range(count):
        example = make_example(make_pair(study))
        reads.append((make_assignment(example, readers[0], slot=1), make_assignment(example, readers[1], slot=2)))
    return reads


def test_two_initial_readers_opening_at_the_same_moment_get_opposite_orders():
    # Both requests load their assignment before either has stored anything: neither can see
    # the other's draw, and the orders are still opposite.
    orders = []
    # 24 examples: a fair coin that came up the same way for all of them would be a 1 in 8 million chance.
    for first, second in _initial_reads(make_study(), 24):
        first, second = _loaded(first), _loaded(second)
        show_assignment(second)
        show_assignment(first)
        first.refresh_from_db()
        second.refresh_from_db()
        assert {first.report_a_type, second.report_a_type} == {ReportType.ORIGINAL, ReportType.ALTERNATIVE}
        orders.append(first.report_a_type)

    assert set(orders) == {ReportType.ORIGINAL, ReportType.ALTERNATIVE}  # the coin goes both ways


def test_the_order_is_the_same_whoever_opens_first():
    forwards = _initial_reads(make_study(), 1)[0]
    for assignment in forwards:
        show_assignment(_loaded(assignment))
    expected = [a.report_a_type for a in map(_loaded, forwards)]

    Assignment.objects.filter(pk__in=[a.pk for a in forwards]).update(report_a_type="", first_shown_at=None)
    for assignment in reversed(forwards):
        show_assignment(_loaded(assignment))

    assert [a.report_a_type for a in map(_loaded, forwards)] == expected


def test_a_second_showing_changes_nothing_even_from_a_stale_copy():
    first, _ = _initial_reads(make_study(), 1)[0]
    stale = _loaded(first)
    shown = show_assignment(_loaded(first))
    # Both values as another request might have stored them: an earlier time, and (the draw is the same
    # for every request, so only a stored value can differ) the other order.
    other_order = ReportType.ORIGINAL if shown.report_a_type == ReportType.ALTERNATIVE else ReportType.ALTERNATIVE
    Assignment.objects.filter(pk=first.pk).update(
        first_shown_at=shown.first_shown_at - timedelta(minutes=5), report_a_type=other_order
    )
    stored = _loaded(first)

    show_assignment(stale)  # still thinks it was never shown

    again = _loaded(first)
    assert (again.first_shown_at, again.report_a_type) == (stored.first_shown_at, stored.report_a_type)


def test_showing_is_one_update_and_nothing_once_shown():
    first, _ = _initial_reads(make_study(), 1)[0]
    assignment = _loaded(first)
    assert assignment.task == Task.EQUIVALENCE

    with CaptureQueriesContext(connection) as captured:
        show_assignment(assignment)
    assert [q["sql"].split()[0] for q in captured] == ["UPDATE"]

    with CaptureQueriesContext(connection) as captured:
        show_assignment(assignment)
    assert len(captured) == 0


def test_a_third_reader_gets_a_coin_of_their_own_not_a_fixed_order_nor_the_first_readers():
    # Over many pairs the third reader sees the original as Report A about half the time, and
    # their order matches the first reader's about half the time: a fresh draw per presentation.
    study = make_study()
    third_reader = make_user(Role.READER)
    orders, same_as_first = [], []
    for first, _second in _initial_reads(study, 60):
        first = show_assignment(_loaded(first))
        third = show_assignment(_loaded(make_assignment(first.example, third_reader, slot=3)))
        orders.append(third.report_a_type)
        same_as_first.append(third.report_a_type == first.report_a_type)

    assert 15 <= orders.count(ReportType.ORIGINAL) <= 45, orders
    assert 15 <= sum(same_as_first) <= 45, same_as_first
