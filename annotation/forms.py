from django import forms

from annotation.models import (
    DEFAULT_RESERVE_PERCENT,
    DEFAULT_UNDO_WINDOW_SECONDS,
    GUIDE_MAX_LENGTH,
    RATIONALE_MAX_LENGTH,
    TASK_RATINGS,
    Dataset,
    Preferences,
    RatingChoice,
    Study,
    TokenScope,
)


class StudyForm(forms.ModelForm):
    class Meta:
        model = Study
        fields = ["name", "slug", "keep_versions_apart", "undo_window_seconds", "reserve_percent"]
        help_texts = {"slug": "Short name used in URLs and commands, e.g. reref-2026."}

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.fields["undo_window_seconds"].required = False
        self.fields["reserve_percent"].required = False

    def clean_undo_window_seconds(self) -> int:
        value = self.cleaned_data["undo_window_seconds"]
        return DEFAULT_UNDO_WINDOW_SECONDS if value is None else value

    def clean_reserve_percent(self) -> int:
        value = self.cleaned_data["reserve_percent"]
        return DEFAULT_RESERVE_PERCENT if value is None else value


class UndoWindowForm(forms.ModelForm):
    class Meta:
        model = Study
        fields = ["undo_window_seconds"]


class MarginsForm(forms.ModelForm):
    """The analysis margins; an empty field means no margin."""

    class Meta:
        model = Study
        fields = ["noninferiority_margin", "equivalence_margin"]


class LicenseForm(forms.ModelForm):
    """The study's licence, the text its releases ship as LICENSE.txt."""

    license_text = forms.CharField(
        label="Licence text",
        required=False,
        strip=False,
        widget=forms.Textarea(attrs={"rows": 10, "cols": 80, "class": "licence-text", "spellcheck": "false"}),
        help_text="Written to each release's LICENSE.txt exactly as given (a data manager may still change it for "
        "one release). Empty: every release asks for one.",
    )

    class Meta:
        model = Study
        fields = ["license_text"]


class ImportForm(forms.Form):
    file = forms.FileField(
        label="Candidate pairs file",
        help_text="CSV or JSON Lines, UTF-8, with the columns listed below.",
        widget=forms.ClearableFileInput(attrs={"accept": ".csv,.jsonl,.ndjson,text/csv,application/x-ndjson"}),
    )
    dry_run = forms.BooleanField(required=False, label="Dry run (check the file, import nothing)")


class RewriteImportForm(ImportForm):
    """A file of rewrites; each is joined to its stored original report (see import_reports)."""

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.fields["file"].label = "Rewrites file"
        self.fields["file"].help_text = (
            "CSV or JSON Lines, UTF-8: dataset, study_id, reref_variation, verdict, alternative_findings, "
            "alternative_impression. The original reports must be stored first."
        )
        self.fields["dry_run"].label = "Dry run (check the file, import nothing)"
        # Distinct ids: both forms are on the study page.
        self.auto_id = "id_rewrites_%s"


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
    one_pair_per_exam = forms.BooleanField(
        required=False,
        label="At most one pair per exam",
        help_text="An exam is then in one pair only, so keeping its items apart needs no more readers than one "
        "pair does; a variation passes over the exams drawn for an earlier one.",
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
        self.fields["rating"].choices = [(r, RatingChoice(r).label) for r in TASK_RATINGS[task]]


class GuideForm(forms.Form):
    text = forms.CharField(
        label="Guide (Markdown)",
        max_length=GUIDE_MAX_LENGTH,
        widget=forms.Textarea(attrs={"rows": 18}),
        help_text="Headings (#), lists (-), **bold**, *italic*, links and tables. Saving makes a new version; "
        "readers see what changed and confirm it before their next item.",
        strip=False,
    )


class ConfirmGuideForm(forms.Form):
    version = forms.IntegerField(min_value=1, widget=forms.HiddenInput)


class PracticeImportForm(forms.Form):
    file = forms.FileField(
        label="Practice items file",
        help_text="CSV or JSON Lines, UTF-8: the pair columns plus a reference rating and explanation per item. "
        "See the README.",
        widget=forms.ClearableFileInput(attrs={"accept": ".csv,.jsonl,.ndjson,text/csv,application/x-ndjson"}),
    )
    dry_run = forms.BooleanField(required=False, label="Dry run (check the file, import nothing)")


class PracticeSettingsForm(forms.ModelForm):
    class Meta:
        model = Study
        fields = ["practice_items_required"]
        labels = {"practice_items_required": "Practice items per task before a reader's first real item"}
        widgets = {"practice_items_required": forms.NumberInput(attrs={"min": 0, "max": 100})}

    def clean_practice_items_required(self) -> int:
        value = self.cleaned_data["practice_items_required"]
        if value > 100:
            raise forms.ValidationError("At most 100 practice items per task.")
        return value


class SkipPracticeForm(forms.Form):
    username = forms.CharField(max_length=150, widget=forms.HiddenInput)
    skip = forms.BooleanField(required=False, widget=forms.HiddenInput)


class PreferencesForm(forms.ModelForm):
    class Meta:
        model = Preferences
        fields = ["theme", "single_key_shortcuts"]
        labels = {"theme": "Colours", "single_key_shortcuts": "Single-key shortcuts (1, 2, 3) on the rating form"}
        widgets = {"theme": forms.RadioSelect}


class ApiTokenForm(forms.Form):
    """A new API token: its name, and what it may do where its person holds more than reading roles."""

    name = forms.CharField(
        max_length=64,
        label="Token name",
        help_text="What will use it, e.g. “judge script on the lab server”. Your tokens need different names.",
    )
    scope = forms.ChoiceField(
        label="It may",
        widget=forms.RadioSelect,
        choices=TokenScope.choices,
        initial=TokenScope.READING,
        help_text="A reading token reads and rates only, whatever else you may do: the safer choice for a program.",
    )

    def __init__(self, *args, scopes: list[str], **kwargs) -> None:
        super().__init__(*args, auto_id="token-%s", **kwargs)  # ids apart from the settings form's
        if len(scopes) == 1:
            # A reader's token is for reading; nothing to choose.
            self.fields["scope"].widget = forms.HiddenInput()
            self.fields["scope"].initial = scopes[0]
        self.fields["scope"].choices = [(value, TokenScope(value).label) for value in scopes]
