import django.db.models.functions.text
import django.db.models.lookups
from django.db import migrations, models
from django.db.models.functions import Length

LIMIT = 10_000


def refuse_longer_rationales(apps, schema_editor):
    # Stored ratings are research data: never cut them short here. Say which ones are in the way.
    Annotation = apps.get_model("annotation", "Annotation")
    too_long = list(
        Annotation.objects.annotate(n=Length("rationale")).filter(n__gt=LIMIT).values_list("public_id", flat=True)
    )
    if too_long:
        raise RuntimeError(
            f"{len(too_long)} stored rationale(s) are longer than {LIMIT:,} characters (annotations "
            f"{', '.join(str(i) for i in too_long[:20])}). Shorten or void them, then migrate again."
        )


class Migration(migrations.Migration):
    dependencies = [("annotation", "0006_queue_counters_and_withdrawn")]

    operations = [
        migrations.RunPython(refuse_longer_rationales, migrations.RunPython.noop),
        migrations.AddConstraint(
            model_name="annotation",
            constraint=models.CheckConstraint(
                condition=django.db.models.lookups.LessThanOrEqual(
                    django.db.models.functions.text.Length("rationale"), LIMIT
                ),
                name="annotation_rationale_max_length",
            ),
        ),
    ]
