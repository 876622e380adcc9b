"""The undo window: a rating settles before routing acts on it; ratings stored before it are settled."""

import django.core.validators
import django.utils.timezone
from django.conf import settings
from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ('annotation', '0010_preferences'),
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
    ]

    operations = [
        migrations.AddField(
            model_name='annotation',
            name='settle_by',
            field=models.DateTimeField(help_text="When its undo window closes (submitted + the study's undo window).", null=True),
        ),
        migrations.AddField(
            model_name='annotation',
            name='settled_at',
            field=models.DateTimeField(blank=True, default=django.utils.timezone.now, help_text='When it became final and routing acted on it; empty while its reader can take it back.', null=True),
        ),
        # Every rating stored so far has had its consequences: settled when it was submitted.
        migrations.RunSQL(
            "UPDATE annotation_annotation SET settle_by = created_at, settled_at = created_at",
            reverse_sql=migrations.RunSQL.noop,
        ),
        migrations.AlterField(
            model_name='annotation',
            name='settle_by',
            field=models.DateTimeField(default=django.utils.timezone.now, help_text="When its undo window closes (submitted + the study's undo window)."),
        ),
        migrations.AddField(
            model_name='assignment',
            name='resumed_at',
            field=models.DateTimeField(blank=True, help_text='When its reader last took back its rating.', null=True),
        ),
        migrations.AddField(
            model_name='assignment',
            name='time_before_undo_ms',
            field=models.PositiveIntegerField(db_default=0, default=0, help_text='Time on task of the ratings of this read its reader took back.'),
        ),
        migrations.AddField(
            model_name='study',
            name='undo_window_seconds',
            field=models.PositiveIntegerField(default=120, help_text='How long a reader may take back a rating (until their next submit at the latest); routing waits for it. 0 turns undo off and routes at once. At most 3600 seconds.', validators=[django.core.validators.MaxValueValidator(3600)], verbose_name='undo window (seconds)'),
        ),
        migrations.AlterField(
            model_name='annotation',
            name='duration_ms',
            field=models.PositiveIntegerField(blank=True, help_text='First shown -> submitted (with the time spent before any undo).', null=True),
        ),
        migrations.AlterField(
            model_name='auditevent',
            name='action',
            field=models.CharField(choices=[('assigned', 'Assigned'), ('withdrawn', 'Assignment withdrawn'), ('submitted', 'Rating submitted'), ('voided', 'Rating voided'), ('third_read_routed', 'Third read assigned'), ('adjudication_routed', 'Adjudication assigned'), ('unrouted', 'Waiting for an eligible person'), ('consensus', 'Consensus reached'), ('consensus_withdrawn', 'Consensus withdrawn'), ('adjudicated', 'Adjudicated'), ('undone', 'Rating taken back by its reader'), ('member_added', 'Member added'), ('member_changed', 'Member changed'), ('guide_published', 'Guide version published'), ('guide_confirmed', 'Guide version confirmed'), ('practice_imported', 'Practice items imported'), ('practice_settings', 'Practice requirement changed')], max_length=32),
        ),
        migrations.AddIndex(
            model_name='annotation',
            index=models.Index(condition=models.Q(('settled_at__isnull', True)), fields=['settle_by'], name='annotation_unsettled_due'),
        ),
        migrations.AddConstraint(
            model_name='annotation',
            constraint=models.UniqueConstraint(condition=models.Q(('settled_at__isnull', True)), fields=('reader',), name='annotation_one_unsettled_per_reader'),
        ),
        migrations.AddConstraint(
            model_name='annotation',
            constraint=models.CheckConstraint(condition=models.Q(('voided_at__isnull', True), ('settled_at__isnull', False), _connector='OR'), name='annotation_voided_is_settled'),
        ),
        migrations.AddConstraint(
            model_name='study',
            constraint=models.CheckConstraint(condition=models.Q(('undo_window_seconds__lte', 3600)), name='study_undo_window_at_most_an_hour'),
        ),
    ]
