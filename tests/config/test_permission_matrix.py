"""Who may open what: every URL of the URLconf, HTML and API, for every kind of user.

Each route (and, for the API, each method it answers) has an entry in MATRIX; a route without
one fails test_every_route_has_an_entry, so a new view cannot be forgotten. Every entry is
requested by an anonymous visitor, a user with no role, each role alone and a reader who is also
a coordinator, on an object they may see and, where the URL names one, on an object they may
not see:

- anonymous: the login page (HTML, 302 to /accounts/login/?next=...) or 401 (API);
- logged in without the role: 403;
- with the role, an object that is theirs or their role's to see: the entry's answer;
- with the role, someone else's object (another reader's assignment, another adjudicator's
  adjudication, another study's example, a study they do not read in): 404, exactly like an
  object that does not exist;
- a coordinator who also reads, on a pair they have yet to rate: 403 (consensus.conflicts).

An automated judge is a role too: it reads through the reader API only (from its own queue), and
every page is refused to it.

A refusal writes nothing: every statement a refused request sends is watched (tests/writes.py).
Each request runs in a savepoint that is rolled back, so every user meets the same world.
"""

import io
import uuid
import zipfile
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import parse_qs, urlsplit

import pytest
from axes.models import AccessAttempt
from django.conf import settings
from django.contrib.admin import site as admin_site
from django.db import transaction
from django.test import Client, override_settings
from django.urls import URLPattern, URLResolver, get_resolver, resolve
from rest_framework.views import APIView

from annotation.guide import confirm_guide, publish_guide
from annotation.models import (
    Assignment,
    CandidatePair,
    Dataset,
    Example,
    MemberRole,
    OriginalReport,
    RatingChoice,
    ReportType,
    Role,
    Study,
    StudyMember,
    Task,
    TokenScope,
)
from annotation.practice import import_practice_items, next_practice, show_practice
from annotation.tokens import issue_token
from consensus.assignment import assign_example
from consensus.models import Adjudication
from consensus.services import show_adjudication, show_assignment
from exports.models import Release, ReleaseStatus
from judges.models import JudgeRead
from judges.services import enrol_judge, show_judge_read
from tests.factories import csv_bytes, csv_row, make_pair, make_reading_study, make_study, make_user, rate
from tests.module_data import rolled_back
from tests.writes import statements_writing

pytestmark = pytest.mark.django_db

ANONYMOUS = "anonymous"
NO_ROLE = "no role"
READER = "reader"
ADJUDICATOR = "adjudicator"
COORDINATOR = "coordinator"
DATA_MANAGER = "data manager"
JUDGE = "automated judge"
BOTH = "reader and coordinator"
KINDS = (ANONYMOUS, NO_ROLE, READER, ADJUDICATOR, COORDINATOR, DATA_MANAGER, JUDGE, BOTH)
LOGGED_IN = frozenset(KINDS) - {ANONYMOUS}
READERS = frozenset({READER, BOTH})
# The reader API also serves automated judges, from their own queue (judges.api).
READERS_AND_JUDGES = READERS | {JUDGE}
COORDINATORS = frozenset({COORDINATOR, BOTH})
COORDINATORS_AND_DATA_MANAGERS = COORDINATORS | {DATA_MANAGER}
NOBODY: frozenset[str] = frozenset()

ROLES_OF = {
    NO_ROLE: (),
    READER: (Role.READER,),
    ADJUDICATOR: (Role.ADJUDICATOR,),
    COORDINATOR: (Role.COORDINATOR,),
    DATA_MANAGER: (Role.DATA_MANAGER,),
    JUDGE: (Role.JUDGE,),
    BOTH: (Role.READER, Role.COORDINATOR),
}
UNKNOWN = "6f1c2a4e-0d5b-4c8e-9a7f-3b2d1e0c9a8b"
# The original report a rewrites file refers to (stored in the world, so a refused upload changes nothing).
REWRITTEN_STUDY_ID = "50100000"
LOCKED_OUT = "locked-out"


# --- The world every request meets ----------------------------------------------------------------


def _examples(pair: CandidatePair) -> dict[str, Example]:
    return {
        "original": pair.examples.get(task=Task.REALISM, report_type=ReportType.ORIGINAL),
        "alternative": pair.examples.get(task=Task.REALISM, report_type=ReportType.ALTERNATIVE),
        "equivalence": pair.examples.get(task=Task.EQUIVALENCE),
    }


@dataclass
class World:
    users: dict[str, object]
    study: Study
    objects: dict[str, object] = field(default_factory=dict)

    def __getitem__(self, name: str):
        return self.objects[name]

    def id(self, name: str) -> str:
        return str(self.objects[name].public_id)


@pytest.fixture(scope="module")
def world(django_db_setup, django_db_blocker, tmp_path_factory):
    """Built once for the module and rolled back after it; each request runs in a savepoint."""
    folder = tmp_path_factory.mktemp("matrix")
    with (
        override_settings(RELEASES_DIR=folder / "releases", RESULTS_DIR=folder / "results"),
        rolled_back(django_db_blocker),
    ):
        yield _build_world()


def _build_world() -> World:
    """Study s1 with two pairs. The reader and the reader-coordinator each have an open read: the
    reader on pair two, the reader-coordinator on pair one (so pair one is hidden from them on the
    coordinator's pages). Other readers hold reads and ratings on both pairs; each adjudicator has
    an open adjudication; a second study s2 has an example, a read and a rating of its own; s1 has a
    built release (its zip on disk) and a failed one.

    s1 and s2 have a reader guide, which the reader, the reader-coordinator and the adjudicator
    confirmed in s1 (so their pages of s1 open without a detour to the guide). A third study s3
    asks for one practice item per task: the reader, the reader-coordinator and another reader each
    have a practice item open there. The automated judge reads Task 2 of s1 and has one read open;
    another judge is enrolled nowhere. An account is locked out after failed log-ins."""
    study, others, adjudicators = make_reading_study(pairs=2, readers=4, adjudicators=2, assign=False, slug="s1")
    users = {kind: make_user(*roles, username=kind.replace(" ", "-")) for kind, roles in ROLES_OF.items()}
    users[ADJUDICATOR] = adjudicators[0]
    for kind in (READER, BOTH):
        StudyMember.objects.create(study=study, user=users[kind], role=MemberRole.READER)
    coordinator = make_user(Role.COORDINATOR)
    r0, r1, r2, r3 = others
    one, two = (_examples(p) for p in CandidatePair.objects.filter(study=study, sampled=True).order_by("pk"))

    def give(example: Example, reader) -> Assignment:
        assign_example(example.public_id, reader, actor=coordinator)
        return example.assignments.get(reader=reader)

    w = World(users=users, study=study)
    w.objects["own read"] = give(two["equivalence"], users[READER])
    w.objects["own read of both"] = give(one["original"], users[BOTH])
    w.objects["open read"] = give(two["equivalence"], r1)
    w.objects["open read in pair one"] = give(one["original"], r0)
    w.objects["someone else's read"] = give(two["alternative"], r2)
    w.objects["rating"] = rate(give(two["original"], r0), RatingChoice.REALISTIC, "").annotation
    w.objects["rating in pair one"] = rate(give(one["alternative"], r1), RatingChoice.REALISTIC, "").annotation
    w.objects["example"] = two["original"]
    w.objects["example in pair one"] = one["equivalence"]
    w.objects["free reader"] = r3
    w.objects["newcomer"] = make_user(Role.READER)
    for name in ("own read", "own read of both"):
        show_assignment(Assignment.objects.select_related("example__study").get(pk=w[name].pk))
    w.objects["member"] = r0
    w.objects["own adjudication"] = Adjudication.objects.create(
        example=two["alternative"], adjudicator=adjudicators[0], task=Task.REALISM
    )
    w.objects["someone else's adjudication"] = Adjudication.objects.create(
        example=one["alternative"], adjudicator=adjudicators[1], task=Task.REALISM
    )
    show_adjudication(w["own adjudication"])  # decided only once opened, like a read

    elsewhere, _, _ = make_reading_study(pairs=1, readers=2, adjudicators=0, keep_versions_apart=False, slug="s2")
    other_example = Example.objects.filter(study=elsewhere, task=Task.EQUIVALENCE).get()
    w.objects["other study's example"] = other_example
    w.objects["other study's read"] = other_example.assignments.order_by("slot").first()
    w.objects["other study's rating"] = rate(
        other_example.assignments.order_by("slot").last(), RatingChoice.EQUIVALENT, ""
    )
    w.objects["other study's rating"] = w.objects["other study's rating"].annotation

    built = Release.objects.create(
        study=study,
        requested_by=users[DATA_MANAGER],
        version="1.0.0",
        license_text="CC0",
        status=ReleaseStatus.DONE,
        progress=100,
    )
    releases = Path(settings.RELEASES_DIR)
    releases.mkdir(parents=True)
    zip_bytes = io.BytesIO()
    with zipfile.ZipFile(zip_bytes, "w") as archive:
        archive.writestr(f"{built.root_folder}/README.md", "readme")
    (releases / f"{built.public_id}.zip").write_bytes(zip_bytes.getvalue())
    Release.objects.filter(pk=built.pk).update(zip_path=f"{built.public_id}.zip")
    w.objects["built release"] = built
    w.objects["failed release"] = Release.objects.create(
        study=study,
        requested_by=users[DATA_MANAGER],
        version="1.0.1",
        license_text="CC0",
        status=ReleaseStatus.FAILED,
        error="Disk full.",
    )
    unsampled = make_study("s0")
    make_pair(unsampled)
    w.objects["unsampled study"] = unsampled

    for guided in (study, elsewhere):
        publish_guide(guided, "# How to read\n\nRate what you see.", author=coordinator)
    for kind in (READER, BOTH, ADJUDICATOR):
        confirm_guide(users[kind], study, 1)

    practising = make_study("s3", practice_items_required=1)
    import_practice_items(practising, PRACTICE_CSV, filename="practice.csv", actor=coordinator)
    for name, reader in (
        ("own practice", users[READER]),
        ("own practice of both", users[BOTH]),
        ("someone else's practice", r0),
    ):
        StudyMember.objects.create(study=practising, user=reader, role=MemberRole.READER)
        w.objects[name] = show_practice(next_practice(reader, practising, Task.EQUIVALENCE))

    enrol_judge(study, judge=users[JUDGE], tasks=[Task.EQUIVALENCE], actor=coordinator)
    w.objects["judge's read"] = show_judge_read(JudgeRead.objects.filter(judge=users[JUDGE]).order_by("queue_order")[0])
    w.objects["spare judge"] = make_user(Role.JUDGE)

    OriginalReport.objects.create(
        dataset=Dataset.objects.get(key="mimic-cxr"),
        source_study_id=REWRITTEN_STUDY_ID,
        findings="Lungs are clear.",
        impression="Normal.",
        content_hash="0" * 32,
    )
    for kind, user in users.items():
        w.objects[f"token of {kind}"] = issue_token(user, name="matrix", scope=TokenScope.READING)[0]
    w.objects["someone else's token"] = issue_token(r0, name="matrix", scope=TokenScope.READING)[0]

    make_user(username=LOCKED_OUT)
    AccessAttempt.objects.create(
        username=LOCKED_OUT,
        ip_address="10.0.0.1",
        user_agent="test",
        http_accept="*/*",
        path_info="/accounts/login/",
        get_data="",
        post_data="",
        failures_since_start=settings.AXES_FAILURE_LIMIT,
    )
    return w


# --- The matrix -------------------------------------------------------------------------------------


PathOf = Callable[[World, str], str]


@dataclass(frozen=True)
class Entry:
    """One route and method. path gives the URL of an object the user may see (per kind: a reader's
    own read is theirs); other, of one they may not see (answered other_status); conflicted, of a
    pair the reader-coordinator still has to rate (403 for them, conflicted_ok for a coordinator)."""

    allowed: frozenset[str]
    ok: int | dict[str, int]
    path: PathOf
    other: PathOf | None = None
    other_status: int = 404
    conflicted: PathOf | None = None
    conflicted_ok: int | None = None
    data: Callable[[World, str, str], dict] = lambda w, kind, variant: {}
    multipart: bool = False
    # An anonymous htmx request is sent to the login page with HX-Redirect (role_required's pages).
    htmx_login: bool = True
    # A page for people under /api/ (the API's documentation): anonymous, the login page, not a 401.
    page: bool = False

    def ok_for(self, kind: str) -> int:
        return self.ok[kind] if isinstance(self.ok, dict) else self.ok


def _fixed(url: str) -> PathOf:
    return lambda w, kind: url


def _s1(rest: str) -> PathOf:
    return lambda w, kind: f"/studies/s1/{rest}"


def _api_s1(rest: str) -> PathOf:
    return lambda w, kind: f"/api/studies/s1/{rest}"


def _own(w: World, kind: str) -> Assignment | JudgeRead:
    if kind == JUDGE:
        return w["judge's read"]
    return w["own read of both" if kind == BOTH else "own read"]


def _own_practice(w: World, kind: str) -> str:
    return w.id("own practice of both" if kind == BOTH else "own practice")


def _own_read(w: World, kind: str) -> str:
    return str(_own(w, kind).public_id)


def _own_token(w: World, kind: str) -> str:
    return w.id(f"token of {READER if kind == ANONYMOUS else kind}")


def _rating(w: World, kind: str, variant: str) -> dict:
    # A rating of the task of the reader's own read (anyone else is refused before it is read).
    rating = RatingChoice.REALISTIC if _own(w, kind).example.task == Task.REALISM else RatingChoice.EQUIVALENT
    return {"rating": rating, "rationale": "Reads as a report.", "form_token": str(uuid.uuid4())}


def _with_id(template: str, name: str) -> PathOf:
    return lambda w, kind: template.format(w.id(name))


def _username(name: str) -> Callable[[World, str, str], dict]:
    return lambda w, kind, variant: {"reader": w[name].username}


def _adjudication_rating(w: World, kind: str, variant: str) -> dict:
    return {"rating": RatingChoice.MINOR_ISSUES, "rationale": "Settled.", "form_token": str(uuid.uuid4())}


def _file(name: str, data: bytes) -> dict:
    upload = io.BytesIO(data)
    upload.name = name
    return {"file": upload}


def _import(w: World, kind: str, variant: str) -> dict:
    return _file("pairs.csv", csv_bytes([csv_row(study_id="99000001")]))


def _rewrites(w: World, kind: str, variant: str) -> dict:
    row = {"dataset": "mimic-cxr", "study_id": REWRITTEN_STUDY_ID, "reref_variation": "hedging", "verdict": "accepted"}
    row |= {"alternative_findings": "The lungs are probably clear.", "alternative_impression": "Likely normal."}
    return _file("rewrites.csv", csv_bytes([row], columns=list(row)))


PRACTICE_CSV = (
    b"original_findings,original_impression,alternative_findings,alternative_impression,task2_rating,task2_explanation\r\n"
    b"Clear.,Normal.,Lungs clear.,No acute process.,equivalent,Same content.\r\n"
)


def _practice(w: World, kind: str, variant: str) -> dict:
    return _file("practice.csv", PRACTICE_CSV)


def _practice_rating(w: World, kind: str, variant: str) -> dict:
    return {"rating": RatingChoice.EQUIVALENT, "rationale": "Same content.", "form_token": str(uuid.uuid4())}


def _metric_scores(w: World, kind: str, variant: str) -> dict:
    pair = CandidatePair.objects.filter(study=w.study, sampled=True).order_by("pk").first()
    data = "dataset,study_id,reref_variation,metric,score\r\n"
    data += f"{pair.dataset.key},{pair.source_study_id},{pair.variation.key},bertscore,0.9\r\n"
    return _file("scores.csv", data.encode())


def _guide_text(w: World, kind: str, variant: str) -> dict:
    return {"text": "# How to read\n\nRate what you see, then say why."}


def _confirm_guide(w: World, kind: str, variant: str) -> dict:
    # The same body for the study the user may not see: s2 has a guide too, but it is not theirs.
    return {"study": "s2" if variant == "other" else "s1", "version": 1}


MATRIX: dict[tuple[str, str], Entry] = {
    # Signing in and out, open to all.
    ("login", "get"): Entry(frozenset(KINDS), 200, _fixed("/accounts/login/")),
    ("logout", "post"): Entry(frozenset(KINDS), 302, _fixed("/accounts/logout/")),
    # One's own password: changed when logged in (Django's login_required: no htmx swap), reset by anyone.
    ("password_change", "get"): Entry(LOGGED_IN, 200, _fixed("/accounts/password/change/"), htmx_login=False),
    ("password_change", "post"): Entry(LOGGED_IN, 200, _fixed("/accounts/password/change/"), htmx_login=False),
    ("password_change_done", "get"): Entry(LOGGED_IN, 200, _fixed("/accounts/password/change/done/"), htmx_login=False),
    ("password_reset", "get"): Entry(frozenset(KINDS), 200, _fixed("/accounts/password/reset/")),
    ("password_reset", "post"): Entry(frozenset(KINDS), 200, _fixed("/accounts/password/reset/")),
    ("password_reset_done", "get"): Entry(frozenset(KINDS), 200, _fixed("/accounts/password/reset/sent/")),
    ("password_reset_confirm", "get"): Entry(frozenset(KINDS), 200, _fixed("/accounts/password/reset/MQ/bad-token/")),
    ("password_reset_complete", "get"): Entry(frozenset(KINDS), 200, _fixed("/accounts/password/reset/done/")),
    # The home page sends each user to their work.
    ("favicon", "get"): Entry(frozenset(KINDS), 301, _fixed("/favicon.ico")),
    # The home page sends each user to their work (a data manager to the releases); without a
    # role (or as a judge, which reads through the API only) it says whom to ask.
    ("home", "get"): Entry(
        LOGGED_IN,
        {NO_ROLE: 200, JUDGE: 200} | dict.fromkeys(READERS | {ADJUDICATOR, DATA_MANAGER} | COORDINATORS, 302),
        _fixed("/"),
        htmx_login=False,  # Django's login_required: the home page is never swapped in
    ),
    # Everyone's own settings (theme, shortcuts).
    ("preferences", "get"): Entry(LOGGED_IN, 200, _fixed("/settings/"), htmx_login=False),
    ("preferences", "post"): Entry(
        LOGGED_IN,
        302,
        _fixed("/settings/"),
        data=lambda w, kind, variant: {"theme": "dark", "single_key_shortcuts": "on"},
        htmx_login=False,
    ),
    # One's own API tokens, on the Settings page: made, and revoked (someone else's is not found).
    ("token_create", "post"): Entry(
        LOGGED_IN,
        302,
        _fixed("/settings/tokens/"),
        data=lambda w, kind, variant: {"name": "a new token", "scope": TokenScope.READING},
        htmx_login=False,
    ),
    ("token_revoke", "post"): Entry(
        LOGGED_IN,
        302,
        lambda w, kind: f"/settings/tokens/{_own_token(w, kind)}/revoke/",
        other=_with_id("/settings/tokens/{}/revoke/", "someone else's token"),
        htmx_login=False,
    ),
    # Everyone's API tokens, for a coordinator to revoke any of them.
    ("api_tokens", "get"): Entry(COORDINATORS, 200, _fixed("/people/tokens/")),
    ("api_token_revoke", "post"): Entry(
        COORDINATORS,
        302,
        _with_id("/people/tokens/{}/revoke/", "someone else's token"),
        other=_fixed(f"/people/tokens/{UNKNOWN}/revoke/"),
    ),
    # Accounts locked out after failed log-ins, and unlocking one (coordinators).
    ("locked_logins", "get"): Entry(COORDINATORS, 200, _fixed("/people/locked/")),
    ("locked_logins", "post"): Entry(
        COORDINATORS, 302, _fixed("/people/locked/"), data=lambda w, kind, variant: {"username": LOCKED_OUT}
    ),
    # The coordinator's pages: studies, import, sample.
    ("study_list", "get"): Entry(COORDINATORS, 200, _fixed("/studies/")),
    ("study_detail", "get"): Entry(COORDINATORS, 200, _s1(""), other=_fixed("/studies/nope/")),
    ("example_pairs_file", "get"): Entry(COORDINATORS, 200, _fixed("/studies/example_pairs.csv")),
    ("study_import", "post"): Entry(
        COORDINATORS, 200, _s1("import/"), other=_fixed("/studies/nope/import/"), data=_import
    ),
    ("study_import_rewrites", "post"): Entry(
        COORDINATORS, 200, _s1("rewrites/"), other=_fixed("/studies/nope/rewrites/"), data=_rewrites
    ),
    ("study_sample", "post"): Entry(
        COORDINATORS,
        200,
        _fixed("/studies/s0/sample/"),
        other=_fixed("/studies/nope/sample/"),
        data=lambda w, kind, variant: {"per_variation": 1, "seed": 1},
    ),
    ("study_undo_window", "post"): Entry(
        COORDINATORS,
        200,
        _s1("undo-window/"),
        other=_fixed("/studies/nope/undo-window/"),
        data=lambda w, kind, variant: {"undo_window_seconds": 60},
    ),
    ("study_margins", "post"): Entry(
        COORDINATORS,
        200,
        _s1("margins/"),
        other=_fixed("/studies/nope/margins/"),
        data=lambda w, kind, variant: {"noninferiority_margin": "10", "equivalence_margin": "5"},
    ),
    ("study_license", "post"): Entry(
        COORDINATORS,
        200,
        _s1("license/"),
        other=_fixed("/studies/nope/license/"),
        data=lambda w, kind, variant: {"license_text": "CC BY 4.0\n"},
    ),
    # The coordinator's reader guide and practice round.
    ("study_guide", "get"): Entry(COORDINATORS, 200, _s1("guide/"), other=_fixed("/studies/nope/guide/")),
    ("study_guide", "post"): Entry(
        COORDINATORS, 302, _s1("guide/"), other=_fixed("/studies/nope/guide/"), data=_guide_text
    ),
    ("study_practice_import", "post"): Entry(
        COORDINATORS, 200, _s1("practice/import/"), other=_fixed("/studies/nope/practice/import/"), data=_practice
    ),
    ("study_practice_settings", "post"): Entry(
        COORDINATORS,
        302,
        _s1("practice/settings/"),
        other=_fixed("/studies/nope/practice/settings/"),
        data=lambda w, kind, variant: {"practice_items_required": 2},
    ),
    ("study_practice_skip", "post"): Entry(
        COORDINATORS,
        302,
        _s1("practice/skip/"),
        other=_fixed("/studies/nope/practice/skip/"),
        data=lambda w, kind, variant: {"username": w["member"].username, "skip": "on"},
    ),
    # The reading room.
    ("reader_home", "get"): Entry(READERS | {ADJUDICATOR}, 200, _fixed("/read/")),
    # The guide of a study the user reads or adjudicates in (s2's guide is not theirs).
    ("reader_guide", "get"): Entry(
        READERS | {ADJUDICATOR}, 200, _fixed("/read/s1/guide/"), other=_fixed("/read/s2/guide/")
    ),
    ("reader_guide", "post"): Entry(
        READERS | {ADJUDICATOR},
        302,
        _fixed("/read/s1/guide/"),
        other=_fixed("/read/s2/guide/"),
        data=lambda w, kind, variant: {"version": 1},
    ),
    ("practice_next", "get"): Entry(
        READERS, 302, _fixed("/read/s3/equivalence/practice/"), other=_fixed("/read/s2/equivalence/practice/")
    ),
    ("practice_page", "get"): Entry(
        READERS,
        200,
        lambda w, kind: f"/read/p/{_own_practice(w, kind)}/",
        other=_with_id("/read/p/{}/", "someone else's practice"),
    ),
    ("practice_page", "post"): Entry(
        READERS,
        200,
        lambda w, kind: f"/read/p/{_own_practice(w, kind)}/",
        other=_with_id("/read/p/{}/", "someone else's practice"),
        data=_practice_rating,
    ),
    ("adjudication_next", "get"): Entry(
        frozenset({ADJUDICATOR}), 302, _fixed("/adjudicate/s1/next/"), other=_fixed("/adjudicate/s2/next/")
    ),
    ("reading_next", "get"): Entry(
        READERS, 302, _fixed("/read/s1/equivalence/next/"), other=_fixed("/read/s2/equivalence/next/")
    ),
    ("reading_page", "get"): Entry(
        READERS,
        200,
        lambda w, kind: f"/read/a/{_own_read(w, kind)}/",
        other=_with_id("/read/a/{}/", "someone else's read"),
    ),
    ("reading_page", "post"): Entry(
        READERS,
        302,
        lambda w, kind: f"/read/a/{_own_read(w, kind)}/",
        other=_with_id("/read/a/{}/", "someone else's read"),
        data=_rating,
    ),
    # Taking back one's last rating: nothing in the world is in its undo window (the factories' studies
    # have undo off), so the answer is the refusal with its reason: past the permission checks.
    ("reading_undo", "post"): Entry(READERS, 302, _fixed("/read/undo/")),
    ("adjudication_page", "get"): Entry(
        frozenset({ADJUDICATOR}),
        200,
        _with_id("/adjudicate/{}/", "own adjudication"),
        other=_with_id("/adjudicate/{}/", "someone else's adjudication"),
    ),
    ("adjudication_page", "post"): Entry(
        frozenset({ADJUDICATOR}),
        302,
        _with_id("/adjudicate/{}/", "own adjudication"),
        other=_with_id("/adjudicate/{}/", "someone else's adjudication"),
        data=_adjudication_rating,
    ),
    # The coordinator's view of reading.
    ("study_progress", "get"): Entry(COORDINATORS, 200, _s1("progress/"), other=_fixed("/studies/nope/progress/")),
    ("study_unrouted", "get"): Entry(COORDINATORS, 200, _s1("unrouted/"), other=_fixed("/studies/nope/unrouted/")),
    ("study_readers", "get"): Entry(COORDINATORS, 200, _s1("readers/"), other=_fixed("/studies/nope/readers/")),
    ("study_examples", "get"): Entry(COORDINATORS, 200, _s1("examples/"), other=_fixed("/studies/nope/examples/")),
    ("reader_detail", "get"): Entry(
        COORDINATORS,
        200,
        lambda w, kind: f"/studies/s1/readers/{w['member'].username}/",
        other=lambda w, kind: f"/studies/s2/readers/{w['member'].username}/",
    ),
    ("study_add_member", "post"): Entry(
        COORDINATORS,
        200,
        _s1("members/"),
        other=_fixed("/studies/nope/members/"),
        data=lambda w, kind, variant: {"user": w["newcomer"].username, "role": MemberRole.READER},
    ),
    ("study_assign", "post"): Entry(COORDINATORS, 200, _s1("assign/"), other=_fixed("/studies/nope/assign/")),
    ("example_detail", "get"): Entry(
        COORDINATORS,
        200,
        _with_id("/studies/s1/examples/{}/", "example"),
        other=_with_id("/studies/s1/examples/{}/", "other study's example"),
        conflicted=_with_id("/studies/s1/examples/{}/", "example in pair one"),
    ),
    ("example_assign", "post"): Entry(
        COORDINATORS,
        200,
        _with_id("/studies/s1/examples/{}/assign/", "example"),
        other=_with_id("/studies/s1/examples/{}/assign/", "other study's example"),
        conflicted=_with_id("/studies/s1/examples/{}/assign/", "example in pair one"),
        data=_username("free reader"),
    ),
    ("assignment_withdraw", "post"): Entry(
        COORDINATORS,
        200,
        _with_id("/studies/s1/assignments/{}/withdraw/", "open read"),
        other=_with_id("/studies/s1/assignments/{}/withdraw/", "other study's read"),
        conflicted=_with_id("/studies/s1/assignments/{}/withdraw/", "open read in pair one"),
    ),
    ("assignment_reassign", "post"): Entry(
        COORDINATORS,
        200,
        _with_id("/studies/s1/assignments/{}/reassign/", "open read"),
        other=_with_id("/studies/s1/assignments/{}/reassign/", "other study's read"),
        conflicted=_with_id("/studies/s1/assignments/{}/reassign/", "open read in pair one"),
        data=_username("free reader"),
    ),
    ("annotation_void", "post"): Entry(
        COORDINATORS,
        200,
        _with_id("/studies/s1/annotations/{}/void/", "rating"),
        other=_with_id("/studies/s1/annotations/{}/void/", "other study's rating"),
        conflicted=_with_id("/studies/s1/annotations/{}/void/", "rating in pair one"),
        data=lambda w, kind, variant: {"reason": "Wrong report."},
    ),
    # The data manager's releases.
    ("release_index", "get"): Entry(frozenset({DATA_MANAGER}), 200, _fixed("/releases/")),
    ("release_list", "get"): Entry(
        frozenset({DATA_MANAGER}), 200, _s1("releases/"), other=_fixed("/studies/nope/releases/")
    ),
    ("release_download", "get"): Entry(
        frozenset({DATA_MANAGER}),
        200,
        _with_id("/releases/{}/download/", "built release"),
        other=_with_id("/releases/{}/download/", "failed release"),
    ),
    ("release_retry", "post"): Entry(
        frozenset({DATA_MANAGER}),
        302,
        _with_id("/releases/{}/retry/", "failed release"),
        other=_fixed(f"/releases/{UNKNOWN}/retry/"),
    ),
    ("release_delete", "post"): Entry(
        frozenset({DATA_MANAGER}),
        302,
        _with_id("/releases/{}/delete/", "failed release"),
        other=_fixed(f"/releases/{UNKNOWN}/delete/"),
    ),
    # Study results (not computed in this world: the page queues them, the files are not there yet).
    ("study_results", "get"): Entry(
        COORDINATORS_AND_DATA_MANAGERS, 200, _s1("results/"), other=_fixed("/studies/nope/results/")
    ),
    ("results_download", "get"): Entry(COORDINATORS_AND_DATA_MANAGERS, 404, _s1("results/download/")),
    ("results_figure", "get"): Entry(COORDINATORS_AND_DATA_MANAGERS, 404, _s1("results/figures/forest.svg")),
    ("results_table", "get"): Entry(COORDINATORS_AND_DATA_MANAGERS, 404, _s1("results/tables/agreement.csv")),
    # Importing metric scores is the coordinator's (the data manager only reads the results).
    ("results_metric_scores", "post"): Entry(
        COORDINATORS,
        302,
        _s1("results/metric-scores/"),
        other=_fixed("/studies/nope/results/metric-scores/"),
        data=_metric_scores,
    ),
    # Automated judges: the coordinator enrols them (a judge account enrolled nowhere yet).
    ("study_judges", "get"): Entry(COORDINATORS, 200, _s1("judges/"), other=_fixed("/studies/nope/judges/")),
    ("study_judges", "post"): Entry(
        COORDINATORS,
        302,
        _s1("judges/"),
        other=_fixed("/studies/nope/judges/"),
        data=lambda w, kind, variant: {"judge": w["spare judge"].username, "tasks": [Task.EQUIVALENCE]},
    ),
    # The API: studies, datasets, import and sample (coordinators).
    ("api-root", "get"): Entry(NOBODY, 200, _fixed("/api/")),
    ("schema", "get"): Entry(LOGGED_IN, 200, _fixed("/api/schema/")),
    ("api_docs", "get"): Entry(LOGGED_IN, 200, _fixed("/api/docs/"), page=True, htmx_login=False),
    ("study-list", "get"): Entry(COORDINATORS, 200, _fixed("/api/studies/")),
    ("study-list", "post"): Entry(
        COORDINATORS, 201, _fixed("/api/studies/"), data=lambda w, kind, variant: {"slug": "new", "name": "New"}
    ),
    ("study-detail", "get"): Entry(COORDINATORS, 200, _api_s1(""), other=_fixed("/api/studies/nope/")),
    ("study-imports", "post"): Entry(
        COORDINATORS, 201, _api_s1("imports/"), other=_fixed("/api/studies/nope/imports/"), data=_import, multipart=True
    ),
    ("study-sample", "post"): Entry(
        COORDINATORS,
        200,
        _fixed("/api/studies/s0/sample/"),
        other=_fixed("/api/studies/nope/sample/"),
        data=lambda w, kind, variant: {"per_variation": 1},
    ),
    ("study-summary", "get"): Entry(COORDINATORS, 200, _api_s1("summary/"), other=_fixed("/api/studies/nope/summary/")),
    ("study-pairs", "get"): Entry(COORDINATORS, 200, _api_s1("pairs/"), other=_fixed("/api/studies/nope/pairs/")),
    ("study-rewrites", "post"): Entry(
        COORDINATORS,
        201,
        _api_s1("rewrites/"),
        other=_fixed("/api/studies/nope/rewrites/"),
        data=_rewrites,
        multipart=True,
    ),
    ("study-guide", "get"): Entry(COORDINATORS, 200, _api_s1("guide/"), other=_fixed("/api/studies/nope/guide/")),
    ("study-guide", "post"): Entry(
        COORDINATORS, 201, _api_s1("guide/"), other=_fixed("/api/studies/nope/guide/"), data=_guide_text
    ),
    ("study-practice", "get"): Entry(
        COORDINATORS, 200, _api_s1("practice/"), other=_fixed("/api/studies/nope/practice/")
    ),
    ("study-practice", "post"): Entry(
        COORDINATORS,
        201,
        _api_s1("practice/"),
        other=_fixed("/api/studies/nope/practice/"),
        data=_practice,
        multipart=True,
    ),
    ("study-practice-settings", "post"): Entry(
        COORDINATORS,
        200,
        _api_s1("practice-settings/"),
        other=_fixed("/api/studies/nope/practice-settings/"),
        data=lambda w, kind, variant: {"practice_items_required": 2},
    ),
    ("dataset-list", "get"): Entry(COORDINATORS, 200, _fixed("/api/datasets/")),
    ("dataset-detail", "get"): Entry(
        COORDINATORS, 200, _fixed("/api/datasets/mimic-cxr/"), other=_fixed("/api/datasets/nope/")
    ),
    # The coordinator's API.
    ("api_study_progress", "get"): Entry(
        COORDINATORS, 200, _api_s1("progress/"), other=_fixed("/api/studies/nope/progress/")
    ),
    ("api_study_workload", "get"): Entry(
        COORDINATORS, 200, _api_s1("workload/"), other=_fixed("/api/studies/nope/workload/")
    ),
    ("api_study_unrouted", "get"): Entry(
        COORDINATORS, 200, _api_s1("unrouted/"), other=_fixed("/api/studies/nope/unrouted/")
    ),
    ("api_example_detail", "get"): Entry(
        COORDINATORS,
        200,
        _with_id("/api/studies/s1/examples/{}/", "example"),
        other=_with_id("/api/studies/s1/examples/{}/", "other study's example"),
        conflicted=_with_id("/api/studies/s1/examples/{}/", "example in pair one"),
    ),
    ("api_reader_detail", "get"): Entry(
        COORDINATORS,
        200,
        lambda w, kind: f"/api/studies/s1/readers/{w['member'].username}/",
        other=lambda w, kind: f"/api/studies/s2/readers/{w['member'].username}/",
    ),
    ("api_study_assign", "post"): Entry(
        COORDINATORS, 200, _api_s1("assign/"), other=_fixed("/api/studies/nope/assign/")
    ),
    ("api_study_members", "post"): Entry(
        COORDINATORS,
        201,
        _api_s1("members/"),
        other=_fixed("/api/studies/nope/members/"),
        data=lambda w, kind, variant: {"username": w["newcomer"].username, "role": MemberRole.READER},
    ),
    ("api_study_assignments", "post"): Entry(
        COORDINATORS,
        201,
        _api_s1("assignments/"),
        other=_fixed("/api/studies/nope/assignments/"),
        conflicted=_api_s1("assignments/"),
        data=lambda w, kind, variant: {
            "example": w.id("example in pair one" if variant == "conflicted" else "example"),
            "reader": w["free reader"].username,
        },
    ),
    ("api_assignment_withdraw", "post"): Entry(
        COORDINATORS,
        200,
        _with_id("/api/assignments/{}/withdraw/", "open read"),
        other=_fixed(f"/api/assignments/{UNKNOWN}/withdraw/"),
        conflicted=_with_id("/api/assignments/{}/withdraw/", "open read in pair one"),
    ),
    ("api_assignment_reassign", "post"): Entry(
        COORDINATORS,
        200,
        _with_id("/api/assignments/{}/reassign/", "open read"),
        other=_fixed(f"/api/assignments/{UNKNOWN}/reassign/"),
        conflicted=_with_id("/api/assignments/{}/reassign/", "open read in pair one"),
        data=_username("free reader"),
    ),
    ("api_annotation_void", "post"): Entry(
        COORDINATORS,
        200,
        _with_id("/api/annotations/{}/void/", "rating"),
        other=_fixed(f"/api/annotations/{UNKNOWN}/void/"),
        conflicted=_with_id("/api/annotations/{}/void/", "rating in pair one"),
        data=lambda w, kind, variant: {"reason": "Wrong report."},
    ),
    # Results (coordinators and data managers): the first request queues the computation.
    ("api_study_results", "get"): Entry(
        COORDINATORS_AND_DATA_MANAGERS, 202, _api_s1("results/"), other=_fixed("/api/studies/nope/results/")
    ),
    ("api_study_results", "post"): Entry(
        COORDINATORS_AND_DATA_MANAGERS, 202, _api_s1("results/"), other=_fixed("/api/studies/nope/results/")
    ),
    ("api_study_metric_scores", "post"): Entry(
        COORDINATORS,
        201,
        _api_s1("metric-scores/"),
        other=_fixed("/api/studies/nope/metric-scores/"),
        data=_metric_scores,
        multipart=True,
    ),
    # Automated judges (coordinators).
    ("api_study_judges", "get"): Entry(
        COORDINATORS, 200, _api_s1("judges/"), other=_fixed("/api/studies/nope/judges/")
    ),
    ("api_study_judges", "post"): Entry(
        COORDINATORS,
        201,
        _api_s1("judges/"),
        other=_fixed("/api/studies/nope/judges/"),
        data=lambda w, kind, variant: {"username": w["spare judge"].username, "tasks": [Task.EQUIVALENCE]},
    ),
    # The data manager's API.
    ("study-release-list", "get"): Entry(
        frozenset({DATA_MANAGER}), 200, _api_s1("releases/"), other=_fixed("/api/studies/nope/releases/")
    ),
    ("study-release-list", "post"): Entry(
        frozenset({DATA_MANAGER}),
        202,
        _api_s1("releases/"),
        other=_fixed("/api/studies/nope/releases/"),
        data=lambda w, kind, variant: {"license_text": "CC0", "version": "2.0.0"},
    ),
    ("release-detail", "get"): Entry(
        frozenset({DATA_MANAGER}),
        200,
        _with_id("/api/releases/{}/", "built release"),
        other=_fixed(f"/api/releases/{UNKNOWN}/"),
    ),
    ("release-detail", "delete"): Entry(
        frozenset({DATA_MANAGER}),
        200,
        _with_id("/api/releases/{}/", "failed release"),
        other=_fixed(f"/api/releases/{UNKNOWN}/"),
    ),
    ("release-download", "get"): Entry(
        frozenset({DATA_MANAGER}),
        200,
        _with_id("/api/releases/{}/download/", "built release"),
        other=_with_id("/api/releases/{}/download/", "failed release"),
    ),
    ("release-retry", "post"): Entry(
        frozenset({DATA_MANAGER}),
        202,
        _with_id("/api/releases/{}/retry/", "failed release"),
        other=_fixed(f"/api/releases/{UNKNOWN}/retry/"),
    ),
    # The reader's API, which automated judges use too (their own reads; nothing of the readers').
    ("reading-next", "get"): Entry(
        READERS_AND_JUDGES, 200, lambda w, kind: f"/api/reading/next/?task={_own(w, kind).example.task}"
    ),
    ("reading-progress", "get"): Entry(READERS_AND_JUDGES, 200, _fixed("/api/reading/progress/")),
    ("reading-detail", "get"): Entry(
        READERS_AND_JUDGES,
        200,
        lambda w, kind: f"/api/reading/{_own_read(w, kind)}/",
        other=_with_id("/api/reading/{}/", "someone else's read"),
    ),
    ("reading-rating", "post"): Entry(
        READERS_AND_JUDGES,
        201,
        lambda w, kind: f"/api/reading/{_own_read(w, kind)}/rating/",
        other=_with_id("/api/reading/{}/rating/", "someone else's read"),
        data=_rating,
    ),
    # Nothing to take back (a judge's ratings never are): 409 with the reason.
    ("reading-undo", "post"): Entry(READERS_AND_JUDGES, 409, _fixed("/api/reading/undo/")),
    # The adjudicator's API: the same adjudications as the page, theirs only.
    ("adjudication-next", "get"): Entry(frozenset({ADJUDICATOR}), 200, _fixed("/api/adjudications/next/")),
    ("adjudication-detail", "get"): Entry(
        frozenset({ADJUDICATOR}),
        200,
        _with_id("/api/adjudications/{}/", "own adjudication"),
        other=_with_id("/api/adjudications/{}/", "someone else's adjudication"),
    ),
    ("adjudication-decision", "post"): Entry(
        frozenset({ADJUDICATOR}),
        201,
        _with_id("/api/adjudications/{}/decision/", "own adjudication"),
        other=_with_id("/api/adjudications/{}/decision/", "someone else's adjudication"),
        data=_adjudication_rating,
    ),
    # The guide and practice round of a study the reader reads in (a judge reads in none: 404).
    ("reading-guide", "get"): Entry(
        READERS_AND_JUDGES,
        dict.fromkeys(READERS, 200) | {JUDGE: 404},
        _fixed("/api/reading/guide/?study=s1"),
        other=_fixed("/api/reading/guide/?study=s2"),
    ),
    ("reading-guide", "post"): Entry(
        READERS_AND_JUDGES,
        dict.fromkeys(READERS, 200) | {JUDGE: 404},
        _fixed("/api/reading/guide/"),
        other=_fixed("/api/reading/guide/"),
        data=_confirm_guide,
    ),
    ("reading-practice", "get"): Entry(
        READERS_AND_JUDGES,
        dict.fromkeys(READERS, 200) | {JUDGE: 404},
        _fixed("/api/reading/practice/?study=s3&task=equivalence"),
        other=_fixed("/api/reading/practice/?study=s2&task=equivalence"),
    ),
    ("reading-practice-rating", "post"): Entry(
        READERS_AND_JUDGES,
        dict.fromkeys(READERS, 201) | {JUDGE: 404},
        lambda w, kind: f"/api/reading/practice/{_own_practice(w, kind)}/rating/",
        other=_with_id("/api/reading/practice/{}/rating/", "someone else's practice"),
        data=_practice_rating,
    ),
}


# --- Running it ---------------------------------------------------------------------------------------


def _request(client: Client, method: str, path: str, entry: Entry, w: World, kind: str, variant: str, **headers):
    data = entry.data(w, kind, variant)
    call = getattr(client, method)
    if method == "get":
        return call(path, data, **headers)
    if path.startswith("/api/") and not entry.multipart:
        return call(path, data, content_type="application/json", **headers)
    return call(path, data, **headers)


def _expected(entry: Entry, kind: str, variant: str, api: bool) -> int | str:
    if kind == ANONYMOUS and ANONYMOUS not in entry.allowed:
        return 401 if api and not entry.page else "login"
    if kind not in entry.allowed:
        return 403
    if variant == "other":
        return entry.other_status
    if variant == "conflicted":
        return 403 if kind == BOTH else (entry.conflicted_ok or entry.ok_for(kind))
    return entry.ok_for(kind)


def _is_login_for(url: str, path: str) -> bool:
    """Whether url is the login page, bringing the user back to path afterwards."""
    parts = urlsplit(url)
    return parts.path == "/accounts/login/" and parse_qs(parts.query).get("next") == [path]


def _outcome(response, path: str) -> int | str:
    if response.status_code == 302 and _is_login_for(response["Location"], path):
        return "login"
    return response.status_code


@pytest.mark.parametrize(("name", "method"), list(MATRIX), ids=[f"{m.upper()} {n}" for n, m in MATRIX])
def test_the_permission_matrix_holds(world, name, method):
    entry = MATRIX[(name, method)]
    variants = {"own": entry.path, "other": entry.other, "conflicted": entry.conflicted}
    wrong = []
    for kind in KINDS:
        client = Client()
        if kind != ANONYMOUS:
            client.force_login(world.users[kind])
        for variant, path_of in variants.items():
            if path_of is None:
                continue
            path = path_of(world, kind)
            api = path.startswith("/api/")
            expected = _expected(entry, kind, variant, api)
            # Whether a refused request changed anything: every statement it sent that writes.
            with transaction.atomic(), statements_writing() as written:
                response = _request(client, method, path, entry, world, kind, variant)
                transaction.set_rollback(True)
            got = _outcome(response, path)
            if got != expected:
                wrong.append(f"{kind}, {variant} object: {method.upper()} {path} answered {got}, expected {expected}")
            if expected == "login" and entry.htmx_login:
                # An htmx request (a session that expired on an open page): the browser goes to the login page.
                with transaction.atomic():
                    response = _request(client, method, path, entry, world, kind, variant, HTTP_HX_REQUEST="true")
                    transaction.set_rollback(True)
                if not _is_login_for(response.headers.get("HX-Redirect", ""), path):
                    wrong.append(f"htmx {method.upper()} {path} did not send the browser to the login page")
            elif expected in ("login", 401, 403, 404) and written:
                wrong.append(f"{kind}, {variant} object: {method.upper()} {path} was refused but wrote: {written}")
    assert not wrong, "\n".join(wrong)


# --- Every route has an entry -------------------------------------------------------------------------


def _routes(resolver: URLResolver, prefix: str = "") -> list[tuple[str, URLPattern]]:
    found = []
    for pattern in resolver.url_patterns:
        route = prefix + str(pattern.pattern)
        if isinstance(pattern, URLResolver):
            if pattern.app_name == "admin":
                continue  # Django's admin: staff only, checked by Django (test_the_admin_is_for_staff_only)
            found += _routes(pattern, route)
        else:
            found.append((route, pattern))
    return found


def _methods(pattern: URLPattern) -> set[str]:
    """The methods an API view answers (besides HEAD and OPTIONS); HTML views: what MATRIX lists."""
    callback = pattern.callback
    actions = getattr(callback, "actions", None)
    if actions:
        return set(actions) - {"head", "options"}
    view_class = getattr(callback, "cls", None) or getattr(callback, "view_class", None)
    if view_class is not None and issubclass(view_class, APIView):
        return {m for m in view_class.http_method_names if m not in ("head", "options") and hasattr(view_class, m)}
    return set()


def test_every_route_has_an_entry():
    routes = _routes(get_resolver())
    names = {pattern.name for _, pattern in routes}
    listed = {name for name, _ in MATRIX}

    assert None not in names, f"unnamed routes: {[route for route, p in routes if p.name is None]}"
    assert not names - listed, f"routes without an entry in MATRIX: {sorted(names - listed)}"
    assert not listed - names, f"MATRIX names routes that do not exist: {sorted(listed - names)}"
    missing = [
        f"{method.upper()} {pattern.name}"
        for _, pattern in routes
        for method in _methods(pattern)
        if (pattern.name, method) not in MATRIX
    ]
    assert not missing, f"API methods without an entry in MATRIX: {missing}"


def test_every_entry_resolves_to_its_route(world):
    for (name, _method), entry in MATRIX.items():
        for path_of in (entry.path, entry.other, entry.conflicted):
            if path_of is not None:
                path = path_of(world, READER).split("?")[0]
                assert resolve(path).url_name == name, path


def test_the_admin_is_for_staff_only(world):
    staff = make_user(is_staff=True, is_superuser=True)
    for kind in KINDS:
        client = Client()
        if kind != ANONYMOUS:
            client.force_login(world.users[kind])
        response = client.get("/admin/")
        assert response.status_code == 302, kind
        assert response["Location"].startswith("/admin/login/"), kind
    client = Client()
    client.force_login(staff)
    assert client.get("/admin/").status_code == 200
    assert admin_site.is_registered(Study)
