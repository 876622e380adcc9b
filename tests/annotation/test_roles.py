"""annotation.roles: the role groups, and the conflict-of-interest warning in full."""

import pytest
from django.contrib.auth.models import Group

from annotation.models import Role
from annotation.roles import ROLE_GROUP_NAMES, ROLE_PERMISSIONS, enrolment_warning, ensure_role_groups

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


def test_the_warning_for_both_unblinded_roles_reads_in_full():
    # The words a coordinator reads before enrolling such a person, whole.
    assert enrolment_warning("alice", {Role.READER, Role.COORDINATOR, Role.DATA_MANAGER}) == (
        "Conflict of interest: alice also holds the Coordinator and the Data manager role (coordinators see "
        "every study's readers, their ratings and which report is the original; data managers download "
        "releases with every rating, the consensus and the report types). The pairs they still have to rate "
        "are hidden from their coordinator pages until they have rated them, but what they saw of a pair "
        "before it reached their queue cannot be unseen. Prefer a reader who holds neither role."
    )
