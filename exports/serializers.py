from rest_framework import serializers
from rest_framework.reverse import reverse

from exports.models import Release


class ReleaseSerializer(serializers.ModelSerializer):
    id = serializers.UUIDField(source="public_id", read_only=True)
    study = serializers.CharField(source="study.slug", read_only=True)
    datasets = serializers.ListField(
        child=serializers.CharField(), read_only=True, help_text="Empty: every dataset of the study."
    )
    requested_by = serializers.CharField(
        source="requested_by.get_username",
        read_only=True,
        allow_null=True,
        help_text="Username; null for a build made with the export_release command.",
    )
    deleted_by = serializers.CharField(
        source="deleted_by.get_username", read_only=True, allow_null=True, help_text="Who deleted the zip, if anyone."
    )
    row_counts = serializers.DictField(
        child=serializers.IntegerField(), read_only=True, help_text="Data rows per CSV file."
    )
    sha256 = serializers.CharField(read_only=True, help_text="SHA-256 of the zip (hex); empty until the build is done.")
    url = serializers.SerializerMethodField()
    download_url = serializers.SerializerMethodField()

    class Meta:
        model = Release
        fields = [
            "id",
            "study",
            "version",
            "datasets",
            "include_unfinished",
            "include_guide",
            "include_judges",
            "license_text",
            "status",
            "progress",
            "error",
            "row_counts",
            "sha256",
            "requested_by",
            "created_at",
            "finished_at",
            "deleted_at",
            "deleted_by",
            "url",
            "download_url",
        ]
        read_only_fields = fields

    def get_url(self, release: Release) -> str:
        return reverse("release-detail", args=[release.public_id], request=self.context.get("request"))

    def get_download_url(self, release: Release) -> str | None:
        """Where to get the zip, once the build is done (and until the zip is deleted)."""
        if not release.can_download:
            return None
        return reverse("release-download", args=[release.public_id], request=self.context.get("request"))


class ReleaseRequestSerializer(serializers.Serializer):
    version = serializers.CharField(max_length=32, default="1.0.0", help_text="Digits and dots, e.g. 1.0.0.")
    datasets = serializers.ListField(
        child=serializers.CharField(), default=list, help_text="Dataset keys; empty: every dataset of the study."
    )
    include_unfinished = serializers.BooleanField(
        default=False, help_text="Release examples without a consensus too, with an empty consensus rating."
    )
    include_guide = serializers.BooleanField(
        default=False, help_text="Add the study's reader guide (its newest version) as guide.md."
    )
    include_judges = serializers.BooleanField(
        default=False,
        help_text="Add judges/task1_judges.csv and judges/task2_judges.csv: the automated judges' ratings.",
    )
    license_text = serializers.CharField(
        required=False,
        allow_blank=True,
        trim_whitespace=False,
        help_text="LICENSE.txt, exactly as given. Default: the study's licence text.",
    )
