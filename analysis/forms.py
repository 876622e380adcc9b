from django import forms


class MetricScoresForm(forms.Form):
    file = forms.FileField(
        label="Metric scores file",
        help_text="CSV, UTF-8: dataset, study_id, reref_variation, metric, score (and optionally perfect_score).",
        widget=forms.ClearableFileInput(attrs={"accept": ".csv,text/csv"}),
    )
    replace = forms.BooleanField(required=False, label="Replace the stored scores of the metrics in this file")
    dry_run = forms.BooleanField(required=False, label="Dry run (check the file, import nothing)")
