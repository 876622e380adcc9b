from django.contrib import admin

from annotation.models import Assignment, CandidatePair, Dataset, Example, ReaderProfile, Study, Variation


class VariationInline(admin.TabularInline):
    model = Variation
    extra = 0


@admin.register(Study)
class StudyAdmin(admin.ModelAdmin):
    list_display = ["name", "slug", "reads_per_example", "sampled_at", "created_at"]
    search_fields = ["name", "slug"]
    prepopulated_fields = {"slug": ["name"]}
    readonly_fields = ["public_id", "sample_seed", "sample_per_variation", "sample_datasets", "sampled_at"]
    inlines = [VariationInline]


@admin.register(Dataset)
class DatasetAdmin(admin.ModelAdmin):
    list_display = ["key", "name", "study_id_prefix", "numeric_study_ids"]
    search_fields = ["key", "name"]


@admin.register(Variation)
class VariationAdmin(admin.ModelAdmin):
    list_display = ["key", "label", "dimension", "study", "position"]
    list_filter = ["study", "dimension"]
    list_select_related = ["study"]


@admin.register(CandidatePair)
class CandidatePairAdmin(admin.ModelAdmin):
    list_display = ["source_study_id", "dataset", "variation", "verdict", "sampled", "study"]
    list_filter = ["study", "dataset", "verdict", "sampled"]
    list_select_related = ["study", "dataset", "variation"]
    search_fields = ["source_study_id"]
    readonly_fields = ["public_id", "created_at"]
    raw_id_fields = ["variation"]


@admin.register(Example)
class ExampleAdmin(admin.ModelAdmin):
    list_display = ["public_id", "task", "report_type", "pair", "study"]
    list_filter = ["study", "task", "report_type"]
    list_select_related = ["study", "pair__dataset", "pair__variation"]
    raw_id_fields = ["pair"]
    readonly_fields = ["public_id"]


@admin.register(Assignment)
class AssignmentAdmin(admin.ModelAdmin):
    list_display = ["public_id", "reader", "example", "created_at"]
    list_select_related = ["reader", "example__pair__dataset", "example__pair__variation"]
    raw_id_fields = ["example", "reader"]
    readonly_fields = ["public_id", "created_at"]


@admin.register(ReaderProfile)
class ReaderProfileAdmin(admin.ModelAdmin):
    list_display = ["user", "subspecialty"]
    list_filter = ["subspecialty"]
    list_select_related = ["user"]
