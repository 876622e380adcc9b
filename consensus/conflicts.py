"""Conflict of interest: someone who coordinates a study and also reads in it.

Coordinators see everything about a pair: which report is the original, its variation and
dataset, who reads it, their ratings and rationales, the consensus. A coordinator who is also a
reader (or adjudicator) of a pair must not see any of that while they still have to rate it.
The rule lives here, once; every coordinator page and endpoint asks it.
"""

from django.contrib.auth.models import AbstractBaseUser
from django.db.models import Q, QuerySet

from annotation.models import Assignment, AssignmentStatus, CandidatePair, Study
from consensus.models import Adjudication, AdjudicationStatus

PAIR_HIDDEN = (
    "You are a reader of this pair and have not rated it yet; its details are hidden until you have "
    "(an open adjudication of it counts the same)."
)
ROW_HIDDEN = "hidden: you are reading this pair"


def pairs_with_open_work(user: AbstractBaseUser) -> QuerySet:
    """The pairs whose details are hidden from user: they hold an open read of one of its examples
    (either Task 1 example or the Task 2 example) or an open adjudication of one of them.

    A queryset of CandidatePair, to filter further or to use as a subquery.
    """
    open_reads = Assignment.objects.filter(reader=user, status=AssignmentStatus.OPEN).values("example__pair_id")
    open_adjudications = Adjudication.objects.filter(adjudicator=user, status=AdjudicationStatus.OPEN).values(
        "example__pair_id"
    )
    return CandidatePair.objects.filter(Q(pk__in=open_reads) | Q(pk__in=open_adjudications))


def hidden_pair_ids(user: AbstractBaseUser, study: Study) -> frozenset[int]:
    """The ids of the study's pairs hidden from user. One query, however long the list that is then
    masked with it."""
    return frozenset(pairs_with_open_work(user).filter(study=study).values_list("pk", flat=True))


def is_hidden_from(user: AbstractBaseUser, pair_id: int) -> bool:
    """Whether one pair's details are hidden from user. One query."""
    return pairs_with_open_work(user).filter(pk=pair_id).exists()


def mark_hidden(rows: list, hidden: frozenset[int], pair_id: str = "example.pair_id") -> list:
    """Set row.hidden on every row (True when its pair is in hidden) and return the rows.

    pair_id is the dotted attribute path from a row to its pair's id; a row without one (an audit
    event about a membership) is never hidden.
    """
    for row in rows:
        value = row
        for name in pair_id.split("."):
            value = getattr(value, name, None) if value is not None else None
        row.hidden = value is not None and value in hidden
    return rows
