from django.apps import AppConfig
from django.db.models.signals import post_migrate


def _create_judge_group(sender: AppConfig, **kwargs) -> None:
    # The judge's permission exists once this app's permissions are created (after annotation's).
    from annotation.roles import ensure_role_groups

    ensure_role_groups()


class JudgesConfig(AppConfig):
    name = "judges"
    verbose_name = "Automated judges"

    def ready(self) -> None:
        post_migrate.connect(_create_judge_group, sender=self)
