from rest_framework import serializers

from annotation.models import (
    CREATED_SETTINGS,
    GUIDE_MAX_LENGTH,
    Dataset,
    Study,
)


class StudySerializer(serializers.ModelSerializer):
    id = serializers.UUIDField(source="public_id", read_only=True)
    variations = serializers.SerializerMethodField()

    class Meta:
        model = Study
        fields = [
            "id",
            "slug",
            "name",
            "reads_per_example",
            "keep_versions_apart",
            "undo_window_seconds",
            "reserve_percent",
            "sample_seed",
            "sample_per_variation",
            "sample_datasets",
            "sample_one_pair_per_exam",
            "sampled_at",
            "variations",
        ]
        read_only_fields = [
            "reads_per_example",
            "sample_seed",
            "sample_per_variation",
            "sample_datasets",
            "sample_one_pair_per_exam",
            "sampled_at",
        ]

    def get_variations(self, study: Study) -> list[dict]:
        return [{"key": v.key, "label": v.label, "dimension": v.dimension} for v in study.variations.all()]

    def create(self, validated_data: dict) -> Study:
        chosen = {key: validated_data[key] for key in CREATED_SETTINGS if key in validated_data}
        return Study.objects.create_study(
            slug=validated_data["slug"], name=validated_data["name"], actor=self.context["request"].user, **chosen
        )


class DatasetSerializer(serializers.ModelSerializer):
    class Meta:
        model = Dataset
        fields = ["key", "name", "study_id_prefix", "numeric_study_ids"]


class SummaryRowSerializer(serializers.Serializer):
    """One (dataset, variation) row of Study.candidate_summary()."""

    dataset = serializers.CharField()
    variation = serializers.CharField()
    position = serializers.IntegerField()
    total = serializers.IntegerField()
    sampled = serializers.IntegerField()
    verdicts = serializers.DictField(child=serializers.IntegerField())


class ImportRequestSerializer(serializers.Serializer):
    # An empty file is the import's own problem, reported in the documented {"errors": [...]} form.
    file = serializers.FileField(allow_empty_file=True)
    dry_run = serializers.BooleanField(default=False)


class ProblemSerializer(serializers.Serializer):
    file = serializers.CharField(required=False, help_text="The file or zip member, when an import reads several.")
    line = serializers.IntegerField(allow_null=True)
    field = serializers.CharField(allow_null=True)
    message = serializers.CharField()


class ImportResultSerializer(serializers.Serializer):
    rows = serializers.IntegerField()
    created = serializers.IntegerField()
    unchanged = serializers.IntegerField()
    dry_run = serializers.BooleanField()
    summary = serializers.CharField()


class ImportErrorSerializer(serializers.Serializer):
    errors = ProblemSerializer(many=True)


class SampleRequestSerializer(serializers.Serializer):
    per_variation = serializers.IntegerField(min_value=1, max_value=100_000)
    seed = serializers.IntegerField(min_value=0, max_value=2**31 - 1, required=False, allow_null=True)
    datasets = serializers.ListField(child=serializers.CharField(), required=False)
    one_pair_per_exam = serializers.BooleanField(
        required=False,
        default=False,
        help_text="Draw at most one pair per exam (a cell passes over the exams drawn in an earlier one).",
    )


class SampleCellSerializer(serializers.Serializer):
    dataset = serializers.CharField()
    variation = serializers.CharField()
    accepted = serializers.IntegerField()
    drawn = serializers.IntegerField()
    skipped = serializers.IntegerField(help_text="Candidates passed over: their exam was drawn already.")


class SampleResultSerializer(serializers.Serializer):
    per_variation = serializers.IntegerField()
    seed = serializers.IntegerField()
    pairs = serializers.IntegerField()
    one_pair_per_exam = serializers.BooleanField()
    skipped = serializers.IntegerField()
    summary = serializers.CharField()
    shortfalls = serializers.ListField(child=serializers.CharField())
    cells = SampleCellSerializer(many=True)


class DetailSerializer(serializers.Serializer):
    detail = serializers.CharField()


# --- Reader API: exactly what the reading page shows, nothing more ------------------------------


class ShownReportSerializer(serializers.Serializer):
    heading = serializers.CharField()
    findings = serializers.CharField(allow_blank=True)
    impression = serializers.CharField(allow_blank=True)


class ShownLabelSerializer(serializers.Serializer):
    value = serializers.CharField()
    label = serializers.CharField()
    definition = serializers.CharField()
    rationale_required = serializers.BooleanField(source="needs_rationale")


class StudyNameSerializer(serializers.Serializer):
    slug = serializers.SlugField()
    name = serializers.CharField()


class ReadingItemSerializer(serializers.Serializer):
    """A blinded assignment: no report type, variation, dataset, other ratings or internal ids."""

    id = serializers.UUIDField()
    study = StudyNameSerializer(help_text="The study this item belongs to (its slug limits next to it: ?study=).")
    task = serializers.CharField()
    question = serializers.CharField()
    position = serializers.IntegerField(
        allow_null=True,
        help_text="Item `position` of this queue: your ratings in it so far, plus one. Null once rated. There is "
        "no total: more items may come as the study goes on.",
    )
    context = serializers.DictField(child=serializers.CharField(allow_blank=True))
    reports = ShownReportSerializer(many=True)
    labels = ShownLabelSerializer(many=True)
    status = serializers.ChoiceField(choices=["open", "done", "voided"])
    form_token = serializers.UUIDField(allow_null=True, help_text="Send it back with the rating; new on every fetch.")
    rating = serializers.CharField(allow_null=True, help_text="Your stored rating, once rated.")
    rationale = serializers.CharField(allow_null=True)


def reading_item_data(payload: dict) -> dict:
    """ReadingItemSerializer(payload).data, built directly (the schema still comes from the serializer).

    A serializer deep-copies its declared fields, and those of the nested study, reports and labels,
    on every call: about half of a reader's next item that is not the database. Every value is what
    the serializer's field makes of it (UUIDs and text as strings, a null left null), in its field
    order; tests/annotation/test_reading_item_data.py holds the two equal, byte for byte, for every
    kind of item, and fails when a field is added to one and not the other."""
    study = payload["study"]
    return {
        "id": str(payload["id"]),
        "study": {"slug": str(study["slug"]), "name": str(study["name"])},
        "task": str(payload["task"]),
        "question": str(payload["question"]),
        "position": None if payload["position"] is None else int(payload["position"]),
        "context": {str(name): _text_or_null(text) for name, text in payload["context"].items()},
        "reports": [
            {"heading": str(report.heading), "findings": str(report.findings), "impression": str(report.impression)}
            for report in payload["reports"]
        ],
        "labels": [
            {
                "value": str(label.value),
                "label": str(label.label),
                "definition": str(label.definition),
                "rationale_required": bool(label.needs_rationale),
            }
            for label in payload["labels"]
        ],
        "status": _text_or_null(payload["status"]),
        "form_token": _text_or_null(payload["form_token"]),
        "rating": _text_or_null(payload["rating"]),
        "rationale": _text_or_null(payload["rationale"]),
    }


def _text_or_null(value) -> str | None:
    return None if value is None else str(value)


class QueueSerializer(serializers.Serializer):
    study = serializers.CharField(source="study_slug")
    study_name = serializers.CharField()
    task = serializers.CharField()
    done = serializers.IntegerField(help_text="Ratings you have given in this queue.")
    waiting = serializers.BooleanField(
        help_text="Whether an item waits for you now. More may come later, as the study goes on."
    )


# --- The reader guide and the practice round -----------------------------------------------------


class GuideRequestSerializer(serializers.Serializer):
    text = serializers.CharField(max_length=GUIDE_MAX_LENGTH, trim_whitespace=False, help_text="Markdown.")


class GuideVersionSerializer(serializers.Serializer):
    number = serializers.IntegerField()
    created_at = serializers.DateTimeField()
    author = serializers.CharField(source="author.username", allow_null=True, default=None)


class ConfirmationSerializer(serializers.Serializer):
    username = serializers.CharField()
    version = serializers.IntegerField(allow_null=True, help_text="The newest version they confirmed.")
    confirmed_at = serializers.DateTimeField(allow_null=True)


class StudyGuideSerializer(serializers.Serializer):
    version = serializers.IntegerField(allow_null=True, help_text="The current version (null: no guide).")
    text = serializers.CharField(allow_blank=True)
    html = serializers.CharField(allow_blank=True, help_text="Rendered and sanitized.")
    created = serializers.BooleanField(required=False, help_text="POST: whether a new version was made.")
    versions = GuideVersionSerializer(many=True)
    confirmations = ConfirmationSerializer(many=True)


class PracticeImportResultSerializer(serializers.Serializer):
    created = serializers.IntegerField()
    unchanged = serializers.IntegerField()
    dry_run = serializers.BooleanField()
    by_task = serializers.DictField(child=serializers.IntegerField())


class PracticeSettingsRequestSerializer(serializers.Serializer):
    practice_items_required = serializers.IntegerField(min_value=0, max_value=100, required=False)
    username = serializers.CharField(max_length=150, required=False)
    skip_practice = serializers.BooleanField(required=False)

    def validate(self, attrs: dict) -> dict:
        if ("username" in attrs) != ("skip_practice" in attrs):
            raise serializers.ValidationError("Give username and skip_practice together.")
        if not attrs:
            raise serializers.ValidationError("Give practice_items_required, or username and skip_practice.")
        return attrs


class PracticeTaskAgreementSerializer(serializers.Serializer):
    rated = serializers.IntegerField()
    agreed = serializers.IntegerField()
    percent = serializers.IntegerField()


class PracticeAgreementSerializer(serializers.Serializer):
    username = serializers.CharField()
    tasks = serializers.DictField(child=PracticeTaskAgreementSerializer())


class PracticeStatusSerializer(serializers.Serializer):
    practice_items_required = serializers.IntegerField()
    items = serializers.DictField(child=serializers.IntegerField(), help_text="Practice items per task.")
    skip_practice = serializers.ListField(child=serializers.CharField(), help_text="Members who skip practice.")
    agreement = PracticeAgreementSerializer(many=True)
