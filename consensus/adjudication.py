"""What an adjudicator is shown: their queue, and the three ratings they weigh."""

from dataclasses import dataclass

from django.db.models import Count, Q

from annotation.models import RatingChoice, Task, tiebreak
from consensus.models import Adjudication, AdjudicationStatus


def adjudication_queue(adjudicator, *, study_id: int | None = None) -> dict:
    """The adjudicator's open and decided adjudications, in one study if given (two queries)."""
    mine = Adjudication.objects.filter(adjudicator=adjudicator).exclude(status=AdjudicationStatus.VOIDED)
    if study_id is not None:
        mine = mine.filter(example__study_id=study_id)
    counts = mine.aggregate(total=Count("pk"), open=Count("pk", filter=Q(status=AdjudicationStatus.OPEN)))
    following = mine.filter(status=AdjudicationStatus.OPEN).order_by("created_at", "pk").first()
    return {"total": counts["total"], "done": counts["total"] - counts["open"], "next": following}


def adjudication_queues(adjudicator) -> list[dict]:
    """The adjudicator's queue per study: decided and total, and whether one waits (one query)."""
    rows = (
        Adjudication.objects.filter(adjudicator=adjudicator)
        .exclude(status=AdjudicationStatus.VOIDED)
        .values("example__study__slug", "example__study__name")
        .annotate(total=Count("pk"), open=Count("pk", filter=Q(status=AdjudicationStatus.OPEN)))
        .order_by("example__study__name")
    )
    return [
        {
            "study_slug": row["example__study__slug"],
            "study_name": row["example__study__name"],
            "total": row["total"],
            "done": row["total"] - row["open"],
            "waiting": row["open"] > 0,
        }
        for row in rows
    ]


@dataclass(frozen=True)
class PriorRating:
    label: str
    rationale: str
    order_differs: bool


def prior_ratings(adjudication) -> list[PriorRating]:
    """The three ratings an adjudicator weighs: shuffled, without names, with their rationales.

    In Task 2 each reader had their own A/B order; a rating says when it differs from the
    adjudicator's, so that "Report A" in a rationale is read the right way round.
    """
    example = adjudication.example
    annotations = list(
        example.annotations.filter(voided_at__isnull=True, settled_at__isnull=False).only(
            "public_id", "rating", "rationale", "report_a_type"
        )
    )
    annotations.sort(key=lambda a: tiebreak(example.study.seed, "prior-order", adjudication.public_id, a.public_id))
    return [
        PriorRating(
            label=RatingChoice(a.rating).label,
            rationale=a.rationale,
            order_differs=example.task == Task.EQUIVALENCE and a.report_a_type != adjudication.report_a_type,
        )
        for a in annotations
    ]
