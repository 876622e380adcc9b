from django.contrib import admin

from annotation.admin import ReadOnlyAdmin
from consensus.models import Adjudication, ConsensusLabel


@admin.register(Adjudication)
class AdjudicationAdmin(ReadOnlyAdmin):
    list_display = ["public_id", "adjudicator", "task", "status", "rating", "decided_at"]
    list_filter = ["status", "task", "example__study"]
    list_select_related = ["adjudicator"]


@admin.register(ConsensusLabel)
class ConsensusLabelAdmin(ReadOnlyAdmin):
    list_display = ["example", "task", "rating", "label_source", "n_annotations", "decided_at"]
    list_filter = ["task", "label_source", "example__study"]
    list_select_related = ["example__pair"]
