from django.contrib import admin

from analysis.models import ImportedMetric, MetricScore


@admin.register(ImportedMetric)
class ImportedMetricAdmin(admin.ModelAdmin):
    list_display = ["name", "study", "perfect_score", "imported_at", "imported_by"]
    list_filter = ["study"]


@admin.register(MetricScore)
class MetricScoreAdmin(admin.ModelAdmin):
    list_display = ["metric", "pair", "score"]
    list_select_related = ["metric", "pair"]
    raw_id_fields = ["pair"]
