from django.contrib.auth import get_user_model
from rest_framework import serializers

from annotation.models import Task
from judges.services import JUDGE_MARK


class EnrolJudgeRequestSerializer(serializers.Serializer):
    username = serializers.CharField(help_text="An account created with `create_user <name> --role judge`.")
    tasks = serializers.ListField(
        child=serializers.ChoiceField(choices=Task.values), min_length=1, default=list(Task.values)
    )
    per_variation = serializers.IntegerField(
        min_value=1, max_value=100_000, required=False, allow_null=True, help_text="Empty: every sampled pair."
    )
    seed = serializers.IntegerField(min_value=0, max_value=2**31 - 1, required=False, allow_null=True)
    practise = serializers.BooleanField(
        required=False,
        allow_null=True,
        help_text="true: the judge confirms the study's guide and rates its practice items first, as a reader does; "
        "false: it skips them. Empty: false for a new enrolment, unchanged otherwise.",
    )

    def validate_username(self, value: str):
        user = get_user_model().objects.filter(username=value).first()
        if user is None:
            raise serializers.ValidationError(f"No user '{value}'.")
        return user


class JudgeEnrolmentSerializer(serializers.Serializer):
    """One enrolled judge and its reads: never part of the study's progress or the readers' workload."""

    id = serializers.UUIDField(source="public_id")
    username = serializers.CharField(source="judge.username")
    kind = serializers.SerializerMethodField(help_text=f'Always "{JUDGE_MARK}".')
    tasks = serializers.ListField(child=serializers.CharField())
    per_variation = serializers.IntegerField(allow_null=True)
    seed = serializers.IntegerField()
    practise = serializers.BooleanField(help_text="Goes through the study's guide and practice round first.")
    reads = serializers.DictField(
        source="read_counts",
        child=serializers.DictField(child=serializers.IntegerField()),
        help_text="Per task: {'rated': n, 'open': n}.",
    )

    def get_kind(self, enrolment: object) -> str:
        return JUDGE_MARK


class EnrolJudgeResultSerializer(JudgeEnrolmentSerializer):
    added = serializers.IntegerField(help_text="Reads put in the judge's queue by this request.")
    detail = serializers.CharField()
