"""How an audit event's before/after values read on the coordinator's pages: in the words people
read elsewhere (Major Discrepancy, decided by majority), not as stored (major_discrepancy)."""

from django import template
from django.db import models

from annotation.models import MemberRole, RatingChoice, Task
from consensus.models import LabelSource
from consensus.progress import WaitingFor

register = template.Library()

KEY_LABELS: dict[str, str] = {
    "label_source": "decided by",
    "n_annotations": "ratings",
    "max_assignments": "cap",
    "waiting_for": "waiting for",
    "how": "how",
}
VALUE_CHOICES: dict[str, type[models.TextChoices]] = {
    "rating": RatingChoice,
    "label_source": LabelSource,
    "role": MemberRole,
    "task": Task,
    "waiting_for": WaitingFor,
}


@register.filter
def audit_items(values: dict) -> list[tuple[str, str]]:
    """(label, value) pairs of an audit event's before or after values, as people read them."""
    items = []
    for key, value in (values or {}).items():
        label = KEY_LABELS.get(key, key.replace("_", " "))
        if value is None:
            shown = "—"
        elif isinstance(value, bool):
            shown = "yes" if value else "no"
        elif key in VALUE_CHOICES and value in VALUE_CHOICES[key].values:
            shown = str(VALUE_CHOICES[key](value).label)
        else:
            shown = str(value)
        items.append((label, shown))
    return items
