"""Readers' opaque keys in a study's results: what the coordinator's page maps back to accounts."""

import hashlib
import hmac

from annotation.models import Study, StudyMember


def reader_key(study: Study, reader_id: int) -> str:
    """A reader's opaque key in one study: stable, but neither an account nor the same in another study."""
    digest = hmac.new(str(study.seed).encode(), f"readingroom-reader:{study.pk}:{reader_id}".encode(), hashlib.sha256)
    return "r-" + digest.hexdigest()[:10]


def reader_keys(study: Study) -> dict[str, int]:
    """Opaque key -> user id for the members of a study (for the coordinator's page only)."""
    ids = StudyMember.objects.filter(study=study).values_list("user_id", flat=True).distinct().order_by()
    return {reader_key(study, reader_id): reader_id for reader_id in ids}
