"""The conflict-of-interest rule: which pairs are hidden from whom, and the enrolment warning."""

import pytest
from django.contrib.auth.models import Permission

from annotation.models import AssignmentStatus, Example, ReportType, Role, Task
from annotation.roles import enrolment_warning, roles_by_user, user_roles
from consensus.conflicts import hidden_pair_ids, is_hidden_from, mark_hidden, pairs_with_open_work
from consensus.models import Adjudication, AdjudicationStatus
from tests.factories import make_assignment, make_example, make_pair, make_study, make_user

pytestmark = pytest.mark.django_db


@pytest.fixture
def pair():
    pair = make_pair(make_study())
    for report_type in ReportType.values:
        make_example(pair, task=Task.REALISM, report_type=report_type)
    make_example(pair, task=Task.EQUIVALENCE)
    return pair


def _example(pair, task: str, report_type: str = "") -> Example:
    return pair.examples.get(task=task, report_type=report_type)


@pytest.mark.parametrize(
    ("task", "report_type"),
    [(Task.REALISM, ReportType.ORIGINAL), (Task.REALISM, ReportType.ALTERNATIVE), (Task.EQUIVALENCE, "")],
)
def test_an_open_read_of_any_example_hides_the_whole_pair(pair, task, report_type):
    user = make_user(Role.COORDINATOR, Role.READER)
    make_assignment(_example(pair, task, report_type), user)

    assert list(pairs_with_open_work(user)) == [pair]
    assert hidden_pair_ids(user, pair.study) == {pair.pk}
    assert is_hidden_from(user, pair.pk)


@pytest.mark.parametrize("status", [AssignmentStatus.DONE, AssignmentStatus.VOIDED])
def test_a_rated_or_voided_read_hides_nothing(pair, status):
    user = make_user(Role.COORDINATOR, Role.READER)
    make_assignment(_example(pair, Task.EQUIVALENCE), user, status=status)

    assert not is_hidden_from(user, pair.pk)
    assert hidden_pair_ids(user, pair.study) == frozenset()


def test_one_rated_read_does_not_show_a_pair_with_another_open_one(pair):
    user = make_user(Role.COORDINATOR, Role.READER)
    make_assignment(_example(pair, Task.REALISM, ReportType.ORIGINAL), user, status=AssignmentStatus.DONE)
    make_assignment(_example(pair, Task.EQUIVALENCE), user)

    assert is_hidden_from(user, pair.pk)


def test_an_open_adjudication_hides_the_pair_until_it_is_decided(pair):
    user = make_user(Role.COORDINATOR, Role.ADJUDICATOR)
    adjudication = Adjudication.objects.create(
        example=_example(pair, Task.REALISM, ReportType.ALTERNATIVE), adjudicator=user, task=Task.REALISM
    )

    assert is_hidden_from(user, pair.pk)

    Adjudication.objects.filter(pk=adjudication.pk).update(status=AdjudicationStatus.VOIDED)
    assert not is_hidden_from(user, pair.pk)


def test_someone_elses_open_read_hides_nothing_from_me(pair):
    me, other = make_user(Role.COORDINATOR, Role.READER), make_user(Role.READER)
    make_assignment(_example(pair, Task.EQUIVALENCE), other)

    assert not is_hidden_from(me, pair.pk)


def test_only_the_study_asked_about_is_listed(pair):
    user = make_user(Role.COORDINATOR, Role.READER)
    make_assignment(_example(pair, Task.EQUIVALENCE), user)

    assert hidden_pair_ids(user, make_study()) == frozenset()
    assert hidden_pair_ids(user, pair.study) == {pair.pk}


def test_mark_hidden_follows_the_path_to_each_rows_pair():
    class Row:
        def __init__(self, **fields):
            self.__dict__.update(fields)

    hidden, shown, about_a_member, bare = (
        Row(example=Row(pair_id=7)),
        Row(example=Row(pair_id=8)),
        Row(example=None),
        Row(),
    )
    rows = [hidden, shown, about_a_member, bare]

    assert mark_hidden(rows, frozenset({7})) is rows
    assert [row.hidden for row in rows] == [True, False, False, False]
    assert [row.hidden for row in mark_hidden([Row(pk=7), Row(pk=9)], frozenset({7}), "pk")] == [True, False]


# --- The enrolment warning ------------------------------------------------------------------------


def test_it_warns_about_a_coordinator_and_says_why():
    warning = enrolment_warning("alice", {Role.READER, Role.COORDINATOR})

    assert warning.startswith("Conflict of interest: alice also holds the Coordinator role")
    assert "which report is the original" in warning
    assert "hidden" in warning


def test_it_warns_about_a_data_manager_too():
    warning = enrolment_warning("carol", {Role.ADJUDICATOR, Role.DATA_MANAGER})

    assert "Data manager role" in warning
    assert "releases" in warning


def test_it_names_both_roles_when_both_are_held():
    warning = enrolment_warning("bob", {Role.COORDINATOR, Role.DATA_MANAGER})

    assert "the Coordinator and the Data manager role" in warning


@pytest.mark.parametrize("roles", [set(), {Role.READER}, {Role.READER, Role.ADJUDICATOR}])
def test_it_does_not_warn_about_readers_and_adjudicators(roles):
    assert enrolment_warning("dan", roles) == ""


def test_roles_by_user_agrees_with_user_roles():
    users = [
        make_user(Role.READER),
        make_user(Role.COORDINATOR, Role.READER),
        make_user(Role.DATA_MANAGER, Role.ADJUDICATOR),
        make_user(Role.COORDINATOR, is_active=False),
        make_user(is_superuser=True),
        make_user(),
    ]
    direct = make_user(Role.READER)
    direct.user_permissions.add(Permission.objects.get(codename="coordinate_study"))
    users.append(direct)

    by_user = roles_by_user(users)

    assert by_user == {user.pk: user_roles(type(user).objects.get(pk=user.pk)) for user in users}
    assert by_user[direct.pk] == {Role.READER, Role.COORDINATOR}
