"""Roles are Django groups, each granting one permission; a user may hold several."""

from django.contrib.auth.models import AbstractBaseUser, AnonymousUser, Group, Permission
from django.db.models import Q

from annotation.models import ReaderProfile, Role, Subspecialty

ROLE_PERMISSIONS: dict[str, str] = {
    Role.READER: "annotation.read_examples",
    Role.ADJUDICATOR: "annotation.adjudicate_examples",
    Role.COORDINATOR: "annotation.coordinate_study",
    Role.DATA_MANAGER: "annotation.build_release",
}

ROLE_GROUP_NAMES: dict[str, str] = {role.value: role.label for role in Role}


ROLE_CACHE = "_readingroom_roles"


def has_role(user: AbstractBaseUser | AnonymousUser, role: str) -> bool:
    return role in user_roles(user)


def user_roles(user: AbstractBaseUser | AnonymousUser) -> frozenset[str]:
    """The roles a user holds, read in one query and kept on the user object for the request.

    Equivalent to asking has_perm for each role's permission (active superusers hold every
    role), but one query instead of has_perm's two, on every request of every reader.
    """
    if not (user.is_authenticated and user.is_active):
        return frozenset()
    if user.is_superuser:
        return frozenset(ROLE_PERMISSIONS)
    cached = user.__dict__.get(ROLE_CACHE)
    if cached is None:
        codenames = {codename.split(".")[1]: role for role, codename in ROLE_PERMISSIONS.items()}
        granted = (
            Permission.objects.filter(
                Q(group__in=user.groups.all()) | Q(user=user),
                content_type__app_label="annotation",
                codename__in=codenames,
            )
            .values_list("codename", flat=True)
            .order_by()
        )
        cached = user.__dict__[ROLE_CACHE] = frozenset(codenames[codename] for codename in granted)
    return cached


def ensure_role_groups() -> None:
    """Create the role groups with their permissions; safe to call any number of times."""
    for role, codename in ROLE_PERMISSIONS.items():
        group, _ = Group.objects.get_or_create(name=ROLE_GROUP_NAMES[role])
        app_label, perm_codename = codename.split(".")
        permission = Permission.objects.get(content_type__app_label=app_label, codename=perm_codename)
        group.permissions.add(permission)


def grant_role(user: AbstractBaseUser, role: str, *, subspecialty: str | None = None) -> None:
    """Put a user in a role's group. Readers and adjudicators also get a profile."""
    ensure_role_groups()
    user.groups.add(Group.objects.get(name=ROLE_GROUP_NAMES[role]))
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
