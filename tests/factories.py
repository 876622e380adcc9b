"""Plain factory functions for test data (no fixture files)."""

import itertools

from django.contrib.auth import get_user_model
from django.contrib.auth.models import AbstractBaseUser

from annotation.models import Assignment, CandidatePair, Dataset, Example, Study, Task, Verdict
from annotation.roles import grant_role
from annotation.tokens import issue_token, scopes_for

_counter = itertools.count(1)

CSV_HEADER = (
    "dataset,study_id,reref_variation,verdict,indication,comparison,technique,"
    "original_findings,original_impression,alternative_findings,alternative_impression"
)


def make_user(*roles: str, username: str | None = None, subspecialty: str | None = None, **fields) -> AbstractBaseUser:
    username = username or f"user{next(_counter)}"
    user = get_user_model().objects.create_user(username=username, password="pw-" + username, **fields)
    for role in roles:
        grant_role(user, role, subspecialty=subspecialty)
    return user


def make_token(user: AbstractBaseUser, *, scope: str | None = None, name: str | None = None) -> str:
    """A new API token of user, by default with all their roles; returns its key."""
    name = name or f"token {next(_token_names)}"
    return issue_token(user, name=name, scope=scope or scopes_for(user)[-1])[1]


_token_names = itertools.count(1)


def make_study(slug: str | None = None, **fields) -> Study:
    slug = slug or f"study-{next(_counter)}"
    # Undo off (ratings route at once) unless a test asks for a window: the protocol tests need no clock.
    fields.setdefault("undo_window_seconds", 0)
    # No reserve unless a test asks for one (tests/consensus/test_reserve.py): a reader's queue is then
    # every read drawn for them, as the protocol tests expect.
    fields.setdefault("reserve_percent", 0)
    study = Study.objects.create_with_taxonomy(slug=slug, name=fields.pop("name", slug))
    if fields:
        Study.objects.filter(pk=study.pk).update(**fields)
        study.refresh_from_db()
    return study


def make_pair(
    study: Study,
    *,
    dataset: str = "mimic-cxr",
    study_id: str | None = None,
    variation: str = "hedging",
    verdict: str = Verdict.ACCEPTED,
    **texts: str,
) -> CandidatePair:
    n = next(_counter)
    defaults = {
        "indication": "Cough.",
        "comparison": "None.",
        "technique": "PA and lateral.",
        "original_findings": f"Lungs are clear. Case {n}.",
        "original_impression": "No acute process.",
        "alternative_findings": f"The lungs are clear. Case {n}.",
        "alternative_impression": "No acute cardiopulmonary process.",
    }
    defaults.update(texts)
    return CandidatePair.objects.create(
        study=study,
        dataset=Dataset.objects.get(key=dataset),
        source_study_id=study_id or str(50_000_000 + n),
        variation=study.variations.get(key=variation),
        verdict=verdict,
        **defaults,
    )


def csv_row(**overrides: str) -> dict[str, str]:
    """One valid import row as a dict, with any column overridden."""
    n = next(_counter)
    row = {
        "dataset": "mimic-cxr",
        "study_id": str(50_000_000 + n),
        "reref_variation": "hedging",
        "verdict": "accepted",
        "indication": "Fever.",
        "comparison": "",
        "technique": "AP portable.",
        "original_findings": "Right lower lobe opacity.",
        "original_impression": "Pneumonia.",
        "alternative_findings": "Right lower lobe opacity, likely pneumonia.",
        "alternative_impression": "Probable pneumonia.",
    }
    row.update(overrides)
    return row


def csv_bytes(rows: list[dict[str, str]], *, columns: list[str] | None = None) -> bytes:
    import csv
    import io

    columns = columns or CSV_HEADER.split(",")
    out = io.StringIO(newline="")
    writer = csv.DictWriter(out, fieldnames=columns, lineterminator="\r\n", extrasaction="ignore")
    writer.writeheader()
    writer.writerows(rows)
    return out.getvalue().encode("utf-8")


def jsonl_bytes(rows: list[dict]) -> bytes:
    import json

    return "".join(json.dumps(row, ensure_ascii=False) + "\n" for row in rows).encode("utf-8")


def make_example(pair: CandidatePair, *, task: str = Task.EQUIVALENCE, report_type: str = "") -> Example:
    return Example.objects.create(study=pair.study, pair=pair, task=task, report_type=report_type)


def make_assignment(example: Example, reader: AbstractBaseUser, *, slot: int = 1, **fields) -> Assignment:
    return Assignment.objects.create(example=example, reader=reader, slot=slot, **fields)


def make_reading_study(
    *,
    pairs: int = 2,
    readers: int | None = None,
    adjudicators: int = 1,
    adjudicator_subspecialty: str = "cardiothoracic",
    keep_versions_apart: bool = True,
    assign: bool = True,
    slug: str | None = None,
    pairs_per_exam: int = 1,
    readers_beyond_initial: int | None = None,
    reserve_percent: int = 0,
):
    """A sampled study with enrolled readers and adjudicators, its examples assigned.

    pairs_per_exam: consecutive pairs share an exam (a study id, and its original text), each with
    its own variation. readers: by default as many as every third read can need
    (consensus.blinding.readers_needed); if given, at least as many as the initial reads need
    (when assigning); readers_beyond_initial: that many more than the initial reads need.
    Returns (study, readers, adjudicators).
    """
    from annotation.models import MemberRole, Role, StudyMember
    from annotation.services import sample_pairs
    from consensus.assignment import assign_readers
    from consensus.blinding import readers_needed

    study = make_study(slug, keep_versions_apart=keep_versions_apart, reserve_percent=reserve_percent)
    variations = list(study.variations.values_list("key", flat=True))
    assert pairs_per_exam <= len(variations), "the pairs of an exam need distinct variations"
    for i in range(pairs):
        exam = i // pairs_per_exam
        texts = {"original_findings": f"Lungs are clear. Exam {exam}."} if pairs_per_exam > 1 else {}
        make_pair(
            study,
            study_id=str(52_000_000 + exam),
            variation=variations[i % len(variations)],
            **texts,
        )
    sample_pairs(study, per_variation=pairs, seed=1)
    needed = readers_needed(study)
    if readers_beyond_initial is not None:
        readers = needed.initial + readers_beyond_initial
    elif readers is None:
        readers = needed.with_third_reads
    elif assign:
        # Fewer could not even be assigned: the exam rule sets the floor.
        readers = max(readers, needed.initial)
    reader_users = [make_user(Role.READER) for _ in range(readers)]
    adjudicator_users = [
        make_user(Role.ADJUDICATOR, subspecialty=adjudicator_subspecialty) for _ in range(adjudicators)
    ]
    for user in reader_users:
        StudyMember.objects.create(study=study, user=user, role=MemberRole.READER)
    for user in adjudicator_users:
        StudyMember.objects.create(study=study, user=user, role=MemberRole.ADJUDICATOR)
    if assign:
        coordinator = make_user(Role.COORDINATOR)
        assign_readers(study, actor=coordinator)
    return study, reader_users, adjudicator_users


def rate(assignment, rating: str, rationale: str = "A reason."):
    """Submit a rating for an assignment through the service, as its reader."""
    import uuid

    from consensus.services import submit_annotation

    return submit_annotation(
        reader=assignment.reader,
        assignment_id=assignment.public_id,
        rating=rating,
        rationale=rationale,
        form_token=uuid.uuid4(),
    )


def rate_open_reads(example: Example, *ratings: str) -> list:
    """Rate the example's open reads one after another (lowest slot first), through the service.

    After two disagreeing ratings the third read is routed, so three ratings take an example
    to a majority or a three-way split. Returns the annotations.
    """
    from annotation.models import RATINGS_WITHOUT_RATIONALE

    annotations = []
    for rating in ratings:
        assignment = example.assignments.open().select_related("reader").order_by("slot").first()
        assert assignment is not None, f"no open read left on {example} for {rating}"
        rationale = "" if rating in RATINGS_WITHOUT_RATIONALE else "A reason."
        annotations.append(rate(assignment, rating, rationale).annotation)
    example.refresh_from_db()
    return annotations
