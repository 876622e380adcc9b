"""Metric scores computed outside ReadingRoom and imported for a study's pairs (BERTScore, GREEN, ...).

The built-in metrics (BLEU-2, ROUGE-L, chrF) are never stored here: they are computed from the
pairs' text when the results are (and cached by text hash, see analysis.metrics.MetricCache).
"""

from django.conf import settings
from django.db import models
from django.db.models import Q

from annotation.models import CandidatePair, Study


class ImportedMetric(models.Model):
    """One imported metric of a study, with the score it gives a perfect candidate (if known)."""

    study = models.ForeignKey(Study, on_delete=models.CASCADE, related_name="imported_metrics")
    name = models.CharField(max_length=64)
    perfect_score = models.FloatField(null=True, blank=True, help_text="The score of a report against itself.")
    imported_at = models.DateTimeField()
    imported_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.SET_NULL, null=True, blank=True, related_name="+"
    )

    class Meta:
        ordering = ["study", "name"]
        constraints = [
            models.UniqueConstraint(fields=["study", "name"], name="imported_metric_unique_per_study"),
            models.CheckConstraint(
                condition=~Q(name__in=["bleu2", "rougeL", "chrf"]), name="imported_metric_not_builtin"
            ),
        ]

    def __str__(self) -> str:
        return self.name


class MetricScore(models.Model):
    """One imported metric's score of one pair (the original as reference, as the user computed it)."""

    metric = models.ForeignKey(ImportedMetric, on_delete=models.CASCADE, related_name="scores")
    pair = models.ForeignKey(CandidatePair, on_delete=models.CASCADE, related_name="metric_scores")
    score = models.FloatField()

    class Meta:
        constraints = [models.UniqueConstraint(fields=["metric", "pair"], name="metric_score_unique_per_pair")]

    def __str__(self) -> str:
        return f"{self.metric.name}: {self.score}"


class ComputationStatus(models.TextChoices):
    QUEUED = "queued", "Queued"
    RUNNING = "running", "Running"
    FAILED = "failed", "Failed"


class ResultsComputation(models.Model):
    """One computation of a study's results: one scope (dataset, task) of one version of its ratings.

    Its status, progress and heartbeat live here, so that every server and every worker sees the
    same state. A row is deleted once its results are stored (ComputedResults is then the record); a
    failed one stays, with its reason, until it is asked for again.
    """

    study = models.ForeignKey(Study, on_delete=models.CASCADE, related_name="+")
    dataset = models.CharField(max_length=64, blank=True)
    task = models.CharField(max_length=8, blank=True)
    version = models.CharField(max_length=32, help_text="The state of the study's ratings it computes.")
    status = models.CharField(max_length=16, choices=ComputationStatus.choices, default=ComputationStatus.QUEUED)
    progress = models.PositiveSmallIntegerField(default=0)
    error = models.TextField(blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    heartbeat_at = models.DateTimeField(null=True, blank=True, help_text="Last sign of life of its worker.")
    task_id = models.CharField(max_length=64, blank=True, help_text="The task queue's id of the computation.")

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["study", "dataset", "task", "version"], name="results_computation_once_per_version"
            )
        ]

    def __str__(self) -> str:
        return f"{self.study_id} {self.dataset or 'all'}--{self.task or 'both'} {self.version} ({self.status})"


class ComputedResults(models.Model):
    """The last computed results of a study's scope (dataset, task): which version of its ratings
    they are of. Their files are in the results storage under <study public id>/<scope>/<version>/
    (analysis.services), on one host's disk or in an object store: this row, not a folder listing,
    is what every server reads."""

    study = models.ForeignKey(Study, on_delete=models.CASCADE, related_name="+")
    dataset = models.CharField(max_length=64, blank=True)
    task = models.CharField(max_length=8, blank=True)
    version = models.CharField(max_length=32, help_text="The state of the study's ratings they were computed from.")
    computed_at = models.DateTimeField()

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["study", "dataset", "task"], name="computed_results_one_per_scope")
        ]

    def __str__(self) -> str:
        return f"{self.study_id} {self.dataset or 'all'}--{self.task or 'both'} {self.version}"


class CachedMetricScores(models.Model):
    """The built-in metrics' scores of one pair of texts, by the hash of the two texts and the metric
    definitions' version (analysis.metrics.DatabaseMetricCache): shared by every worker and study."""

    version = models.CharField(max_length=64)
    pair = models.BinaryField(max_length=32, help_text="The hashes of the original's and the rewrite's text.")
    scores = models.BinaryField(help_text="The scores, in analysis.metrics.COLUMNS order, as little-endian doubles.")

    class Meta:
        constraints = [models.UniqueConstraint(fields=["version", "pair"], name="cached_metric_scores_once")]

    def __str__(self) -> str:
        return f"{self.version} {bytes(self.pair).hex()}"
