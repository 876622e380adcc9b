from django.apps import AppConfig
from django.db.models.signals import post_migrate


def _create_role_groups_and_datasets(sender: AppConfig, **kwargs) -> None:
    # Also after a test database flush (which empties tables that migrations filled).
    from annotation import builtin_datasets
    from annotation.roles import ensure_role_groups

    ensure_role_groups()
    builtin_datasets.ensure(sender.get_model("Dataset"))


class AnnotationConfig(AppConfig):
    name = "annotation"
    verbose_name = "Studies and reading"

    def ready(self) -> None:
        from django.contrib.auth.signals import user_logged_in

        from annotation.preferences import copy_preferences_at_login

        post_migrate.connect(_create_role_groups_and_datasets, sender=self)
        user_logged_in.connect(copy_preferences_at_login, dispatch_uid="annotation.copy_preferences_at_login")
