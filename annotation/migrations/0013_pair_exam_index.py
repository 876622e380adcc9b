from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("annotation", "0012_blinding_per_exam"),
    ]

    operations = [
        migrations.AddIndex(
            model_name="candidatepair",
            index=models.Index(fields=["source_study_id", "dataset", "study"], name="pair_exam"),
        ),
    ]
