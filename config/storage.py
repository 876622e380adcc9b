"""The local folders of the files the application keeps, as Django storages."""

import os

from django.conf import settings
from django.core.files.storage import FileSystemStorage


class SettingFolder(FileSystemStorage):
    """A local folder named by a setting (RELEASES_DIR, RESULTS_DIR), read at each use, so that
    the folder follows the setting wherever it is changed (override_settings, a test's tmp_path)."""

    def __init__(self, setting: str, **kwargs) -> None:
        self.setting = setting
        super().__init__(**kwargs)

    @property
    def base_location(self) -> str:
        return str(getattr(settings, self.setting))

    @property
    def location(self) -> str:
        return os.path.abspath(self.base_location)


# The storages of the files the application keeps, and their folder (local) or prefix (S3).
KEPT = ("releases", "results")


def local_storages() -> dict[str, dict]:
    """STORAGES entries for one host: the folders of RELEASES_DIR and RESULTS_DIR."""
    return {
        name: {"BACKEND": "config.storage.SettingFolder", "OPTIONS": {"setting": f"{name.upper()}_DIR"}}
        for name in KEPT
    }


def s3_storages() -> dict[str, dict]:
    """STORAGES entries for several hosts: django-storages' S3 backend, one prefix per kind of file,
    in the bucket of AWS_STORAGE_BUCKET_NAME."""
    return {name: {"BACKEND": "storages.backends.s3.S3Storage", "OPTIONS": {"location": name}} for name in KEPT}
