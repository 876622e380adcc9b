import django.db.models.deletion
from django.db import migrations, models
from django.db.models import OuterRef, Subquery


def copy_study_and_task(apps, schema_editor):
    Assignment = apps.get_model("annotation", "Assignment")
    Example = apps.get_model("annotation", "Example")
    example = Example.objects.filter(pk=OuterRef("example_id"))
    Assignment.objects.update(
        study_id=Subquery(example.values("study_id")[:1]), task=Subquery(example.values("task")[:1])
    )


class Migration(migrations.Migration):
    dependencies = [("annotation", "0004_study_license_text")]

    operations = [
        migrations.AddField(
            model_name="assignment",
            name="study",
            field=models.ForeignKey(
                editable=False,
                null=True,
                on_delete=django.db.models.deletion.PROTECT,
                related_name="+",
                to="annotation.study",
            ),
        ),
        migrations.AddField(
            model_name="assignment",
            name="task",
            field=models.CharField(
                choices=[("realism", "Task 1: Realism"), ("equivalence", "Task 2: Clinical equivalence")],
                default="",
                editable=False,
                max_length=16,
            ),
            preserve_default=False,
        ),
        migrations.RunPython(copy_study_and_task, migrations.RunPython.noop),
        migrations.AlterField(
            model_name="assignment",
            name="study",
            field=models.ForeignKey(
                editable=False, on_delete=django.db.models.deletion.PROTECT, related_name="+", to="annotation.study"
            ),
        ),
        migrations.AddIndex(
            model_name="assignment",
            index=models.Index(
                fields=["reader", "study", "task", "status", "queue_order"], name="assignment_reader_queue"
            ),
        ),
    ]
