"""What an adjudicator is shown: their queue, and the three ratings they weigh."""

from dataclasses import dataclass

from django.db.models import Count, Q

from annotation.models import Rating, Task, tiebreak
from consensus.models import Adjudication, AdjudicationStatus


def adjudication_queue(adjudicator) -> dict:
    """The adjudicator's open and decided adjudications (two queries)."""
    mine = Adjudication.objects.filter(adjudicator=adjudicator).exclude(status=AdjudicationStatus.VOIDED)
    counts = mine.aggregate(total=Count("pk"), open=Count("pk", filter=Q(status=AdjudicationStatus.OPEN)))
    following = mine.filter(status=AdjudicationStatus.OPEN).order_by("created_at", "pk").first()
    return {"total": counts["total"], "done": counts["total"] - counts["open"], "next": following}


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
            label=Rating(a.rating).label,
            rationale=a.rationale,
            order_differs=example.task == Task.EQUIVALENCE and a.report_a_type != adjudication.report_a_type,
        )
        for a in annotations
    ]
