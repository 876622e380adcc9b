"""annotation.roles: the role groups, the judge/person rule, and the conflict-of-interest warning in full."""

import random

import pytest
from django.contrib.auth import get_user_model
from django.contrib.auth.models import Group, Permission
from django.contrib.contenttypes.models import ContentType

from annotation.models import Role
from annotation.roles import (
    ROLE_GROUP_NAMES,
    ROLE_PERMISSIONS,
    RoleRefused,
    enrolment_warning,
    ensure_role_groups,
    grant_role,
    has_role,
    roles_by_user,
    user_roles,
)
from tests.factories import make_user

pytestmark = pytest.mark.django_db


def test_ensure_role_groups_makes_each_roles_group_with_its_one_permission_once():
    Group.objects.all().delete()

    ensure_role_groups()
    ensure_role_groups()

    groups = {
        group.name: sorted(group.permissions.values_list("content_type__app_label", "codename"))
        for group in Group.objects.all()
    }
    assert groups == {
        ROLE_GROUP_NAMES[role]: [tuple(codename.split("."))] for role, codename in ROLE_PERMISSIONS.items()
    }


def test_granting_a_role_where_the_groups_were_never_made_makes_them_first():
    Group.objects.all().delete()

    user = make_user(Role.READER)

    assert has_role(user, Role.READER)
    assert set(Group.objects.values_list("name", flat=True)) == set(ROLE_GROUP_NAMES.values())


def test_the_warning_for_both_unblinded_roles_reads_in_full():
    # The words a coordinator reads before enrolling such a person, whole.
    assert enrolment_warning("alice", {Role.READER, Role.COORDINATOR, Role.DATA_MANAGER}) == (
        "Conflict of interest: alice also holds the Coordinator and the Data manager role (coordinators see "
        "every study's readers, their ratings and which report is the original; data managers download "
        "releases with every rating, the consensus and the report types). The pairs they still have to rate "
        "are hidden from their coordinator pages until they have rated them, but what they saw of a pair "
        "before it reached their queue cannot be unseen. Prefer a reader who holds neither role."
    )


def test_a_person_is_never_made_a_judge_and_a_judge_never_a_person_and_the_refusal_says_why():
    person = make_user(Role.READER, Role.COORDINATOR, username="alice")
    with pytest.raises(RoleRefused) as refused:
        grant_role(person, Role.JUDGE)
    assert str(refused.value) == (
        "alice is a person's account (Coordinator, Reader); an automated judge needs an account of its own."
    )

    root = get_user_model().objects.create_superuser("root", password="x" * 20)
    with pytest.raises(RoleRefused) as refused:
        grant_role(root, Role.JUDGE)
    assert (
        str(refused.value) == "root is a person's account (superuser); an automated judge needs an account of its own."
    )

    judge = make_user(Role.JUDGE, username="rules-judge")
    with pytest.raises(RoleRefused) as refused:
        grant_role(judge, Role.READER)
    assert str(refused.value) == (
        "rules-judge is an automated judge's account; it holds no other role. Create a separate account for the person."
    )
    assert user_roles(judge) == {Role.JUDGE}


def test_a_users_roles_are_read_once_per_user_object(django_assert_num_queries):
    user = make_user(Role.READER, Role.COORDINATOR)
    fresh = get_user_model().objects.get(pk=user.pk)

    with django_assert_num_queries(1):
        assert user_roles(fresh) == {Role.READER, Role.COORDINATOR}
        assert user_roles(fresh) == {Role.READER, Role.COORDINATOR}


def test_a_granted_role_shows_at_once_on_the_same_user_object():
    user = make_user()
    assert not user.has_perm(ROLE_PERMISSIONS[Role.READER]) and user_roles(user) == set()

    grant_role(user, Role.READER)

    assert user.has_perm(ROLE_PERMISSIONS[Role.READER]) and user_roles(user) == {Role.READER}


def test_the_roles_read_are_the_roles_has_perm_grants_through_groups_and_directly():
    # user_roles reads the roles in one hand-written statement, roles_by_user in the ORM: both must
    # say what Django's has_perm says. Sixty users, each role's permission held through its group,
    # directly, both or not at all, some inactive; a permission that shares a role's codename in
    # another app, and a group holding it, grant nothing.
    ensure_role_groups()
    impostor = Permission.objects.create(
        codename=ROLE_PERMISSIONS[Role.READER].split(".")[1],
        name="Same codename, other app",
        content_type=ContentType.objects.get_for_model(Group),
    )
    decoy = Group.objects.create(name="decoy")
    decoy.permissions.add(impostor)
    permission = {
        role: Permission.objects.get(content_type__app_label=codename.split(".")[0], codename=codename.split(".")[1])
        for role, codename in ROLE_PERMISSIONS.items()
    }
    draw = random.Random(27)
    users = []
    for number in range(60):
        user = make_user(is_active=number % 7 != 0)
        for role in ROLE_PERMISSIONS:
            way = draw.choice(("none", "group", "direct", "both"))
            if way in ("group", "both"):
                user.groups.add(Group.objects.get(name=ROLE_GROUP_NAMES[role]))
            if way in ("direct", "both"):
                user.user_permissions.add(permission[role])
        if draw.random() < 0.5:
            user.groups.add(decoy)
        if draw.random() < 0.3:
            user.user_permissions.add(impostor)
        users.append(user)

    fresh = list(get_user_model().objects.filter(pk__in=[user.pk for user in users]).order_by("pk"))
    by_user = roles_by_user(fresh)
    for user in fresh:
        expected = {role for role, codename in ROLE_PERMISSIONS.items() if user.has_perm(codename)}
        assert user_roles(user) == expected, user.username
        assert by_user[user.pk] == expected, user.username
    assert len({user_roles(user) for user in fresh}) >= 10, "the draw should give many combinations of roles"
