from django import forms

from annotation.models import RATIONALE_MAX_LENGTH, TASK_RATINGS, Dataset, Rating, Study


class StudyForm(forms.ModelForm):
    class Meta:
        model = Study
        fields = ["name", "slug", "keep_versions_apart"]
        help_texts = {"slug": "Short name used in URLs and commands, e.g. reref-2026."}


class ImportForm(forms.Form):
    file = forms.FileField(
        label="Candidate pairs file",
        help_text="CSV or JSON Lines, UTF-8, with the columns listed below.",
        widget=forms.ClearableFileInput(attrs={"accept": ".csv,.jsonl,.ndjson,text/csv,application/x-ndjson"}),
    )
    dry_run = forms.BooleanField(required=False, label="Dry run (check the file, import nothing)")


class SampleForm(forms.Form):
    per_variation = forms.IntegerField(
        min_value=1, max_value=100_000, initial=10, label="Pairs per dataset and variation"
    )
    seed = forms.IntegerField(
        min_value=0, max_value=2**31 - 1, required=False, help_text="Leave empty to use the study's own seed."
    )
    datasets = forms.MultipleChoiceField(
        required=False,
        widget=forms.CheckboxSelectMultiple,
        help_text="Leave all unticked to sample every dataset that has candidates.",
    )

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.fields["datasets"].choices = [(d.key, d.name) for d in Dataset.objects.all()]


class RatingForm(forms.Form):
    """A reader's (or adjudicator's) rating. The service checks it again, with the same rules."""

    rating = forms.ChoiceField(widget=forms.RadioSelect, error_messages={"required": "Choose a rating."})
    rationale = forms.CharField(
        required=False,
        max_length=RATIONALE_MAX_LENGTH,
        widget=forms.Textarea(attrs={"rows": 4}),
        error_messages={
            "max_length": f"The rationale is %(show_value)d characters long; the limit is {RATIONALE_MAX_LENGTH:,}. "
            "Shorten it."
        },
    )
    form_token = forms.UUIDField(widget=forms.HiddenInput)

    def __init__(self, *args, task: str, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.fields["rating"].choices = [(r, Rating(r).label) for r in TASK_RATINGS[task]]
