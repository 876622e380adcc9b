"""Studies, their source material (candidate pairs) and the examples readers rate."""

import secrets
import uuid

from django.conf import settings
from django.db import models
from django.db.models import Q
from django.urls import reverse


def new_study_seed() -> int:
    return secrets.randbelow(2**31)


class Role(models.TextChoices):
    """The four kinds of people in a study. Each is a Django group with one permission."""

    READER = "reader", "Reader"
    ADJUDICATOR = "adjudicator", "Adjudicator"
    COORDINATOR = "coordinator", "Coordinator"
    DATA_MANAGER = "data_manager", "Data manager"


class Subspecialty(models.TextChoices):
    CARDIOTHORACIC = "cardiothoracic", "Cardiothoracic"
    GENERAL = "general", "General"
    ABDOMEN_PELVIS = "abdomen_pelvis", "Abdomen/pelvis"
    NEURORADIOLOGY = "neuroradiology", "Neuroradiology"
    OTHER = "other", "Other"


class Verdict(models.TextChoices):
    """The Verifier's verdict on a candidate rewrite. Only accepted pairs can be sampled."""

    ACCEPTED = "accepted", "Accepted"
    REJECTED = "rejected", "Rejected"
    ALREADY_IN_TARGET_FORM = "already_in_target_form", "Already in target form"
    INFEASIBLE = "infeasible", "Infeasible"


class Task(models.TextChoices):
    REALISM = "realism", "Task 1: Realism"
    EQUIVALENCE = "equivalence", "Task 2: Clinical equivalence"


class ReportType(models.TextChoices):
    ORIGINAL = "original", "Original"
    ALTERNATIVE = "alternative", "Alternative"


# The taxonomy of MIMIC-CXR-Ext-ReRef: (key, label, dimension). A study copies it on creation
# and may edit its own copy; the vocabulary is study data, not code.
DEFAULT_TAXONOMY: tuple[tuple[str, str, str], ...] = (
    ("structure--structured", "Structure: structured", "Organization"),
    ("structure--free_text", "Structure: free text", "Organization"),
    ("section_assignment", "Section assignment", "Organization"),
    ("findings_scope--exhaustive", "Findings scope: exhaustive", "Completeness"),
    ("findings_scope--minimal", "Findings scope: minimal", "Completeness"),
    ("anatomical_granularity--high", "Anatomical granularity: high", "Granularity"),
    ("anatomical_granularity--low", "Anatomical granularity: low", "Granularity"),
    ("quantitative_granularity--low", "Quantitative granularity: low", "Granularity"),
    ("terminology", "Terminology", "Language"),
    ("hedging", "Hedging", "Language"),
    ("negation--explicit", "Negation: explicit", "Language"),
    ("negation--implicit", "Negation: implicit", "Language"),
)


class Dataset(models.Model):
    """A source of reports (MIMIC-CXR, IU X-ray, ...). Custom datasets are added in the admin."""

    key = models.SlugField(max_length=64, unique=True, help_text="As written in import files, e.g. mimic-cxr.")
    name = models.CharField(max_length=200)
    study_id_prefix = models.CharField(
        max_length=8,
        blank=True,
        help_text="A prefix accepted on import and stripped before storing (MIMIC-CXR: 's').",
    )
    numeric_study_ids = models.BooleanField(
        default=False, help_text="Study ids must be digits (after the prefix is stripped)."
    )

    class Meta:
        ordering = ["key"]

    def __str__(self) -> str:
        return self.key

    def normalize_study_id(self, raw: str) -> str:
        """The study id as stored: surrounding blanks and the dataset's prefix removed."""
        study_id = raw.strip()
        prefix = self.study_id_prefix
        if prefix and study_id.lower().startswith(prefix.lower()) and len(study_id) > len(prefix):
            study_id = study_id[len(prefix) :]
        return study_id


class StudyQuerySet(models.QuerySet):
    def create_with_taxonomy(
        self, *, slug: str, name: str = "", taxonomy: tuple[tuple[str, str, str], ...] = DEFAULT_TAXONOMY
    ) -> "Study":
        study = self.create(slug=slug, name=name or slug)
        Variation.objects.bulk_create(
            Variation(study=study, key=key, label=label, dimension=dimension, position=position)
            for position, (key, label, dimension) in enumerate(taxonomy)
        )
        return study


class Study(models.Model):
    public_id = models.UUIDField(default=uuid.uuid4, unique=True, editable=False)
    name = models.CharField(max_length=200)
    slug = models.SlugField(max_length=64, unique=True)
    reads_per_example = models.PositiveSmallIntegerField(
        default=2, help_text="Independent initial reads of every example."
    )
    seed = models.PositiveIntegerField(
        default=new_study_seed,
        help_text="Drives every random choice of the study: sampling default, queue order, A/B order, "
        "annotation_index in the release.",
    )
    keep_versions_apart = models.BooleanField(
        default=True,
        help_text="Never give one reader both the original and the alternative Task 1 examples of a pair.",
    )
    sample_seed = models.PositiveIntegerField(null=True, blank=True, editable=False)
    sample_per_variation = models.PositiveIntegerField(null=True, blank=True, editable=False)
    sample_datasets = models.JSONField(default=list, blank=True, editable=False)
    sampled_at = models.DateTimeField(null=True, blank=True, editable=False)
    created_at = models.DateTimeField(auto_now_add=True)

    objects = StudyQuerySet.as_manager()

    class Meta:
        verbose_name_plural = "studies"
        ordering = ["name"]
        constraints = [
            models.CheckConstraint(condition=Q(reads_per_example__gte=2), name="study_reads_per_example_gte_2"),
        ]
        permissions = [
            ("coordinate_study", "Can import, sample, assign and monitor studies"),
            ("read_examples", "Can rate examples as a reader"),
            ("adjudicate_examples", "Can adjudicate three-way disagreements"),
            ("build_release", "Can build and download releases"),
        ]

    def __str__(self) -> str:
        return self.name

    def get_absolute_url(self) -> str:
        return reverse("study_detail", args=[self.slug])

    def candidate_summary(self) -> list[dict]:
        """One row per (dataset, variation) with candidates: counts by verdict and sampled.

        Two queries whatever the size of the study.
        """
        counts = {f"n_{verdict}": models.Count("pk", filter=Q(verdict=verdict)) for verdict in Verdict.values}
        rows = (
            self.pairs.values("dataset__key", "variation_id")
            .annotate(total=models.Count("pk"), n_sampled=models.Count("pk", filter=Q(sampled=True)), **counts)
            .order_by()
        )
        variations = {v.pk: v for v in self.variations.all()}
        summary = [
            {
                "dataset": row["dataset__key"],
                "variation": variations[row["variation_id"]].key,
                "position": variations[row["variation_id"]].position,
                "total": row["total"],
                "sampled": row["n_sampled"],
                "verdicts": {verdict: row[f"n_{verdict}"] for verdict in Verdict.values},
            }
            for row in rows
        ]
        summary.sort(key=lambda r: (r["dataset"], r["position"], r["variation"]))
        return summary

    def reading_has_started(self) -> bool:
        """True once any example of the study has been put in a reader's queue."""
        return Assignment.objects.filter(example__study=self).exists()


class Variation(models.Model):
    """One key of a study's taxonomy, e.g. hedging."""

    study = models.ForeignKey(Study, on_delete=models.CASCADE, related_name="variations")
    key = models.SlugField(max_length=100)
    label = models.CharField(max_length=200)
    dimension = models.CharField(max_length=100)
    position = models.PositiveSmallIntegerField(default=0)

    class Meta:
        ordering = ["study", "position", "key"]
        constraints = [
            models.UniqueConstraint(fields=["study", "key"], name="variation_unique_key_per_study"),
        ]

    def __str__(self) -> str:
        return self.key


class ReaderProfile(models.Model):
    """What the study needs to know about a radiologist beyond the account."""

    user = models.OneToOneField(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="reader_profile")
    subspecialty = models.CharField(max_length=32, choices=Subspecialty.choices, default=Subspecialty.GENERAL)

    class Meta:
        constraints = [
            models.CheckConstraint(
                condition=Q(subspecialty__in=Subspecialty.values), name="readerprofile_subspecialty_valid"
            ),
        ]

    def __str__(self) -> str:
        return f"{self.user} ({self.get_subspecialty_display()})"


class CandidatePair(models.Model):
    """An original report and its rewrite along one variation, with their shared context."""

    public_id = models.UUIDField(default=uuid.uuid4, unique=True, editable=False)
    study = models.ForeignKey(Study, on_delete=models.CASCADE, related_name="pairs")
    dataset = models.ForeignKey(Dataset, on_delete=models.PROTECT, related_name="pairs")
    # The imaging study's id in its source dataset (the release's study_id column); not to be
    # confused with the reader study this pair belongs to.
    source_study_id = models.CharField(
        max_length=64, help_text="The report's study id in its dataset, stored without prefix."
    )
    variation = models.ForeignKey(Variation, on_delete=models.PROTECT, related_name="pairs")
    verdict = models.CharField(max_length=32, choices=Verdict.choices)
    indication = models.TextField(blank=True)
    comparison = models.TextField(blank=True)
    technique = models.TextField(blank=True)
    original_findings = models.TextField(blank=True)
    original_impression = models.TextField(blank=True)
    alternative_findings = models.TextField(blank=True)
    alternative_impression = models.TextField(blank=True)
    sampled = models.BooleanField(default=False)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["dataset__key", "variation__position", "source_study_id"]
        constraints = [
            models.UniqueConstraint(
                fields=["study", "dataset", "source_study_id", "variation"],
                name="pair_unique_per_study_dataset_variation",
            ),
            models.CheckConstraint(condition=Q(verdict__in=Verdict.values), name="pair_verdict_valid"),
            models.CheckConstraint(
                condition=~Q(original_findings="", original_impression=""), name="pair_original_has_text"
            ),
            models.CheckConstraint(
                condition=~Q(alternative_findings="", alternative_impression=""), name="pair_alternative_has_text"
            ),
            models.CheckConstraint(
                condition=Q(sampled=False) | Q(verdict=Verdict.ACCEPTED), name="pair_sampled_only_if_accepted"
            ),
        ]
        indexes = [models.Index(fields=["study", "verdict"]), models.Index(fields=["study", "sampled"])]

    def __str__(self) -> str:
        return f"{self.source_study_id} ({self.verdict})"

    def report(self, report_type: str) -> tuple[str, str]:
        """(findings, impression) of one side of the pair."""
        if report_type == ReportType.ORIGINAL:
            return self.original_findings, self.original_impression
        return self.alternative_findings, self.alternative_impression


class ExampleQuerySet(models.QuerySet):
    def for_task(self, task: str) -> "ExampleQuerySet":
        return self.filter(task=task)


class Example(models.Model):
    """What one reader rates once: a single report (Task 1) or the pair (Task 2).

    report_type is empty for Task 2, which rates both reports.
    """

    public_id = models.UUIDField(default=uuid.uuid4, unique=True, editable=False)
    study = models.ForeignKey(Study, on_delete=models.CASCADE, related_name="examples")
    pair = models.ForeignKey(CandidatePair, on_delete=models.CASCADE, related_name="examples")
    task = models.CharField(max_length=16, choices=Task.choices)
    report_type = models.CharField(max_length=16, choices=ReportType.choices, blank=True)

    objects = ExampleQuerySet.as_manager()

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["pair", "task", "report_type"], name="example_unique_per_pair_task_type"),
            models.CheckConstraint(
                condition=(Q(task=Task.REALISM) & Q(report_type__in=ReportType.values))
                | (Q(task=Task.EQUIVALENCE) & Q(report_type="")),
                name="example_report_type_matches_task",
            ),
        ]
        indexes = [models.Index(fields=["study", "task"])]

    def __str__(self) -> str:
        suffix = f":{self.report_type}" if self.report_type else ""
        return f"{self.task}:{self.pair}{suffix}"


class Assignment(models.Model):
    """An example in one reader's queue."""

    public_id = models.UUIDField(default=uuid.uuid4, unique=True, editable=False)
    example = models.ForeignKey(Example, on_delete=models.PROTECT, related_name="assignments")
    reader = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.PROTECT, related_name="assignments")
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["example", "reader"], name="assignment_one_per_example_and_reader"),
        ]

    def __str__(self) -> str:
        return f"{self.reader} -> {self.example}"
