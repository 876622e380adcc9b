"""The published MIMIC-CXR reading, replayed: 120 pairs rated so that the routing rules produce
exactly the counts of MIMIC-CXR-Ext-ReRef (Task 1: 573 annotations, 93 examples with a third
read, 15 adjudicated; Task 2: 282, 42, 1).
"""

import random
import uuid
from dataclasses import dataclass

from annotation.models import (
    RATINGS_WITHOUT_RATIONALE,
    TASK_RATINGS,
    Assignment,
    Example,
    MemberRole,
    Role,
    StudyMember,
    Task,
)
from annotation.services import sample_pairs
from consensus.assignment import assign_readers
from consensus.models import Adjudication
from consensus.services import submit_adjudication, submit_annotation
from tests.factories import make_pair, make_study, make_user

# (examples agreeing at two reads, examples with a majority of three, three-way splits)
PUBLISHED = {Task.REALISM: (147, 93 - 15, 15), Task.EQUIVALENCE: (78, 42 - 1, 1)}


@dataclass(frozen=True)
class Plan:
    reads: tuple[str, ...]
    adjudication: str | None
    consensus: str
    label_source: str


def _plans(task: str, rng: random.Random) -> list[Plan]:
    labels = list(TASK_RATINGS[task])
    agreeing, majority, split = PUBLISHED[task]
    plans = []
    for _ in range(agreeing):
        label = rng.choice(labels)
        plans.append(Plan((label, label), None, label, "unanimous"))
    for _ in range(majority):
        winner, loser = rng.sample(labels, 2)
        reads = rng.choice([(winner, loser, winner), (loser, winner, winner)])
        plans.append(Plan(reads, None, winner, "majority"))
    for _ in range(split):
        reads = tuple(rng.sample(labels, 3))
        final = rng.choice(labels)
        plans.append(Plan(reads, final, final, "adjudicated"))
    rng.shuffle(plans)
    return plans


def _rationale(rating: str) -> str:
    return "" if rating in RATINGS_WITHOUT_RATIONALE else f"Reason for {rating}."


def _submit(assignment: Assignment, rating: str) -> None:
    submit_annotation(
        reader=assignment.reader,
        assignment_id=assignment.public_id,
        rating=rating,
        rationale=_rationale(rating),
        form_token=uuid.uuid4(),
    )


def build_published_replay(*, slug: str = "replay", seed: int = 2026):
    """Build and rate the study. Returns (study, {example pk: Plan})."""
    study = make_study(slug)
    for position, variation in enumerate(study.variations.all()):
        for i in range(10):
            make_pair(
                study, dataset="mimic-cxr", study_id=str(53_000_000 + position * 100 + i), variation=variation.key
            )
    sample_pairs(study, per_variation=10, seed=seed)
    readers = [make_user(Role.READER, subspecialty="cardiothoracic") for _ in range(13)]
    adjudicator = make_user(Role.ADJUDICATOR, subspecialty="cardiothoracic")
    StudyMember.objects.bulk_create(
        [StudyMember(study=study, user=r, role=MemberRole.READER) for r in readers]
        + [StudyMember(study=study, user=adjudicator, role=MemberRole.ADJUDICATOR)]
    )
    assign_readers(study, actor=make_user(Role.COORDINATOR))

    rng = random.Random(seed)
    plans: dict[int, Plan] = {}
    for task in (Task.REALISM, Task.EQUIVALENCE):
        examples = list(Example.objects.filter(study=study, task=task).order_by("pk"))
        for example, plan in zip(examples, _plans(task, rng), strict=True):
            plans[example.pk] = plan
            first, second = Assignment.objects.filter(example=example).select_related("reader").order_by("slot")
            _submit(first, plan.reads[0])
            _submit(second, plan.reads[1])
            if len(plan.reads) == 3:
                third = Assignment.objects.select_related("reader").get(example=example, slot=3)
                _submit(third, plan.reads[2])
            if plan.adjudication is not None:
                adjudication = Adjudication.objects.get(example=example)
                submit_adjudication(
                    adjudicator=adjudication.adjudicator,
                    adjudication_id=adjudication.public_id,
                    rating=plan.adjudication,
                    rationale="Adjudicated after reading the three rationales.",
                    form_token=uuid.uuid4(),
                )
    return study, plans
