import django.db.models.functions.text
import django.db.models.lookups
from django.db import migrations, models
from django.db.models.functions import Length

LIMIT = 10_000


def refuse_longer_rationales(apps, schema_editor):
    # Stored decisions are research data: never cut them short here. Say which ones are in the way.
    Adjudication = apps.get_model("consensus", "Adjudication")
    too_long = list(
        Adjudication.objects.annotate(n=Length("rationale")).filter(n__gt=LIMIT).values_list("public_id", flat=True)
    )
    if too_long:
        raise RuntimeError(
            f"{len(too_long)} stored adjudication rationale(s) are longer than {LIMIT:,} characters "
            f"({', '.join(str(i) for i in too_long[:20])}). Shorten them, then migrate again."
        )


class Migration(migrations.Migration):
    dependencies = [("consensus", "0002_adjudication_voided_before_decision")]

    operations = [
        migrations.RunPython(refuse_longer_rationales, migrations.RunPython.noop),
        migrations.AddConstraint(
            model_name="adjudication",
            constraint=models.CheckConstraint(
                condition=django.db.models.lookups.LessThanOrEqual(
                    django.db.models.functions.text.Length("rationale"), LIMIT
                ),
                name="adjudication_rationale_max_length",
            ),
        ),
    ]
