from collections import Counter

import pytest
from django.db.models import Count

from annotation.models import Annotation, Example, ExampleState, Task
from consensus.models import Adjudication, AdjudicationStatus, ConsensusLabel
from tests.replay import build_published_replay

pytestmark = [pytest.mark.django_db, pytest.mark.slow]  # the published-shape replay


def test_the_published_reading_reproduces_the_published_counts_and_labels():
    study, plans = build_published_replay()

    def count(task: str):
        annotations = Annotation.objects.filter(example__study=study, task=task, voided_at__isnull=True)
        per_example = Counter(annotations.values("example").annotate(n=Count("pk")).values_list("n", flat=True))
        adjudicated = Adjudication.objects.filter(
            example__study=study, task=task, status=AdjudicationStatus.DONE
        ).count()
        return annotations.count(), per_example[2], per_example[3], adjudicated

    assert count(Task.REALISM) == (573, 147, 93, 15)
    assert count(Task.EQUIVALENCE) == (282, 78, 42, 1)
    assert Example.objects.filter(study=study, task=Task.REALISM).count() == 240
    assert Example.objects.filter(study=study, task=Task.EQUIVALENCE).count() == 120
    assert not Example.objects.filter(study=study).exclude(state=ExampleState.CONSENSUS).exists()

    labels = {c.example_id: c for c in ConsensusLabel.objects.filter(example__study=study)}
    assert len(labels) == 360
    for example_pk, plan in plans.items():
        consensus = labels[example_pk]
        assert (consensus.rating, consensus.label_source, consensus.n_annotations) == (
            plan.consensus,
            plan.label_source,
            len(plan.reads),
        )
