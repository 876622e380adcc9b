from django.db import migrations

BUILTIN_DATASETS = [
    # key, name, study id prefix stripped on import, digits only
    ("mimic-cxr", "MIMIC-CXR", "s", True),
    ("rexgradient", "ReXGradient-160K", "", False),
    ("iu-xray", "IU X-ray (Open-i)", "", False),
    ("chexpert-plus", "CheXpert Plus", "", False),
]


def create_datasets(apps, schema_editor):
    Dataset = apps.get_model("annotation", "Dataset")
    for key, name, prefix, numeric in BUILTIN_DATASETS:
        Dataset.objects.get_or_create(
            key=key, defaults={"name": name, "study_id_prefix": prefix, "numeric_study_ids": numeric}
        )


class Migration(migrations.Migration):
    dependencies = [("annotation", "0001_initial")]

    operations = [migrations.RunPython(create_datasets, migrations.RunPython.noop)]
