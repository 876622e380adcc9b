from django import forms
from django.contrib.auth import get_user_model

from annotation.models import Role, Task
from annotation.roles import ROLE_GROUP_NAMES


class EnrolJudgeForm(forms.Form):
    judge = forms.ModelChoiceField(
        queryset=get_user_model().objects.none(),
        to_field_name="username",
        label="Automated judge",
        help_text="Accounts created with manage.py create_user NAME --role judge --token.",
    )
    tasks = forms.MultipleChoiceField(
        choices=Task.choices, initial=list(Task.values), widget=forms.CheckboxSelectMultiple, label="Tasks"
    )
    per_variation = forms.IntegerField(
        min_value=1,
        max_value=100_000,
        required=False,
        label="Pairs per variation",
        help_text="A seeded random subset of this many sampled pairs per variation. Empty: every sampled pair.",
    )
    seed = forms.IntegerField(
        min_value=0, max_value=2**31 - 1, required=False, help_text="Draws the subset. Empty: the study's seed."
    )
    practise = forms.BooleanField(
        required=False,
        label="Guide and practice first",
        help_text="The judge confirms the study's guide and rates its practice items before its items, as a reader "
        "does. Unticked: it skips them. Enrolling an enrolled judge again sets this choice.",
    )

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        user_model = get_user_model()
        self.fields["judge"].queryset = user_model.objects.filter(
            is_active=True, groups__name=ROLE_GROUP_NAMES[Role.JUDGE]
        ).order_by(user_model.USERNAME_FIELD)
