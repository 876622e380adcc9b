"""Roles are Django groups, each granting one permission; a user may hold several."""

import functools
from collections.abc import Iterable

from django.contrib.auth import get_user_model
from django.contrib.auth.models import AbstractBaseUser, AnonymousUser, Group, Permission
from django.contrib.contenttypes.models import ContentType
from django.db import connection
from django.db.models import Q

from annotation.models import ReaderProfile, Role, Subspecialty

ROLE_PERMISSIONS: dict[str, str] = {
    Role.READER: "annotation.read_examples",
    Role.ADJUDICATOR: "annotation.adjudicate_examples",
    Role.COORDINATOR: "annotation.coordinate_study",
    Role.DATA_MANAGER: "annotation.build_release",
    # The judges app's own permission: the judge role came after the others.
    Role.JUDGE: "judges.rate_as_judge",
}
# The roles of people. A superuser holds all of them, never the judge's (a judge is a program).
PERSON_ROLES = frozenset(role for role in ROLE_PERMISSIONS if role != Role.JUDGE)


class RoleRefused(ValueError):
    """A judge account holds no other role, and a person's account is never a judge."""


ROLE_GROUP_NAMES: dict[str, str] = {role.value: role.label for role in Role}


ROLE_CACHE = "_readingroom_roles"
ROLE_LIMIT = "_readingroom_role_limit"


def has_role(user: AbstractBaseUser | AnonymousUser, role: str) -> bool:
    return role in user_roles(user)


def user_roles(user: AbstractBaseUser | AnonymousUser) -> frozenset[str]:
    """The roles a user holds, read in one query and kept on the user object for the request.

    Equivalent to asking has_perm for each role's permission (active superusers hold every
    role), but one query instead of has_perm's two, on every request of every reader.
    """
    if not (user.is_authenticated and user.is_active):
        return frozenset()
    held = PERSON_ROLES if user.is_superuser else user.__dict__.get(ROLE_CACHE)
    if held is None:
        sql, params = _roles_statement()
        with connection.cursor() as cursor:
            cursor.execute(sql, [*params, user.pk, user.pk])
            remember_roles(user, cursor.fetchall())
        held = user.__dict__[ROLE_CACHE]
    limit = user.__dict__.get(ROLE_LIMIT)
    return held if limit is None else held & limit


def limit_roles(user: AbstractBaseUser, roles: frozenset[str]) -> None:
    """Let this user object act with no roles beyond these, for the request it came with (a reading
    API token's: annotation.authentication)."""
    user.__dict__[ROLE_LIMIT] = roles


def remember_roles(user: AbstractBaseUser, rows: Iterable[tuple[str | None, str | None]]) -> None:
    """Keep on the user object, for user_roles, the roles of these (app label, codename) rows of
    role_permissions_held (a row of NULLs, from an outer join that found none, is no role)."""
    user.__dict__[ROLE_CACHE] = frozenset(
        _ROLE_OF_CODENAME[(app_label, codename)] for app_label, codename in rows if codename is not None
    )


_ROLE_OF_CODENAME: dict[tuple[str, str], str] = {
    tuple(codename.split(".")): role for role, codename in ROLE_PERMISSIONS.items()
}


_ROLES_SQL = "SELECT ct.app_label, p.codename FROM {tables} WHERE {condition}"
# A role permission (p, with its content type ct) that the user {user} holds through a group or directly.
_HOLDS_ROLE = """({role_permissions})
  AND (p.id IN (SELECT gp.permission_id FROM {group_permissions} gp
                JOIN {user_groups} ug ON ug.group_id = gp.group_id WHERE ug.user_id = {user})
       OR p.id IN (SELECT up.permission_id FROM {user_permissions} up WHERE up.user_id = {user}))"""


def role_permissions_held(user: str) -> tuple[str, str, list[str]]:
    """The role permissions a user holds, for a hand-written statement: (the tables, "permission p JOIN
    content type ct"; the condition on them; its parameters). user is the SQL of the user's id: a
    column, or %s (then its value follows the parameters, twice). Select ct.app_label and p.codename
    and give the rows to remember_roles. The tables are Django's own, by name."""
    user_model = get_user_model()
    table = connection.ops.quote_name
    tables = (
        f"{table(Permission._meta.db_table)} p JOIN {table(ContentType._meta.db_table)} ct ON ct.id = p.content_type_id"
    )
    condition = _HOLDS_ROLE.format(
        group_permissions=table(Group.permissions.through._meta.db_table),
        user_groups=table(user_model.groups.through._meta.db_table),
        user_permissions=table(user_model.user_permissions.through._meta.db_table),
        role_permissions=" OR ".join(["(ct.app_label = %s AND p.codename = %s)"] * len(ROLE_PERMISSIONS)),
        user=user,
    )
    return tables, condition, [part for codename in ROLE_PERMISSIONS.values() for part in codename.split(".")]


@functools.cache
def _roles_statement() -> tuple[str, list[str]]:
    """The statement behind user_roles, written once. The ORM's query for the same rows cost about 4 ms
    of Python to compile, on every request of every reader; this costs none.
    tests/annotation/test_roles.py holds it equal to has_perm."""
    tables, condition, params = role_permissions_held("%s")
    return _ROLES_SQL.format(tables=tables, condition=condition), params


def _role_permissions(prefix: str = "") -> Q:
    """The role permissions, as a condition on Permission (or on a relation to it, by prefix)."""
    condition = Q()
    for codename in ROLE_PERMISSIONS.values():
        app_label, name = codename.split(".")
        condition |= Q(**{f"{prefix}content_type__app_label": app_label, f"{prefix}codename": name})
    return condition


def ensure_role_groups() -> None:
    """Create the role groups with their permissions; safe to call any number of times."""
    for role, codename in ROLE_PERMISSIONS.items():
        app_label, perm_codename = codename.split(".")
        permission = Permission.objects.filter(content_type__app_label=app_label, codename=perm_codename).first()
        if permission is None:
            # After migrate, each app's permissions come with its own post_migrate signal: the judge's
            # come with the judges app's, which calls this again.
            continue
        group, _ = Group.objects.get_or_create(name=ROLE_GROUP_NAMES[role])
        group.permissions.add(permission)


def grant_role(user: AbstractBaseUser, role: str, *, subspecialty: str | None = None) -> None:
    """Put a user in a role's group. Readers and adjudicators also get a profile.

    An automated judge is not a person: a judge account holds no other role (RoleRefused).
    """
    held = user_roles(user) if user.pk else frozenset()
    if role == Role.JUDGE and (user.is_superuser or held - {Role.JUDGE}):
        others = "superuser" if user.is_superuser else ", ".join(Role(r).label for r in sorted(held - {Role.JUDGE}))
        raise RoleRefused(
            f"{user.get_username()} is a person's account ({others}); an automated judge needs an account of its own."
        )
    if role != Role.JUDGE and Role.JUDGE in held:
        raise RoleRefused(
            f"{user.get_username()} is an automated judge's account; it holds no other role. "
            "Create a separate account for the person."
        )
    group = Group.objects.filter(name=ROLE_GROUP_NAMES[role]).first()
    if group is None:
        # Made after every migrate (post_migrate); a database that skipped it gets them now.
        ensure_role_groups()
        group = Group.objects.get(name=ROLE_GROUP_NAMES[role])
    user.groups.add(group)
    if role in (Role.READER, Role.ADJUDICATOR):
        profile, created = ReaderProfile.objects.get_or_create(
            user=user, defaults={"subspecialty": subspecialty or Subspecialty.GENERAL}
        )
        if subspecialty and not created and profile.subspecialty != subspecialty:
            profile.subspecialty = subspecialty
            profile.save(update_fields=["subspecialty"])
    # Permissions are cached per user object.
    for cache in ("_perm_cache", "_group_perm_cache", "_user_perm_cache", ROLE_CACHE):
        user.__dict__.pop(cache, None)


# Roles that see unblinded data of every study: a coordinator the coordinator pages (readers'
# names and ratings, which report is the original), a data manager the releases (every rating,
# the consensus and the report types, also before a study is finished).
UNBLINDED_ROLES: dict[str, str] = {
    Role.COORDINATOR: "coordinators see every study's readers, their ratings and which report is the original",
    Role.DATA_MANAGER: "data managers download releases with every rating, the consensus and the report types",
}


def enrolment_warning(username: str, roles: Iterable[str]) -> str:
    """The conflict-of-interest warning for enrolling this person as a reader or adjudicator of a
    study, given the roles they hold (user_roles() or roles_by_user()); "" when there is none."""
    held = [role for role in UNBLINDED_ROLES if role in roles]
    if not held:
        return ""
    labels = " and the ".join(Role(role).label for role in held)
    why = "; ".join(UNBLINDED_ROLES[role] for role in held)
    return (
        f"Conflict of interest: {username} also holds the {labels} role ({why}). "
        "The pairs they still have to rate are hidden from their coordinator pages until they have rated them, "
        "but what they saw of a pair before it reached their queue cannot be unseen. "
        "Prefer a reader who holds neither role."
    )


def roles_by_user(users: Iterable[AbstractBaseUser]) -> dict[int, frozenset[str]]:
    """The roles each user holds, as user_roles() would say, for many users in two queries."""
    users = list(users)
    codenames = {codename.split(".")[1]: role for role, codename in ROLE_PERMISSIONS.items()}
    held: dict[int, set[str]] = {user.pk: set() for user in users}
    ids = [user.pk for user in users if user.is_active and not user.is_superuser]
    user_model = get_user_model()
    through_groups = (
        user_model.groups.through.objects.filter(user_id__in=ids)
        .filter(_role_permissions("group__permissions__"))
        .values_list("user_id", "group__permissions__codename")
    )
    through_direct = (
        user_model.user_permissions.through.objects.filter(user_id__in=ids)
        .filter(_role_permissions("permission__"))
        .values_list("user_id", "permission__codename")
    )
    for user_id, codename in [*through_groups.order_by(), *through_direct.order_by()]:
        held[user_id].add(codenames[codename])
    for user in users:
        if user.is_active and user.is_superuser:
            held[user.pk] = set(PERSON_ROLES)
    return {user_id: frozenset(roles) for user_id, roles in held.items()}
