from django import forms

from annotation.models import Dataset, Study


class ReleaseForm(forms.Form):
    """A release build's options. The service checks them again (request_release), with the same rules."""

    version = forms.CharField(max_length=32, initial="1.0.0", help_text="Digits and dots, e.g. 1.0.0.")
    datasets = forms.MultipleChoiceField(
        required=False,
        widget=forms.CheckboxSelectMultiple,
        help_text="Leave all unticked to release every dataset of the study.",
    )
    include_unfinished = forms.BooleanField(
        required=False,
        label="Include unfinished examples",
        help_text="Examples without a consensus yet are released with an empty consensus rating; "
        "otherwise they are left out.",
    )
    include_guide = forms.BooleanField(
        required=False,
        label="Include the reader guide",
        help_text="Adds guide.md, the study's reader guide (its newest version), listed in the README and "
        "SHA256SUMS.txt. Off by default: the release layout stays as specified.",
    )
    license_text = forms.CharField(
        label="Licence text",
        strip=False,
        widget=forms.Textarea(attrs={"rows": 18, "cols": 80, "class": "licence-text", "spellcheck": "false"}),
        help_text="Written to LICENSE.txt exactly as given.",
        error_messages={"required": "A release needs its licence text: paste it here."},
    )

    def __init__(self, *args, study: Study, **kwargs) -> None:
        kwargs.setdefault("initial", {"license_text": study.license_text})
        super().__init__(*args, **kwargs)
        # Said before anything is submitted: the licence this release will ship, or that there is none.
        if study.license_text:
            self.fields[
                "license_text"
            ].help_text = (
                "The study's licence, written to LICENSE.txt exactly as shown; change it here for this release only."
            )
        else:
            self.fields["license_text"].help_text = (
                "This study has no licence yet: paste the licence of this release here (written to LICENSE.txt "
                "exactly as given), or ask a coordinator to set the study's licence on its page."
            )
        datasets = Dataset.objects.filter(pairs__study=study, pairs__sampled=True).distinct().order_by("key")
        self.fields["datasets"].choices = [(d.key, d.name) for d in datasets]
