"""Studies, their source material (candidate pairs) and the examples readers rate."""

import hashlib
import secrets
import uuid
from collections.abc import Callable
from datetime import timedelta
from decimal import Decimal

from django.conf import settings
from django.core.validators import MaxValueValidator, MinValueValidator
from django.db import connections, models, transaction
from django.db.models import Q
from django.db.models.functions import Length
from django.db.models.lookups import LessThanOrEqual
from django.urls import reverse
from django.utils import timezone

from annotation import queues
from annotation.rows import insert
from annotation.taxonomy import DEFAULT_TAXONOMY


def new_study_seed() -> int:
    return secrets.randbelow(2**31)


def tiebreak(*parts: object) -> int:
    """A stable pseudo-random number in [0, 2**63) from the given parts (for shuffles and tie-breaks).

    Everything random in a study is drawn from it with the study's seed among the parts, so it
    is reproducible and independent of database order.
    """
    digest = hashlib.sha256(":".join(str(p) for p in parts).encode()).digest()
    return int.from_bytes(digest[:8], "big") >> 1


class Role(models.TextChoices):
    """The four kinds of people in a study, and automated judges (programs, not people).

    Each is a Django group with one permission. A judge account holds no other role.
    """

    READER = "reader", "Reader"
    ADJUDICATOR = "adjudicator", "Adjudicator"
    COORDINATOR = "coordinator", "Coordinator"
    DATA_MANAGER = "data_manager", "Data manager"
    JUDGE = "judge", "Automated judge"


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


class RatingChoice(models.TextChoices):
    """Every label of both tasks; the labels are written to the release exactly as shown."""

    REALISTIC = "realistic", "Realistic"
    MINOR_ISSUES = "minor_issues", "Minor Issues"
    MAJOR_ISSUES = "major_issues", "Major Issues"
    EQUIVALENT = "equivalent", "Equivalent"
    MINOR_DISCREPANCY = "minor_discrepancy", "Minor Discrepancy"
    MAJOR_DISCREPANCY = "major_discrepancy", "Major Discrepancy"


TASK_RATINGS: dict[str, tuple[str, ...]] = {
    Task.REALISM: (RatingChoice.REALISTIC, RatingChoice.MINOR_ISSUES, RatingChoice.MAJOR_ISSUES),
    Task.EQUIVALENCE: (RatingChoice.EQUIVALENT, RatingChoice.MINOR_DISCREPANCY, RatingChoice.MAJOR_DISCREPANCY),
}
# The one label of each task that needs no rationale.
RATINGS_WITHOUT_RATIONALE = (RatingChoice.REALISTIC, RatingChoice.EQUIVALENT)
# A rationale says what the reader found: a few sentences, never a document.
RATIONALE_MAX_LENGTH = 10_000


# How long a reader may take back a rating by default, and at most (a longer window only delays routing).
DEFAULT_UNDO_WINDOW_SECONDS = 120
MAX_UNDO_WINDOW_SECONDS = 3600
# Initial reads held in each reader's reserve (consensus.reserve).
DEFAULT_RESERVE_PERCENT = 80
MAX_RESERVE_PERCENT = 90


def rationale_fits() -> LessThanOrEqual:
    """A check-constraint condition: the row's rationale is at most RATIONALE_MAX_LENGTH characters."""
    return LessThanOrEqual(Length("rationale"), RATIONALE_MAX_LENGTH)


# A guide is a few pages of Markdown, never a book.
GUIDE_MAX_LENGTH = 100_000


def guide_text_fits() -> LessThanOrEqual:
    """A check-constraint condition: the row's guide text is at most GUIDE_MAX_LENGTH characters."""
    return LessThanOrEqual(Length("text"), GUIDE_MAX_LENGTH)


def rating_fits_task() -> Q:
    """A check-constraint condition: the row's rating belongs to the row's task."""
    return Q(task=Task.REALISM, rating__in=TASK_RATINGS[Task.REALISM]) | Q(
        task=Task.EQUIVALENCE, rating__in=TASK_RATINGS[Task.EQUIVALENCE]
    )


class ExampleState(models.TextChoices):
    WAITING = "waiting", "Waiting for reads"
    THIRD_READ = "third_read", "Needs a third read"
    ADJUDICATION = "adjudication", "Needs adjudication"
    CONSENSUS = "consensus", "Has consensus"


# The analysis margins' range (percentage points / percent).
MIN_MARGIN = Decimal("0.1")
MAX_MARGIN = Decimal("50")


def _tenths(value: Decimal | None) -> Decimal | None:
    return None if value is None else Decimal(value).quantize(Decimal("0.1"))


def _number(value: Decimal | None) -> str | None:
    """A margin as the audit trail keeps it (JSON has no decimals)."""
    return None if value is None else str(value)


class MemberRole(models.TextChoices):
    READER = "reader", "Reader"
    ADJUDICATOR = "adjudicator", "Adjudicator"


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


# What a coordinator chooses when creating a study, besides its name and slug.
CREATED_SETTINGS = ("keep_versions_apart", "undo_window_seconds", "reserve_percent")


class StudyQuerySet(models.QuerySet):
    def of_reader(self, user) -> "StudyQuerySet":
        """The studies the user reads in: enrolled (in any role, active or not) or given work."""
        return self.filter(
            models.Exists(StudyMember.objects.filter(study=models.OuterRef("pk"), user=user))
            | models.Exists(Assignment.objects.filter(study=models.OuterRef("pk"), reader=user))
        )

    def create_with_taxonomy(
        self, *, slug: str, name: str = "", taxonomy: tuple[tuple[str, str, str], ...] = DEFAULT_TAXONOMY
    ) -> "Study":
        study = self.create(slug=slug, name=name or slug)
        Variation.objects.bulk_create(
            Variation(study=study, key=key, label=label, dimension=dimension, position=position)
            for position, (key, label, dimension) in enumerate(taxonomy)
        )
        return study

    def create_study(self, *, slug: str, name: str, actor, **chosen) -> "Study":
        """A coordinator's new study, by page or API: the default taxonomy, the settings chosen
        (CREATED_SETTINGS; the others keep their defaults), audited with what it was created with."""
        unknown = set(chosen) - set(CREATED_SETTINGS)
        if unknown:
            raise TypeError(f"not a setting chosen at creation: {sorted(unknown)}")
        with transaction.atomic():
            study = self.create_with_taxonomy(slug=slug, name=name)
            if chosen:
                for field, value in chosen.items():
                    setattr(study, field, value)
                study.save(update_fields=list(chosen))
            AuditEvent.objects.record(
                AuditAction.STUDY_CREATED,
                study=study,
                actor=actor,
                after={"slug": study.slug, "name": study.name} | {f: getattr(study, f) for f in CREATED_SETTINGS},
            )
        return study


class Study(models.Model):
    public_id = models.UUIDField(default=uuid.uuid4, unique=True, editable=False)
    name = models.CharField(max_length=200)
    slug = models.SlugField(max_length=64, unique=True)
    reads_per_example = models.PositiveSmallIntegerField(
        default=2,
        editable=False,
        help_text="Independent initial reads of every example. The protocol fixes it at 2: "
        "a disagreement brings one third reader, a three-way split one adjudicator.",
    )
    seed = models.PositiveIntegerField(
        default=new_study_seed,
        help_text="Drives every random choice of the study: sampling default, queue order, A/B order, "
        "annotation_index in the release.",
    )
    keep_versions_apart = models.BooleanField(
        default=True,
        help_text="Keep the items of an exam apart: a reader gets at most one item of an exam (its original, a "
        "rewrite of it, or its Task 2), so they can never tell an original from a rewrite by seeing both. Costs "
        "readers: each item of an exam needs its own 2 (3 with a third read). Off, a reader may get several items "
        "of one exam but never one report text twice.",
    )
    reserve_percent = models.PositiveSmallIntegerField(
        "reserve (% of initial reads)",
        default=DEFAULT_RESERVE_PERCENT,
        validators=[MaxValueValidator(MAX_RESERVE_PERCENT)],
        help_text="Share of each reader's initial reads held back when their queue is drawn, and given to them "
        "with the reads routed to them later (third reads, refills), so that a third read comes mixed among "
        "initial reads instead of at the end of a queue, where it would tell the reader that two colleagues "
        "disagreed. Costs time: a reader whose queue is empty waits while colleagues are reading (items come as "
        "they do), so nobody reads far ahead of the others. 0 turns it off (third reads then gather at the end "
        f"of queues). At most {MAX_RESERVE_PERCENT}.",
    )
    license_text = models.TextField(
        blank=True, help_text="The licence of the release files (LICENSE.txt), unless a build supplies one."
    )
    undo_window_seconds = models.PositiveIntegerField(
        "undo window (seconds)",
        default=DEFAULT_UNDO_WINDOW_SECONDS,
        validators=[MaxValueValidator(MAX_UNDO_WINDOW_SECONDS)],
        help_text="How long a reader may take back a rating (until their next submit at the latest); routing "
        f"waits for it. 0 turns undo off and routes at once. At most {MAX_UNDO_WINDOW_SECONDS} seconds.",
    )
    guide_number = models.PositiveIntegerField(
        default=0,
        editable=False,
        help_text="The number of the guide's current version (0: no guide); kept by annotation.guide.publish_guide.",
    )
    practice_items_required = models.PositiveSmallIntegerField(
        default=0,
        help_text="Practice items per task a reader rates (with feedback) before their first real item of that task.",
    )
    sample_seed = models.PositiveIntegerField(null=True, blank=True, editable=False)
    sample_per_variation = models.PositiveIntegerField(null=True, blank=True, editable=False)
    sample_datasets = models.JSONField(default=list, blank=True, editable=False)
    sample_one_pair_per_exam = models.BooleanField(
        default=False, editable=False, help_text="The sample was drawn with at most one pair per exam."
    )
    sampled_at = models.DateTimeField(null=True, blank=True, editable=False)
    noninferiority_margin = models.DecimalField(
        "Task 1 non-inferiority margin (percentage points)",
        max_digits=4,
        decimal_places=1,
        null=True,
        blank=True,
        validators=[MinValueValidator(MIN_MARGIN), MaxValueValidator(MAX_MARGIN)],
        help_text="How many percentage points fewer rewrites than originals may be rated Realistic for the "
        "rewrites to count as as realistic (non-inferior), e.g. 10. Results then say per variation "
        "non-inferior, inferior or not shown, from the paired 95% interval. Empty: no margin.",
    )
    equivalence_margin = models.DecimalField(
        "Task 2 equivalence margin (% of pairs with a Major Discrepancy)",
        max_digits=4,
        decimal_places=1,
        null=True,
        blank=True,
        validators=[MinValueValidator(MIN_MARGIN), MaxValueValidator(MAX_MARGIN)],
        help_text="The largest share of pairs with a Major Discrepancy at which a rewrite still counts as "
        "clinically equivalent, e.g. 5. Results then say per variation equivalent or not shown, from the "
        "95% interval. Empty: no margin.",
    )
    created_at = models.DateTimeField(auto_now_add=True)

    objects = StudyQuerySet.as_manager()

    class Meta:
        verbose_name_plural = "studies"
        ordering = ["name"]
        constraints = [
            models.CheckConstraint(condition=Q(reads_per_example=2), name="study_reads_per_example_is_2"),
            models.CheckConstraint(
                condition=Q(undo_window_seconds__lte=MAX_UNDO_WINDOW_SECONDS), name="study_undo_window_at_most_an_hour"
            ),
            models.CheckConstraint(
                condition=Q(reserve_percent__lte=MAX_RESERVE_PERCENT), name="study_reserve_percent_at_most_max"
            ),
            models.CheckConstraint(
                condition=Q(noninferiority_margin__isnull=True)
                | Q(noninferiority_margin__gte=MIN_MARGIN, noninferiority_margin__lte=MAX_MARGIN),
                name="study_noninferiority_margin_in_range",
            ),
            models.CheckConstraint(
                condition=Q(equivalence_margin__isnull=True)
                | Q(equivalence_margin__gte=MIN_MARGIN, equivalence_margin__lte=MAX_MARGIN),
                name="study_equivalence_margin_in_range",
            ),
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

    def set_audited(self, action: str, *, actor, shown: Callable = lambda value: value, **values) -> bool:
        """Set some of the study's fields, audited with their old values (shown: how a value is written in
        the trail), under the study's row lock; False, and nothing written, if none of them changes."""
        with transaction.atomic():
            before = Study.objects.select_for_update().values(*values).get(pk=self.pk)
            for field, value in values.items():
                setattr(self, field, value)
            if before == values:
                return False
            Study.objects.filter(pk=self.pk).update(**values)
            AuditEvent.objects.record(
                action,
                study=self,
                actor=actor,
                before={field: shown(value) for field, value in before.items()},
                after={field: shown(value) for field, value in values.items()},
            )
        return True

    def set_margins(self, *, noninferiority: Decimal | None, equivalence: Decimal | None, actor) -> bool:
        """Set the analysis margins (None: none), audited with their old values; False if nothing changed.

        The audit event is one the results rest on (analysis.services.RESULT_EVENTS): a change makes
        the Results page compute again.
        """
        return self.set_audited(
            AuditAction.MARGINS_CHANGED,
            actor=actor,
            shown=_number,
            noninferiority_margin=_tenths(noninferiority),
            equivalence_margin=_tenths(equivalence),
        )

    def set_license(self, text: str, *, actor) -> bool:
        """The licence its releases ship as LICENSE.txt (the release form starts from it), audited
        with the old text; False if unchanged."""
        return self.set_audited(AuditAction.LICENSE_CHANGED, actor=actor, license_text=text)

    def set_undo_window(self, seconds: int, *, actor) -> bool:
        """How long readers may take back a rating, audited with the old value; False if unchanged.
        Ratings stored before keep the window they were stored with (their settle_by)."""
        return self.set_audited(AuditAction.UNDO_WINDOW_CHANGED, actor=actor, undo_window_seconds=seconds)

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

    @property
    def undo_window(self) -> timedelta:
        return timedelta(seconds=self.undo_window_seconds)

    def reading_has_started(self) -> bool:
        """True once any example of the study has been put in a reader's queue (even if withdrawn)."""
        return (
            Assignment.objects.filter(example__study=self).exists()
            or AuditEvent.objects.filter(study=self, example__isnull=False).exists()
        )


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


class Theme(models.TextChoices):
    SYSTEM = "system", "Follow the system setting"
    LIGHT = "light", "Light"
    DARK = "dark", "Dark"


class Preferences(models.Model):
    """A person's own settings for how the pages look and answer the keyboard (any role).

    A user without a row has the defaults: the system's colour scheme and single-key shortcuts on.
    """

    user = models.OneToOneField(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="preferences")
    theme = models.CharField(
        max_length=16,
        choices=Theme.choices,
        default=Theme.SYSTEM,
        help_text="Dark suits dim reading rooms; the system setting follows the computer's light or dark mode.",
    )
    single_key_shortcuts = models.BooleanField(
        "Single-key shortcuts",
        default=True,
        help_text="On the rating form, keys 1, 2 and 3 choose a label. Turn them off if you use speech input "
        "or often press keys by accident; Ctrl/⌘+Enter still submits.",
    )

    class Meta:
        verbose_name_plural = "preferences"
        constraints = [
            models.CheckConstraint(condition=Q(theme__in=Theme.values), name="preferences_theme_valid"),
        ]

    def __str__(self) -> str:
        return f"Preferences of {self.user}"


class TokenScope(models.TextChoices):
    """What a request with an API token may do: the roles of its person, or only the reading ones."""

    READING = "reading", "Reading only"
    ALL = "all", "All my roles"


# The roles a reading token keeps: what readers, adjudicators and automated judges do through the API.
READING_ROLES = frozenset({Role.READER, Role.ADJUDICATOR, Role.JUDGE})


class ApiToken(models.Model):
    """A named key a person's program sends ("Authorization: Token <key>"); a person may have several.

    The key is shown once, when the token is made; only its SHA-256 digest is kept, so a copy of
    the database gives nobody a working key. A reading token acts with its person's reading roles
    only (reader, adjudicator, judge), whatever else they hold. Revoking deletes the row; who made
    and revoked which token is in the admin's log of its person (annotation/tokens.py).
    """

    public_id = models.UUIDField(default=uuid.uuid4, unique=True, editable=False)
    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="api_tokens")
    name = models.CharField(max_length=64, help_text="What the token is for, e.g. the program or computer using it.")
    digest = models.CharField(max_length=64, unique=True, editable=False)
    prefix = models.CharField(
        max_length=8, editable=False, help_text="The key's first characters, to tell tokens apart."
    )
    scope = models.CharField(max_length=8, choices=TokenScope.choices, default=TokenScope.READING)
    created_at = models.DateTimeField(auto_now_add=True)
    last_used_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["user_id", "created_at", "id"]
        constraints = [
            models.UniqueConstraint(fields=["user", "name"], name="api_token_name_unique_per_user"),
            models.CheckConstraint(condition=Q(scope__in=TokenScope.values), name="api_token_scope_valid"),
        ]

    def __str__(self) -> str:
        return f"{self.name} ({self.prefix}…)"

    @staticmethod
    def digest_of(key: str) -> str:
        return hashlib.sha256(key.encode()).hexdigest()


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
    generator = models.JSONField(
        default=dict,
        blank=True,
        help_text="How the rewrite was made, as imported (model, attempt, verifier_reasons). Never shown to readers.",
    )
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
        indexes = [
            models.Index(fields=["study", "verdict"]),
            models.Index(fields=["study", "sampled"]),
            # An exam's pairs (consensus.blinding, lock_example): led by the study id in the dataset, the
            # most selective column, so that the planner takes it even before it has statistics.
            models.Index(fields=["source_study_id", "dataset", "study"], name="pair_exam"),
        ]

    def __str__(self) -> str:
        return f"{self.source_study_id} ({self.verdict})"

    def report(self, report_type: str) -> tuple[str, str]:
        """(findings, impression) of one side of the pair."""
        if report_type == ReportType.ORIGINAL:
            return self.original_findings, self.original_impression
        return self.alternative_findings, self.alternative_impression


# The sections of a report, in the order a report is read.
REPORT_SECTIONS = ("indication", "comparison", "technique", "findings", "impression")


class OriginalReport(models.Model):
    """An original report read from its dataset's own files and cut into sections.

    Stored once per (dataset, study id), independent of any reader study: a rewrite file names
    the report by its study id and is joined to it to become a candidate pair.
    """

    dataset = models.ForeignKey(Dataset, on_delete=models.PROTECT, related_name="reports")
    source_study_id = models.CharField(max_length=64, help_text="The report's study id in its dataset, as stored.")
    indication = models.TextField(blank=True)
    comparison = models.TextField(blank=True)
    technique = models.TextField(blank=True)
    findings = models.TextField(blank=True)
    impression = models.TextField(blank=True)
    content_hash = models.CharField(
        max_length=32, help_text="BLAKE2b-128 of the five sections: a re-import compares this, not the texts."
    )
    source = models.CharField(max_length=300, blank=True, help_text="The file (and line) it was read from.")
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["dataset__key", "source_study_id"]
        constraints = [
            models.UniqueConstraint(fields=["dataset", "source_study_id"], name="report_unique_per_dataset"),
            models.CheckConstraint(condition=~Q(findings="", impression=""), name="report_has_findings_or_impression"),
        ]

    def __str__(self) -> str:
        return self.source_study_id


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
    # Kept by consensus.services.route_example under the example's row lock.
    state = models.CharField(max_length=16, choices=ExampleState.choices, default=ExampleState.WAITING)
    unrouted = models.BooleanField(
        default=False, help_text="Needs a third reader or an adjudicator, and nobody eligible was available."
    )
    unrouted_reason = models.CharField(
        max_length=300, blank=True, help_text="Why nobody eligible was available (while unrouted)."
    )

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
        indexes = [models.Index(fields=["study", "task", "state"]), models.Index(fields=["study", "unrouted"])]

    def __str__(self) -> str:
        suffix = f":{self.report_type}" if self.report_type else ""
        return f"{self.task}:{self.pair}{suffix}"


class StudyMemberQuerySet(models.QuerySet):
    def able(self, study: Study, role: str) -> "StudyMemberQuerySet":
        """Who may be given work in this role now: enrolled and active, with an active account
        that still holds the role (its group is the role's label)."""
        return self.filter(
            study=study, role=role, active=True, user__is_active=True, user__groups__name=Role(role).label
        )


class StudyMember(models.Model):
    """A reader or adjudicator enrolled in a study: the pool that queues and routing draw from."""

    study = models.ForeignKey(Study, on_delete=models.CASCADE, related_name="members")
    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.PROTECT, related_name="study_memberships")
    role = models.CharField(max_length=16, choices=MemberRole.choices)
    max_assignments = models.PositiveIntegerField(
        null=True, blank=True, help_text="Cap on initial reads given by automatic assignment; empty = no cap."
    )
    active = models.BooleanField(default=True)
    skip_practice = models.BooleanField(
        default=False, help_text="The coordinator lets this member (e.g. an automated judge) skip the practice round."
    )
    created_at = models.DateTimeField(auto_now_add=True)

    objects = StudyMemberQuerySet.as_manager()

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["study", "user", "role"], name="member_unique_role_per_study"),
            models.CheckConstraint(condition=Q(role__in=MemberRole.values), name="member_role_valid"),
        ]

    def __str__(self) -> str:
        return f"{self.user} ({self.role})"


class AssignmentStatus(models.TextChoices):
    OPEN = "open", "Open"
    DONE = "done", "Rated"
    VOIDED = "voided", "Voided"
    # Taken out of the queue unrated after the reader had seen it: kept, because the reader has
    # read the text (they never get the example again, nor, kept apart, its other version).
    WITHDRAWN = "withdrawn", "Withdrawn after being shown"


ACTIVE_STATUSES = (AssignmentStatus.OPEN, AssignmentStatus.DONE)
ACTIVE_ASSIGNMENT = Q(status__in=ACTIVE_STATUSES)
THIRD_READ_SLOT = 3


class AssignmentQuerySet(models.QuerySet):
    def active(self) -> "AssignmentQuerySet":
        return self.filter(ACTIVE_ASSIGNMENT)

    def open(self) -> "AssignmentQuerySet":
        return self.filter(status=AssignmentStatus.OPEN)

    def visible_to(self, reader) -> "AssignmentQuerySet":
        """The reads a reader may open, by page or API, with what showing one needs. Another reader's
        read is not there, exactly like one that does not exist; nor is one withdrawn from this
        reader's queue (kept only because they had seen it), nor one still in their reserve
        (consensus.reserve), which is not theirs to open yet."""
        return (
            self.filter(reader=reader)
            .exclude(status=AssignmentStatus.WITHDRAWN)
            .exclude(held=True)
            .select_related("example__pair", "example__study", "annotation")
        )


class Assignment(models.Model):
    """An example in one reader's queue, in one of its three reading slots.

    Slots 1 and 2 are the independent initial reads, slot 3 the third read. An active
    (open or done) assignment holds its slot; voiding frees it. A withdrawn assignment, which
    never had a rating, is deleted if it was never shown (the audit trail keeps it), and kept
    as WITHDRAWN if it was: the reader has seen the text.
    """

    public_id = models.UUIDField(default=uuid.uuid4, unique=True, editable=False)
    example = models.ForeignKey(Example, on_delete=models.PROTECT, related_name="assignments")
    reader = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.PROTECT, related_name="assignments")
    # The example's study and task, copied (save() fills them): a reader's queue and the routing
    # load are then index scans instead of joins over every example of the study.
    study = models.ForeignKey(Study, on_delete=models.PROTECT, related_name="+", editable=False)
    task = models.CharField(max_length=16, choices=Task.choices, editable=False)
    slot = models.PositiveSmallIntegerField()
    status = models.CharField(max_length=16, choices=AssignmentStatus.choices, default=AssignmentStatus.OPEN)
    queue_order = models.BigIntegerField(
        default=0, help_text="The reader's queue is sorted on this: a seeded shuffle, no pattern."
    )
    created_at = models.DateTimeField(auto_now_add=True)
    first_shown_at = models.DateTimeField(null=True, blank=True)
    report_a_type = models.CharField(
        max_length=16, choices=ReportType.choices, blank=True, help_text="Task 2: which report was shown as A."
    )
    # After the reader took back their rating: its time on task, and when they resumed. The next
    # rating's time on task is the first plus the time since resuming.
    time_before_undo_ms = models.PositiveIntegerField(
        default=0, db_default=0, help_text="Time on task of the ratings of this read its reader took back."
    )
    resumed_at = models.DateTimeField(null=True, blank=True, help_text="When its reader last took back its rating.")
    held = models.BooleanField(
        default=False,
        db_default=False,
        help_text="Open but in its reader's reserve: not given to them until released (consensus.reserve).",
    )

    objects = AssignmentQuerySet.as_manager()

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["example", "reader"], name="assignment_one_per_example_and_reader"),
            models.UniqueConstraint(
                fields=["example", "slot"], condition=ACTIVE_ASSIGNMENT, name="assignment_one_active_per_slot"
            ),
            models.UniqueConstraint(
                fields=["example"],
                condition=ACTIVE_ASSIGNMENT & Q(slot=THIRD_READ_SLOT),
                name="assignment_one_third_read_per_example",
            ),
            models.CheckConstraint(condition=Q(slot__gte=1, slot__lte=THIRD_READ_SLOT), name="assignment_slot_1_to_3"),
            models.CheckConstraint(condition=Q(status__in=AssignmentStatus.values), name="assignment_status_valid"),
        ]
        indexes = [
            models.Index(fields=["reader", "status", "queue_order"]),
            models.Index(fields=["reader", "study", "task", "status", "queue_order"], name="assignment_reader_queue"),
            # A reader's next item, in any study or in one: the first entry of this index.
            models.Index(
                fields=["reader", "task", "study", "queue_order", "id"],
                condition=Q(status="open", held=False),
                name="assignment_open_queue",
            ),
            # A reader's reserve in one queue, in the order it is released.
            models.Index(
                fields=["reader", "study", "task", "queue_order"],
                condition=Q(status="open", held=True),
                name="assignment_reserve",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.reader} -> {self.example} (slot {self.slot})"

    def save(self, *args, **kwargs) -> None:
        self.take_queue_of_example()
        adding = self._state.adding
        super().save(*args, **kwargs)
        if adding:
            self.count_as_new()

    def take_queue_of_example(self) -> None:
        """The study and task of its example, where not set: a new assignment's queue."""
        if self.study_id is None or not self.task:
            self.study_id, self.task = self.example.study_id, self.example.task

    def count_as_new(self) -> None:
        """A new assignment in its reader's queue counters (annotation.queues), as save() counts it."""
        if self.status == AssignmentStatus.OPEN:
            queues.count(
                self.reader_id,
                self.study_id,
                self.task,
                opened=0 if self.held else 1,
                held=1 if self.held else 0,
                third_reads=1 if self.slot == THIRD_READ_SLOT else 0,
            )

    @property
    def is_third_read(self) -> bool:
        return self.slot == THIRD_READ_SLOT


class ReaderQueueQuerySet(models.QuerySet):
    def recount(self, study: "Study") -> None:
        """Rebuild a study's counters from its assignments (after rows were written in bulk)."""
        self.filter(study=study).delete()
        rows = (
            Assignment.objects.filter(study=study)
            .values("reader_id", "task")
            .annotate(
                open_count=models.Count("pk", filter=Q(status=AssignmentStatus.OPEN, held=False)),
                held_count=models.Count("pk", filter=Q(status=AssignmentStatus.OPEN, held=True)),
                rated_count=models.Count("pk", filter=Q(status__in=[AssignmentStatus.DONE, AssignmentStatus.VOIDED])),
                third_read_count=models.Count("pk", filter=Q(slot=THIRD_READ_SLOT)),
            )
            .order_by()
        )
        self.bulk_create([ReaderQueue(study=study, **row) for row in rows], batch_size=2000)


class ReaderQueue(models.Model):
    """How many items one reader has open and has rated in one study and task, kept as counters.

    A reader is shown only these counts, never a total that grows when a third read arrives,
    and reading them touches one row whatever the queue's length. They change in the same
    transaction as the assignments they count, through annotation.queues (never directly).
    """

    reader = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="+")
    study = models.ForeignKey(Study, on_delete=models.CASCADE, related_name="+")
    task = models.CharField(max_length=16, choices=Task.choices)
    open_count = models.PositiveIntegerField(default=0, help_text="Open assignments the reader can be given now.")
    held_count = models.PositiveIntegerField(
        default=0, db_default=0, help_text="Open assignments held in the reader's reserve (consensus.reserve)."
    )
    rated_count = models.PositiveIntegerField(default=0, help_text="Ratings given, voided ones included.")
    third_read_count = models.PositiveIntegerField(
        default=0,
        db_default=0,
        help_text="Third reads given to the reader (any status; one withdrawn before it was shown is gone).",
    )
    second_read_count = models.PositiveIntegerField(
        default=0,
        db_default=0,
        help_text="The reader's ratings that gave an example its second settled read (with the third reads: the "
        "study's share of disagreements, consensus.reserve).",
    )
    last_rated_at = models.DateTimeField(null=True, blank=True, help_text="When the reader last rated in this queue.")

    objects = ReaderQueueQuerySet.as_manager()

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["reader", "study", "task"], name="readerqueue_one_per_reader_study_task"),
            models.CheckConstraint(condition=Q(open_count__gte=0, rated_count__gte=0), name="readerqueue_counts_gte_0"),
            models.CheckConstraint(
                condition=Q(held_count__gte=0, third_read_count__gte=0, second_read_count__gte=0),
                name="readerqueue_reserve_counts_gte_0",
            ),
        ]

    def __str__(self) -> str:
        return (
            f"{self.reader} {self.study} {self.task}: {self.open_count} open, {self.held_count} held, "
            f"{self.rated_count} rated"
        )


class Annotation(models.Model):
    """One reader's rating of one example. Stored once, never edited; a coordinator may void it.

    It settles when its undo window closes: at its reader's next submit or at settle_by, whichever
    comes first (consensus.services). Until then its reader may take it back, which deletes it
    (the audit trail keeps it) and routing ignores it; a reader has at most one unsettled rating.
    """

    public_id = models.UUIDField(default=uuid.uuid4, unique=True, editable=False)
    assignment = models.OneToOneField(Assignment, on_delete=models.PROTECT, related_name="annotation")
    example = models.ForeignKey(Example, on_delete=models.PROTECT, related_name="annotations")
    reader = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.PROTECT, related_name="annotations")
    task = models.CharField(max_length=16, choices=Task.choices)
    rating = models.CharField(max_length=24, choices=RatingChoice.choices)
    rationale = models.TextField(blank=True)
    form_token = models.UUIDField(unique=True, help_text="Makes a repeated submission of one form harmless.")
    report_a_type = models.CharField(max_length=16, choices=ReportType.choices, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    duration_ms = models.PositiveIntegerField(
        null=True, blank=True, help_text="First shown -> submitted (with the time spent before any undo)."
    )
    # A row written without the service (bulk loads, fixtures) is settled: final, as it was stored.
    settle_by = models.DateTimeField(
        default=timezone.now, help_text="When its undo window closes (submitted + the study's undo window)."
    )
    settled_at = models.DateTimeField(
        null=True,
        blank=True,
        default=timezone.now,
        help_text="When it became final and routing acted on it; empty while its reader can take it back.",
    )
    guide_version = models.ForeignKey(
        "GuideVersion",
        on_delete=models.PROTECT,
        null=True,
        blank=True,
        related_name="+",
        help_text="The study guide's version the reader had confirmed when rating (empty: the study had no guide).",
    )
    voided_at = models.DateTimeField(null=True, blank=True)
    voided_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.PROTECT, null=True, blank=True, related_name="+"
    )
    void_reason = models.TextField(blank=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["example", "reader"], name="annotation_one_per_example_and_reader"),
            models.CheckConstraint(condition=rating_fits_task(), name="annotation_rating_fits_task"),
            models.CheckConstraint(
                condition=Q(rating__in=RATINGS_WITHOUT_RATIONALE) | ~Q(rationale=""),
                name="annotation_rationale_unless_realistic_or_equivalent",
            ),
            models.CheckConstraint(
                condition=Q(voided_at__isnull=True) | ~Q(void_reason=""), name="annotation_void_has_reason"
            ),
            models.CheckConstraint(condition=rationale_fits(), name="annotation_rationale_max_length"),
            # Settling the previous rating is part of every submit: one rating at a time can be undone.
            models.UniqueConstraint(
                fields=["reader"], condition=Q(settled_at__isnull=True), name="annotation_one_unsettled_per_reader"
            ),
            models.CheckConstraint(
                condition=Q(voided_at__isnull=True) | Q(settled_at__isnull=False), name="annotation_voided_is_settled"
            ),
        ]
        indexes = [
            # The worker's sweep: the unsettled ratings whose window has closed.
            models.Index(fields=["settle_by"], condition=Q(settled_at__isnull=True), name="annotation_unsettled_due"),
        ]

    def __str__(self) -> str:
        return f"{self.get_rating_display()} by {self.reader_id} on {self.example_id}"

    @property
    def is_voided(self) -> bool:
        return self.voided_at is not None

    @property
    def is_settled(self) -> bool:
        return self.settled_at is not None


class AuditAction(models.TextChoices):
    ASSIGNED = "assigned", "Assigned"
    WITHDRAWN = "withdrawn", "Assignment withdrawn"
    SUBMITTED = "submitted", "Rating submitted"
    VOIDED = "voided", "Rating voided"
    THIRD_READ_ROUTED = "third_read_routed", "Third read assigned"
    ADJUDICATION_ROUTED = "adjudication_routed", "Adjudication assigned"
    UNROUTED = "unrouted", "Waiting for an eligible person"
    CONSENSUS = "consensus", "Consensus reached"
    CONSENSUS_WITHDRAWN = "consensus_withdrawn", "Consensus withdrawn"
    ADJUDICATED = "adjudicated", "Adjudicated"
    UNDONE = "undone", "Rating taken back by its reader"
    MEMBER_ADDED = "member_added", "Member added"
    MEMBER_CHANGED = "member_changed", "Member changed"
    GUIDE_PUBLISHED = "guide_published", "Guide version published"
    GUIDE_CONFIRMED = "guide_confirmed", "Guide version confirmed"
    PRACTICE_IMPORTED = "practice_imported", "Practice items imported"
    PRACTICE_SETTINGS = "practice_settings", "Practice requirement changed"
    MARGINS_CHANGED = "margins_changed", "Analysis margins changed"
    STUDY_CREATED = "study_created", "Study created"
    UNDO_WINDOW_CHANGED = "undo_window_changed", "Undo window changed"
    LICENSE_CHANGED = "license_changed", "Licence changed"


def _refuse_change(model: type[models.Model]) -> TypeError:
    return TypeError(f"{str(model._meta.verbose_name_plural).capitalize()} are append-only.")


class AppendOnlyQuerySet(models.QuerySet):
    """Rows that are written once and never changed or deleted (audit trails)."""

    def update(self, **kwargs):
        raise _refuse_change(self.model)

    def delete(self):
        raise _refuse_change(self.model)


class AppendOnlyModel(models.Model):
    """A model whose rows are written once: saving an existing row or deleting one is refused."""

    class Meta:
        abstract = True

    def save(self, *args, **kwargs) -> None:
        if self.pk is not None:
            raise _refuse_change(type(self))
        super().save(*args, **kwargs)

    def delete(self, *args, **kwargs):
        raise _refuse_change(type(self))


class AuditEventQuerySet(AppendOnlyQuerySet):
    def record(
        self,
        action: str,
        *,
        study: Study,
        actor=None,
        example: Example | None = None,
        subject=None,
        before: dict | None = None,
        after: dict | None = None,
    ) -> "AuditEvent":
        event = self.model(
            action=action,
            study=study,
            actor=actor if actor is not None and actor.is_authenticated else None,
            example=example,
            subject=subject,
            before=before or {},
            after=after or {},
        )
        # Written on most requests: without the ORM's query compilation (annotation.rows.insert).
        self._for_write = True
        return insert(event, connections[self.db])


class AuditEvent(AppendOnlyModel):
    """Who did what to which example or reader, when: written in the same transaction as the change.

    Append-only: the application never updates or deletes a row (on PostgreSQL a trigger
    refuses it too).
    """

    created_at = models.DateTimeField(auto_now_add=True, db_index=True)
    study = models.ForeignKey(Study, on_delete=models.PROTECT, related_name="audit_events")
    action = models.CharField(max_length=32, choices=AuditAction.choices)
    actor = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        on_delete=models.PROTECT,
        null=True,
        blank=True,
        related_name="+",
        help_text="Who made the change; empty for the system's routing.",
    )
    example = models.ForeignKey(Example, on_delete=models.PROTECT, null=True, blank=True, related_name="audit_events")
    subject = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        on_delete=models.PROTECT,
        null=True,
        blank=True,
        related_name="+",
        help_text="The reader or adjudicator the change concerns.",
    )
    before = models.JSONField(default=dict, blank=True)
    after = models.JSONField(default=dict, blank=True)

    objects = AuditEventQuerySet.as_manager()

    class Meta:
        ordering = ["created_at", "pk"]
        indexes = [models.Index(fields=["study", "example"]), models.Index(fields=["study", "subject"])]

    def __str__(self) -> str:
        return f"{self.created_at:%Y-%m-%d %H:%M:%S} {self.action}"


# --- The reader guide and the practice round ---------------------------------------------------


class GuideVersionQuerySet(AppendOnlyQuerySet):
    def current(self, study: Study | int) -> "GuideVersion | None":
        """The study's guide in force: its newest version (None if it has no guide)."""
        return self.filter(study=study).order_by("-number").first()


class GuideVersion(AppendOnlyModel):
    """One version of a study's reader guide (Markdown, written by its coordinator).

    Every edit adds a version; none is ever changed or deleted, so each annotation can name the
    version its reader had confirmed. Never part of a release unless asked for (guide.md).
    """

    study = models.ForeignKey(Study, on_delete=models.PROTECT, related_name="guide_versions")
    number = models.PositiveIntegerField()
    text = models.TextField(help_text="Markdown.")
    author = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.PROTECT, null=True, blank=True, related_name="+"
    )
    created_at = models.DateTimeField(auto_now_add=True)

    objects = GuideVersionQuerySet.as_manager()

    class Meta:
        ordering = ["study", "number"]
        constraints = [
            models.UniqueConstraint(fields=["study", "number"], name="guideversion_unique_number_per_study"),
            models.CheckConstraint(condition=Q(number__gte=1), name="guideversion_number_from_1"),
            models.CheckConstraint(condition=guide_text_fits(), name="guideversion_text_max_length"),
        ]

    def __str__(self) -> str:
        return f"{self.study} guide v{self.number}"


class GuideAcknowledgement(AppendOnlyModel):
    """A reader confirmed, at created_at, that they read one version of a study's guide."""

    version = models.ForeignKey(GuideVersion, on_delete=models.PROTECT, related_name="acknowledgements")
    study = models.ForeignKey(Study, on_delete=models.PROTECT, related_name="+", editable=False)
    reader = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.PROTECT, related_name="+")
    created_at = models.DateTimeField(auto_now_add=True)

    objects = AppendOnlyQuerySet.as_manager()

    class Meta:
        ordering = ["created_at", "pk"]
        constraints = [
            models.UniqueConstraint(fields=["version", "reader"], name="guideack_once_per_version_and_reader"),
        ]
        indexes = [models.Index(fields=["study", "reader"])]

    def __str__(self) -> str:
        return f"{self.reader} read {self.version}"


class PracticeItem(models.Model):
    """A calibration item with a reference rating: rated before real items, never part of the data.

    It lives apart from pairs and examples, so sampling, routing, progress, analysis and
    releases (which read only those) cannot meet it. A Task 1 item shows one report of its
    pair (report_type); a Task 2 item both, as Report A and B in a drawn order.
    """

    public_id = models.UUIDField(default=uuid.uuid4, unique=True, editable=False)
    study = models.ForeignKey(Study, on_delete=models.CASCADE, related_name="practice_items")
    task = models.CharField(max_length=16, choices=Task.choices)
    report_type = models.CharField(max_length=16, choices=ReportType.choices, blank=True)
    source = models.CharField(
        max_length=300,
        blank=True,
        help_text="The pair's origin (dataset/study_id/variation); coordinators only.",
    )
    indication = models.TextField(blank=True)
    comparison = models.TextField(blank=True)
    technique = models.TextField(blank=True)
    original_findings = models.TextField(blank=True)
    original_impression = models.TextField(blank=True)
    alternative_findings = models.TextField(blank=True)
    alternative_impression = models.TextField(blank=True)
    reference_rating = models.CharField(max_length=24, choices=RatingChoice.choices)
    explanation = models.TextField()
    content_key = models.CharField(max_length=64, editable=False, help_text="SHA-256 of the texts shown.")
    position = models.PositiveIntegerField(default=0, help_text="Readers practise in this order.")
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["study", "task", "position", "pk"]
        constraints = [
            models.UniqueConstraint(
                fields=["study", "task", "report_type", "content_key"], name="practiceitem_unique_content"
            ),
            models.CheckConstraint(
                condition=(Q(task=Task.REALISM) & Q(report_type__in=ReportType.values))
                | (Q(task=Task.EQUIVALENCE) & Q(report_type="")),
                name="practiceitem_report_type_matches_task",
            ),
            models.CheckConstraint(
                condition=Q(task=Task.REALISM, reference_rating__in=TASK_RATINGS[Task.REALISM])
                | Q(task=Task.EQUIVALENCE, reference_rating__in=TASK_RATINGS[Task.EQUIVALENCE]),
                name="practiceitem_reference_fits_task",
            ),
            models.CheckConstraint(condition=~Q(explanation=""), name="practiceitem_has_explanation"),
        ]

    def __str__(self) -> str:
        suffix = f":{self.report_type}" if self.report_type else ""
        return f"practice {self.task}{suffix} #{self.position}"

    def save(self, *args, **kwargs) -> None:
        self.content_key = self.shown_text_key()
        super().save(*args, **kwargs)

    def shown_text_key(self) -> str:
        """SHA-256 of the texts this item shows: an item is imported once per study, task and side."""
        shown = [self.indication, self.comparison, self.technique]
        if self.task == Task.REALISM:
            shown += list(self.report(self.report_type))
        else:
            shown += [*self.report(ReportType.ORIGINAL), *self.report(ReportType.ALTERNATIVE)]
        return hashlib.sha256("\x1f".join(shown).encode()).hexdigest()

    def report(self, report_type: str) -> tuple[str, str]:
        """(findings, impression) of one side of the pair."""
        if report_type == ReportType.ORIGINAL:
            return self.original_findings, self.original_impression
        return self.alternative_findings, self.alternative_impression


class PracticeAttempt(models.Model):
    """One reader's practice rating of one practice item: opened, then rated once.

    Kept apart from annotations: never counted, routed, analysed or released.
    """

    public_id = models.UUIDField(default=uuid.uuid4, unique=True, editable=False)
    item = models.ForeignKey(PracticeItem, on_delete=models.PROTECT, related_name="attempts")
    reader = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.PROTECT, related_name="+")
    study = models.ForeignKey(Study, on_delete=models.CASCADE, related_name="+", editable=False)
    task = models.CharField(max_length=16, choices=Task.choices, editable=False)
    report_a_type = models.CharField(max_length=16, choices=ReportType.choices, blank=True)
    first_shown_at = models.DateTimeField(null=True, blank=True)
    rating = models.CharField(max_length=24, choices=RatingChoice.choices, blank=True)
    rationale = models.TextField(blank=True)
    form_token = models.UUIDField(null=True, blank=True, unique=True)
    rated_at = models.DateTimeField(null=True, blank=True)
    duration_ms = models.PositiveIntegerField(null=True, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["created_at", "pk"]
        constraints = [
            models.UniqueConstraint(fields=["item", "reader"], name="practiceattempt_once_per_item_and_reader"),
            models.CheckConstraint(
                condition=Q(rating="", rated_at__isnull=True)
                | (~Q(rating="") & Q(rated_at__isnull=False) & Q(form_token__isnull=False)),
                name="practiceattempt_rated_consistently",
            ),
            models.CheckConstraint(
                condition=Q(rating="") | Q(rating__in=RATINGS_WITHOUT_RATIONALE) | ~Q(rationale=""),
                name="practiceattempt_rationale_unless_realistic_or_equivalent",
            ),
            models.CheckConstraint(condition=rationale_fits(), name="practiceattempt_rationale_max_length"),
        ]
        indexes = [models.Index(fields=["reader", "study", "task"])]

    def __str__(self) -> str:
        return f"{self.reader} practised {self.item}"

    @property
    def is_rated(self) -> bool:
        return self.rated_at is not None

    @property
    def agrees(self) -> bool | None:
        return (self.rating == self.item.reference_rating) if self.is_rated else None
