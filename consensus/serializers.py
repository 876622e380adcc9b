"""The coordinator's API: progress, workload, examples, readers and the changes to queues.

Objects are named by their public UUID (id) and people by username; never by primary key.
"""

from django.contrib.auth import get_user_model
from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers

from annotation.models import Assignment, AuditEvent, CandidatePair, Example, MemberRole, Study, Task
from consensus.conflicts import ROW_HIDDEN
from consensus.progress import WaitingFor, waiting_for


class MaskedRowSerializer(serializers.Serializer):
    """A list row that is masked when its pair is hidden from the caller (row.hidden, set by
    consensus.conflicts.mark_hidden): then it is only {"hidden": true, "detail": ...}."""

    hidden = serializers.SerializerMethodField(
        help_text="True: you still have to rate this row's pair; the row has no other field than detail."
    )

    def get_hidden(self, row: object) -> bool:
        return getattr(row, "hidden", False)

    def to_representation(self, instance: object) -> dict:
        if getattr(instance, "hidden", False):
            return {"hidden": True, "detail": ROW_HIDDEN}
        return super().to_representation(instance)


class CandidatePairSerializer(MaskedRowSerializer, serializers.ModelSerializer):
    id = serializers.UUIDField(source="public_id", read_only=True)
    dataset = serializers.CharField(source="dataset.key")
    study_id = serializers.CharField(source="source_study_id")
    reref_variation = serializers.CharField(source="variation.key")

    class Meta:
        model = CandidatePair
        fields = [
            "id",
            "dataset",
            "study_id",
            "reref_variation",
            "verdict",
            "sampled",
            "indication",
            "comparison",
            "technique",
            "original_findings",
            "original_impression",
            "alternative_findings",
            "alternative_impression",
            "hidden",
        ]


# --- Read ---------------------------------------------------------------------------------------


class ProgressRowSerializer(serializers.Serializer):
    variation = serializers.CharField(help_text="Empty on total rows.")
    variation_label = serializers.CharField()
    dimension = serializers.CharField()
    waiting = serializers.IntegerField(help_text="Waiting for reads.")
    third_read = serializers.IntegerField(help_text="Needs a third read.")
    adjudication = serializers.IntegerField(help_text="Needs adjudication.")
    consensus = serializers.IntegerField(help_text="Has a consensus label.")
    total = serializers.IntegerField()
    unrouted = serializers.IntegerField(help_text="Of these, waiting for an eligible reader or adjudicator.")
    settling = serializers.IntegerField(
        help_text="Of these, with a rating still in its reader's undo window: its state changes once it settles."
    )
    percent_done = serializers.IntegerField(help_text="consensus / total, in percent, rounded down.")


class TaskProgressSerializer(serializers.Serializer):
    task = serializers.ChoiceField(choices=Task.choices)
    label = serializers.CharField()
    variations = ProgressRowSerializer(many=True)
    total = ProgressRowSerializer()


class StudyProgressSerializer(serializers.Serializer):
    tasks = TaskProgressSerializer(many=True)
    overall = ProgressRowSerializer()
    unrouted = serializers.IntegerField()


class TaskLoadSerializer(serializers.Serializer):
    task = serializers.ChoiceField(choices=Task.choices)
    open = serializers.IntegerField()
    done = serializers.IntegerField()
    assigned = serializers.IntegerField()


class MemberWorkloadSerializer(serializers.Serializer):
    username = serializers.CharField()
    full_name = serializers.CharField()
    subspecialty = serializers.CharField()
    roles = serializers.ListField(child=serializers.ChoiceField(choices=MemberRole.choices), help_text="Active roles.")
    inactive_roles = serializers.ListField(child=serializers.ChoiceField(choices=MemberRole.choices))
    max_assignments = serializers.IntegerField(allow_null=True, help_text="Cap on initial reads; null = no cap.")
    initial_reads = serializers.IntegerField(help_text="Active initial reads (what the cap limits).")
    tasks = TaskLoadSerializer(many=True)
    voided = serializers.IntegerField(help_text="Ratings a coordinator voided.")
    adjudications_open = serializers.IntegerField()
    adjudications_done = serializers.IntegerField()
    warning = serializers.CharField(
        help_text="Conflict of interest: the member also holds the Coordinator or Data manager role; empty if not."
    )
    open = serializers.IntegerField()
    done = serializers.IntegerField()
    percent_done = serializers.IntegerField()


class ExampleSummarySerializer(serializers.Serializer):
    id = serializers.UUIDField(source="public_id")
    task = serializers.ChoiceField(choices=Task.choices)
    report_type = serializers.CharField(help_text="original or alternative (Task 1); empty for Task 2.")
    dataset = serializers.CharField(source="pair.dataset.key")
    study_id = serializers.CharField(source="pair.source_study_id", help_text="The report's id in its dataset.")
    reref_variation = serializers.CharField(source="pair.variation.key")
    state = serializers.CharField()
    unrouted = serializers.BooleanField()
    waiting_for = serializers.SerializerMethodField()

    @extend_schema_field(serializers.ChoiceField(choices=[*WaitingFor.values, ""]))
    def get_waiting_for(self, example: Example) -> str:
        return waiting_for(example)


class UnroutedExampleSerializer(MaskedRowSerializer, ExampleSummarySerializer):
    ratings = serializers.IntegerField(source="n_ratings", help_text="Ratings that are not voided.")
    reason = serializers.CharField(source="unrouted_reason", help_text="Why nobody eligible was available.")


def _username(user) -> str | None:
    return user.get_username() if user is not None else None


class AssignmentRecordSerializer(serializers.Serializer):
    id = serializers.UUIDField(source="public_id")
    reader = serializers.CharField(source="reader.username")
    slot = serializers.IntegerField(help_text="1 and 2: initial reads; 3: the third read.")
    status = serializers.CharField()
    created_at = serializers.DateTimeField()
    first_shown_at = serializers.DateTimeField(allow_null=True)
    report_a_type = serializers.CharField(help_text="Task 2: the report shown as Report A.")


class AnnotationRecordSerializer(serializers.Serializer):
    id = serializers.UUIDField(source="public_id")
    assignment = serializers.UUIDField(source="assignment.public_id")
    reader = serializers.CharField(source="reader.username")
    rating = serializers.CharField()
    rationale = serializers.CharField()
    report_a_type = serializers.CharField()
    created_at = serializers.DateTimeField()
    duration_ms = serializers.IntegerField(allow_null=True)
    settle_by = serializers.DateTimeField(help_text="When its reader's undo window closes (or closed).")
    settled_at = serializers.DateTimeField(
        allow_null=True, help_text="When routing acted on it; null while its reader can still take it back."
    )
    voided = serializers.BooleanField(source="is_voided")
    voided_at = serializers.DateTimeField(allow_null=True)
    voided_by = serializers.SerializerMethodField()
    void_reason = serializers.CharField()

    def get_voided_by(self, annotation) -> str | None:
        return _username(annotation.voided_by)


class AdjudicationRecordSerializer(serializers.Serializer):
    id = serializers.UUIDField(source="public_id")
    adjudicator = serializers.CharField(source="adjudicator.username")
    status = serializers.CharField()
    rating = serializers.CharField()
    rationale = serializers.CharField()
    created_at = serializers.DateTimeField()
    decided_at = serializers.DateTimeField(allow_null=True)


class ConsensusRecordSerializer(serializers.Serializer):
    rating = serializers.CharField()
    label_source = serializers.CharField()
    n_annotations = serializers.IntegerField()
    decided_at = serializers.DateTimeField()


class AuditEventSerializer(MaskedRowSerializer):
    created_at = serializers.DateTimeField()
    action = serializers.CharField()
    action_label = serializers.CharField(source="get_action_display")
    actor = serializers.SerializerMethodField(help_text="Who made the change; null for the system's routing.")
    subject = serializers.SerializerMethodField(help_text="The reader or adjudicator the change concerns.")
    example = serializers.SerializerMethodField()
    before = serializers.JSONField()
    after = serializers.JSONField()

    def get_actor(self, event: AuditEvent) -> str | None:
        return _username(event.actor)

    def get_subject(self, event: AuditEvent) -> str | None:
        return _username(event.subject)

    @extend_schema_field(serializers.UUIDField(allow_null=True))
    def get_example(self, event: AuditEvent) -> str | None:
        return str(event.example.public_id) if event.example_id else None


class ReportTextSerializer(serializers.Serializer):
    report_type = serializers.CharField()
    findings = serializers.CharField()
    impression = serializers.CharField()


class ContextSerializer(serializers.Serializer):
    indication = serializers.CharField()
    comparison = serializers.CharField()
    technique = serializers.CharField()


class ExampleDetailSerializer(serializers.Serializer):
    example = ExampleSummarySerializer()
    context = ContextSerializer(source="example.pair")
    reports = ReportTextSerializer(many=True)
    assignments = AssignmentRecordSerializer(many=True)
    annotations = AnnotationRecordSerializer(many=True, help_text="Every rating, voided ones included.")
    adjudications = AdjudicationRecordSerializer(many=True)
    consensus = ConsensusRecordSerializer(allow_null=True)
    history = AuditEventSerializer(many=True, help_text="The example's audit trail, oldest first.")


class MembershipSerializer(serializers.Serializer):
    role = serializers.ChoiceField(choices=MemberRole.choices)
    active = serializers.BooleanField()
    max_assignments = serializers.IntegerField(allow_null=True)


class ReaderAssignmentSerializer(MaskedRowSerializer, AssignmentRecordSerializer):
    example = ExampleSummarySerializer()
    rating = serializers.SerializerMethodField(help_text="The rating given, if any (also when voided).")

    def get_rating(self, assignment: Assignment) -> str | None:
        annotation = getattr(assignment, "annotation", None)
        return annotation.rating if annotation is not None else None


class ReaderAdjudicationSerializer(MaskedRowSerializer, AdjudicationRecordSerializer):
    example = ExampleSummarySerializer()


class ReaderDetailSerializer(serializers.Serializer):
    username = serializers.CharField(source="user.username")
    full_name = serializers.CharField(source="user.get_full_name")
    subspecialty = serializers.CharField()
    memberships = MembershipSerializer(many=True)
    assignments = ReaderAssignmentSerializer(many=True)
    adjudications = ReaderAdjudicationSerializer(many=True)
    history = AuditEventSerializer(many=True, help_text="Audit events concerning this person, oldest first.")
    warning = serializers.CharField(help_text="Conflict of interest: also a coordinator or data manager; or empty.")


# --- Write --------------------------------------------------------------------------------------


def _active_users():
    return get_user_model().objects.filter(is_active=True)


class UsernameField(serializers.SlugRelatedField):
    default_error_messages = {
        "does_not_exist": "No active user named '{value}'.",
        "invalid": "Give a username.",
    }

    def __init__(self, **kwargs) -> None:
        super().__init__(slug_field=get_user_model().USERNAME_FIELD, queryset=_active_users(), **kwargs)


class AutoAssignRequestSerializer(serializers.Serializer):
    tasks = serializers.ListField(
        child=serializers.ChoiceField(choices=Task.choices),
        required=False,
        allow_empty=True,
        help_text="The tasks to assign; both when left out or empty.",
    )


class AssignResultSerializer(serializers.Serializer):
    assigned = serializers.IntegerField()
    unfilled = serializers.IntegerField()
    summary = serializers.CharField()
    notes = serializers.ListField(child=serializers.CharField())
    readers = serializers.CharField(help_text="How many readers the study needs, and which exams set the figure.")


class AddMemberRequestSerializer(serializers.Serializer):
    username = UsernameField()
    role = serializers.ChoiceField(choices=MemberRole.choices)
    max_assignments = serializers.IntegerField(
        min_value=0, required=False, allow_null=True, help_text="Cap on initial reads; null or left out = no cap."
    )


class MemberSerializer(serializers.Serializer):
    username = serializers.CharField(source="user.username")
    role = serializers.ChoiceField(choices=MemberRole.choices)
    active = serializers.BooleanField()
    max_assignments = serializers.IntegerField(allow_null=True)
    warning = serializers.CharField(
        default="", help_text="Conflict of interest: the user also holds the Coordinator or Data manager role."
    )


class ManualAssignRequestSerializer(serializers.Serializer):
    """Needs the study in its context: the example must belong to it."""

    example = serializers.UUIDField(help_text="The id of one of the study's examples.")
    reader = UsernameField()

    def validate_example(self, value) -> Example:
        study: Study = self.context["study"]
        example = Example.objects.filter(study=study, public_id=value).first()
        if example is None:
            raise serializers.ValidationError(f"No example with id {value} in study {study.slug}.")
        return example


class ReaderRequestSerializer(serializers.Serializer):
    reader = UsernameField()


class VoidRequestSerializer(serializers.Serializer):
    reason = serializers.CharField(max_length=2000, help_text="Why the rating is voided; kept in the audit trail.")


class WithdrawResultSerializer(serializers.Serializer):
    example = ExampleSummarySerializer()
