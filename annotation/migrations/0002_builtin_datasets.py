from django.db import migrations

from annotation import builtin_datasets


def create_datasets(apps, schema_editor):
    builtin_datasets.ensure(apps.get_model("annotation", "Dataset"))


class Migration(migrations.Migration):
    dependencies = [("annotation", "0001_initial")]

    operations = [migrations.RunPython(create_datasets, migrations.RunPython.noop)]
