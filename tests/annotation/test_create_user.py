"""The create_user command: accounts with roles, passwords and API tokens."""

import io
import re

import pytest
from django.contrib.auth import get_user_model
from django.contrib.auth.models import Group
from django.core.management import CommandError, call_command

from annotation.models import ApiToken, ReaderProfile, Role, Subspecialty, TokenScope
from annotation.roles import ROLE_GROUP_NAMES, has_role

User = get_user_model()


def _run(*args: str, stdin: str | None = None) -> str:
    out = io.StringIO()
    kwargs = {"stdin": io.StringIO(stdin)} if stdin is not None else {}
    call_command("create_user", *args, stdout=out, **kwargs)
    return out.getvalue()


def _roles(user) -> set[str]:
    user = User.objects.get(pk=user.pk)  # permissions are cached per user object
    return {role for role in Role if has_role(user, role)}


def test_it_creates_a_reader_with_a_profile_and_a_generated_password(db):
    out = _run("alice", "--role", "reader", "--subspecialty", "cardiothoracic")

    alice = User.objects.get(username="alice")
    assert list(alice.groups.values_list("name", flat=True)) == ["Reader"]
    assert alice.reader_profile.subspecialty == Subspecialty.CARDIOTHORACIC
    assert "Created alice (reader)." in out
    password = re.search(r"^Password: (\S+)$", out, re.MULTILINE).group(1)
    assert len(password) >= 12
    assert alice.check_password(password)
    assert _roles(alice) == {Role.READER}


def test_it_gives_several_roles(db):
    _run("bob", "--role", "reader", "--role", "adjudicator", "--role", "coordinator")

    bob = User.objects.get(username="bob")
    assert set(bob.groups.values_list("name", flat=True)) == {"Reader", "Adjudicator", "Coordinator"}
    assert _roles(bob) == {Role.READER, Role.ADJUDICATOR, Role.COORDINATOR}
    assert ReaderProfile.objects.get(user=bob).subspecialty == Subspecialty.GENERAL


def test_a_coordinator_or_data_manager_gets_no_reader_profile(db):
    _run("carol", "--role", "coordinator", "--role", "data_manager")

    carol = User.objects.get(username="carol")
    assert _roles(carol) == {Role.COORDINATOR, Role.DATA_MANAGER}
    assert not ReaderProfile.objects.filter(user=carol).exists()


def test_it_reads_the_password_from_stdin(db):
    out = _run("dave", "--role", "data_manager", "--password-stdin", stdin="a long passphrase of words\n")

    dave = User.objects.get(username="dave")
    assert dave.check_password("a long passphrase of words")
    assert "Password:" not in out


@pytest.mark.parametrize("password", ["password", "short", "12345678901234", "evelynrossi1", ""])
def test_it_rejects_a_weak_password_and_creates_nothing(db, password):
    with pytest.raises(CommandError, match="Password rejected"):
        _run("evelynrossi", "--role", "reader", "--password-stdin", stdin=password + "\n")

    assert not User.objects.filter(username="evelynrossi").exists()
    assert not ReaderProfile.objects.exists()


def test_it_rejects_a_weak_password_for_an_existing_user_and_keeps_the_old_one(db):
    _run("frank", "--role", "reader", "--password-stdin", stdin="an excellent passphrase\n")

    with pytest.raises(CommandError, match="Password rejected"):
        _run("frank", "--role", "coordinator", "--password-stdin", stdin="password\n")

    frank = User.objects.get(username="frank")
    assert frank.check_password("an excellent passphrase")
    assert _roles(frank) == {Role.READER}


def test_it_refuses_an_unknown_role(db):
    with pytest.raises(CommandError, match="invalid choice"):
        _run("gina", "--role", "admin")

    assert not User.objects.filter(username="gina").exists()


def test_it_prints_an_api_token_with_all_the_persons_roles(db):
    out = _run("hank", "--role", "coordinator", "--token")

    token = ApiToken.objects.get(user__username="hank")
    key = out.split("API token: ")[1].strip()
    assert (token.name, token.scope, token.digest) == ("Command line", TokenScope.ALL, ApiToken.digest_of(key))
    assert key not in str(list(ApiToken.objects.values_list()))  # only its digest is kept


def test_a_readers_token_is_for_reading(db):
    _run("hank", "--role", "reader", "--subspecialty", "general", "--token", "laptop")

    assert ApiToken.objects.get(user__username="hank").scope == TokenScope.READING


def test_running_again_makes_another_token_only_under_another_name(db):
    first = _run("hank", "--role", "coordinator", "--token")
    with pytest.raises(CommandError, match='already has a token named "Command line": choose another name'):
        _run("hank", "--role", "coordinator", "--token")
    second = _run("hank", "--role", "coordinator", "--token", "backup script")

    assert first.split("API token: ")[1] != second.split("API token: ")[1]
    assert sorted(ApiToken.objects.values_list("name", flat=True)) == ["Command line", "backup script"]


def test_running_again_adds_roles_without_duplicating_anything(db):
    _run("ida", "--role", "reader", "--subspecialty", "general", "--password-stdin", stdin="the first passphrase\n")

    out = _run("ida", "--role", "reader", "--role", "adjudicator", "--subspecialty", "neuroradiology")

    ida = User.objects.get(username="ida")
    assert "Updated ida (reader, adjudicator)." in out
    assert "Password:" not in out
    assert ida.check_password("the first passphrase")
    assert User.objects.filter(username="ida").count() == 1
    assert ida.groups.count() == 2
    assert Group.objects.count() == len(ROLE_GROUP_NAMES)
    assert ReaderProfile.objects.filter(user=ida).count() == 1
    assert ida.reader_profile.subspecialty == Subspecialty.NEURORADIOLOGY
    assert _roles(ida) == {Role.READER, Role.ADJUDICATOR}


def test_has_role_follows_the_groups(db):
    _run("jack", "--role", "reader")
    jack = User.objects.get(username="jack")
    assert _roles(jack) == {Role.READER}

    jack.groups.add(Group.objects.get(name=ROLE_GROUP_NAMES[Role.COORDINATOR]))
    assert _roles(jack) == {Role.READER, Role.COORDINATOR}

    jack.groups.clear()
    assert _roles(jack) == set()


def test_has_role_is_false_for_an_inactive_user(db):
    _run("kim", "--role", "coordinator")
    User.objects.filter(username="kim").update(is_active=False)

    assert _roles(User.objects.get(username="kim")) == set()
