from django.apps import AppConfig
from django.db.models.signals import post_migrate


def _create_role_groups(sender: AppConfig, **kwargs) -> None:
    from annotation.roles import ensure_role_groups

    ensure_role_groups()


class AnnotationConfig(AppConfig):
    name = "annotation"
    verbose_name = "Studies and reading"

    def ready(self) -> None:
        post_migrate.connect(_create_role_groups, sender=self)
