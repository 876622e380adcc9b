"""The reader API's requests and answers (the blinded item itself is annotation.serializers's, which judges share)."""

from rest_framework import serializers

from annotation.models import (
    RATIONALE_MAX_LENGTH,
    RatingChoice,
)
from annotation.serializers import ShownLabelSerializer, ShownReportSerializer, StudyNameSerializer


class RatingRequestSerializer(serializers.Serializer):
    rating = serializers.ChoiceField(choices=RatingChoice.choices)
    rationale = serializers.CharField(
        allow_blank=True,
        required=False,
        default="",
        max_length=RATIONALE_MAX_LENGTH,
        error_messages={"max_length": f"The rationale is longer than {RATIONALE_MAX_LENGTH:,} characters. Shorten it."},
    )
    form_token = serializers.UUIDField()


class RatingResultSerializer(serializers.Serializer):
    rating = serializers.CharField()
    rationale = serializers.CharField(allow_blank=True)
    created = serializers.BooleanField(help_text="False when this form token had already been stored.")
    next = serializers.UUIDField(allow_null=True, help_text="The next open assignment of this queue.")
    undo_seconds = serializers.IntegerField(
        help_text="For how many more seconds you can take this rating back (POST /api/reading/undo/), unless you "
        "submit another rating first; 0 once it has settled (or when the study's undo is off)."
    )


class UndoResultSerializer(serializers.Serializer):
    id = serializers.UUIDField(help_text="The assignment, open again and first in its queue: fetch it to rate it.")
    rating = serializers.CharField(help_text="The rating you took back.")
    rationale = serializers.CharField(allow_blank=True, help_text="Its rationale.")
    detail = serializers.CharField()


class RatingErrorSerializer(serializers.Serializer):
    detail = serializers.CharField()
    field = serializers.CharField(allow_null=True)


class ChangedLineSerializer(serializers.Serializer):
    kind = serializers.ChoiceField(choices=["added", "removed", "same"])
    text = serializers.CharField(allow_blank=True)


class ReaderGuideSerializer(serializers.Serializer):
    study = serializers.CharField()
    version = serializers.IntegerField()
    text = serializers.CharField()
    html = serializers.CharField()
    confirmed_version = serializers.IntegerField(allow_null=True)
    needs_confirmation = serializers.BooleanField()
    changes = ChangedLineSerializer(many=True, allow_null=True, help_text="Since the version you confirmed.")


class ConfirmGuideRequestSerializer(serializers.Serializer):
    study = serializers.SlugField(max_length=64)
    version = serializers.IntegerField(min_value=1, max_value=2**31 - 1)


class ConfirmGuideResultSerializer(serializers.Serializer):
    study = serializers.CharField()
    version = serializers.IntegerField()
    confirmed_at = serializers.DateTimeField()
    created = serializers.BooleanField()


class PendingStepSerializer(serializers.Serializer):
    detail = serializers.CharField()
    required = serializers.ChoiceField(choices=["guide", "practice"])
    study = serializers.CharField()
    task = serializers.CharField()


class PracticeItemSerializer(serializers.Serializer):
    """A practice item exactly as a real item is shown (same blinding), plus how many remain."""

    id = serializers.UUIDField()
    study = StudyNameSerializer()
    practice = serializers.BooleanField()
    task = serializers.CharField()
    question = serializers.CharField()
    remaining = serializers.IntegerField(help_text="Practice items of this task still to rate, this one included.")
    context = serializers.DictField(child=serializers.CharField(allow_blank=True))
    reports = ShownReportSerializer(many=True)
    labels = ShownLabelSerializer(many=True)
    form_token = serializers.UUIDField()


class PracticeResultSerializer(serializers.Serializer):
    rating = serializers.CharField()
    rationale = serializers.CharField(allow_blank=True)
    reference_rating = serializers.CharField()
    explanation = serializers.CharField()
    agrees = serializers.BooleanField()
    created = serializers.BooleanField()
    remaining = serializers.IntegerField(help_text="Practice items of this task still to rate.")


class PriorRatingSerializer(serializers.Serializer):
    """One of the three readers' ratings an adjudicator weighs: shuffled, without names."""

    label = serializers.CharField()
    rationale = serializers.CharField(allow_blank=True)
    order_differs = serializers.BooleanField(
        help_text="Task 2: this reader saw Report A and B the other way round from you."
    )


class AdjudicationItemSerializer(serializers.Serializer):
    """An adjudication as the adjudicator's page shows it: the blinded item, the three ratings, no names."""

    id = serializers.UUIDField()
    study = StudyNameSerializer()
    task = serializers.CharField()
    question = serializers.CharField()
    position = serializers.IntegerField(help_text="Of your adjudications in this study: decided ones, plus one.")
    total = serializers.IntegerField(help_text="Your adjudications in this study, decided and open.")
    context = serializers.DictField(child=serializers.CharField(allow_blank=True))
    reports = ShownReportSerializer(many=True)
    labels = ShownLabelSerializer(many=True)
    priors = PriorRatingSerializer(many=True)
    status = serializers.ChoiceField(choices=["open", "done"])
    form_token = serializers.UUIDField(allow_null=True, help_text="Send it back with the decision; new on every fetch.")
    rating = serializers.CharField(allow_null=True, help_text="Your decision, once made.")
    rationale = serializers.CharField(allow_null=True)


class DecisionResultSerializer(serializers.Serializer):
    rating = serializers.CharField()
    rationale = serializers.CharField()
    created = serializers.BooleanField(help_text="False: this form_token was already stored (a retry).")
    next = serializers.UUIDField(allow_null=True, help_text="Your next open adjudication in this study, if any.")
