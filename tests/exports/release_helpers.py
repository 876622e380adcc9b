"""Test data for the release pages, API and task: a small study whose reading is finished."""

import hashlib
from pathlib import Path

from annotation.models import Example, RatingChoice, Task
from exports.models import Release, ReleaseStatus
from exports.services import next_free_version
from tests.factories import make_reading_study, make_user, rate_open_reads

# 2 sampled pairs -> 4 Task 1 examples (one of them settled by a majority of three) and 2 Task 2.
ROW_COUNTS = {
    "task1/task1_full.csv": 9,
    "task1/task1_disagreed.csv": 0,
    "task1/task1_consensus.csv": 4,
    "task2/task2_full.csv": 4,
    "task2/task2_disagreed.csv": 0,
    "task2/task2_consensus.csv": 2,
}
RELEASE_FILES = {
    "README.md",
    "LICENSE.txt",
    "SHA256SUMS.txt",
    *ROW_COUNTS,
}


def rated_study(slug: str = "s1", *, license_text: str = "CC BY 4.0\n"):
    """A study with every example rated through the services (all reach a consensus)."""
    study, _, _ = make_reading_study(pairs=2, slug=slug)
    study.license_text = license_text
    study.save(update_fields=["license_text"])
    examples = list(Example.objects.filter(study=study).order_by("task", "pk"))
    majority_done = False
    for example in examples:
        if example.task == Task.REALISM and not majority_done:
            rate_open_reads(example, RatingChoice.MINOR_ISSUES, RatingChoice.REALISTIC, RatingChoice.MINOR_ISSUES)
            majority_done = True
        elif example.task == Task.REALISM:
            rate_open_reads(example, RatingChoice.REALISTIC, RatingChoice.REALISTIC)
        else:
            rate_open_reads(example, RatingChoice.EQUIVALENT, RatingChoice.EQUIVALENT)
    return study


def make_release(study, *, status: str = ReleaseStatus.QUEUED, user=None, **fields) -> Release:
    """A Release row as the services would store it; the version defaults to 1.0.0, or the next free one."""
    version = fields.pop("version", None)
    if version is None:
        version = "1.0.0"
        if Release.objects.holding_version(study, version).exists():
            version = next_free_version(study, version)
    return Release.objects.create(
        study=study,
        requested_by=user or make_user(),
        version=version,
        license_text=fields.pop("license_text", "CC BY 4.0\n"),
        status=status,
        **fields,
    )


def sha256_of(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()
