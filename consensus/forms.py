from django import forms
from django.contrib.auth import get_user_model
from django.contrib.auth.models import AbstractBaseUser
from django.db.models import Q

from annotation.models import MemberRole, Role, Study, StudyMember, Task
from annotation.roles import ROLE_GROUP_NAMES
from consensus import progress


class PersonChoiceField(forms.ModelChoiceField):
    def label_from_instance(self, user: AbstractBaseUser) -> str:
        name = user.get_full_name()
        return f"{user.get_username()} ({name})" if name else user.get_username()


class AddMemberForm(forms.Form):
    user = PersonChoiceField(
        queryset=get_user_model().objects.none(),
        to_field_name="username",
        label="Person",
        help_text="People who hold the Reader or Adjudicator role and are not active members of this study yet.",
    )
    role = forms.ChoiceField(choices=MemberRole.choices, label="Role in this study")
    max_assignments = forms.IntegerField(
        min_value=0,
        required=False,
        label="Cap on initial reads",
        help_text="Automatic assignment gives this reader at most this many initial reads. Empty: no cap.",
    )

    def __init__(self, *args, study: Study, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        user_model = get_user_model()
        active = StudyMember.objects.filter(study=study, active=True)
        # Someone already active in every role they could take here is not offered again.
        could_join = Q(groups__name=ROLE_GROUP_NAMES[Role.READER]) & ~Q(
            pk__in=active.filter(role=MemberRole.READER).values("user_id")
        ) | Q(groups__name=ROLE_GROUP_NAMES[Role.ADJUDICATOR]) & ~Q(
            pk__in=active.filter(role=MemberRole.ADJUDICATOR).values("user_id")
        )
        self.fields["user"].queryset = (
            user_model.objects.filter(could_join, is_active=True).distinct().order_by(user_model.USERNAME_FIELD)
        )


class AutoAssignForm(forms.Form):
    tasks = forms.MultipleChoiceField(
        choices=Task.choices,
        required=False,
        widget=forms.CheckboxSelectMultiple,
        label="Tasks",
        help_text="Leave both unticked to assign both tasks.",
    )


class ReaderForm(forms.Form):
    """Choose one of the study's active readers (assign or reassign by hand)."""

    reader = PersonChoiceField(queryset=get_user_model().objects.none(), to_field_name="username", label="Reader")

    def __init__(self, *args, study: Study, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.fields["reader"].queryset = progress.reader_choices(study)


class VoidForm(forms.Form):
    reason = forms.CharField(
        max_length=2000,
        widget=forms.Textarea(attrs={"rows": 2}),
        label="Reason for voiding",
        help_text="Kept in the audit trail.",
    )


def first_error(form: forms.Form) -> str:
    """A form's first error as one sentence, for a message shown next to a small inline form."""
    for name, errors in form.errors.items():
        label = form.fields[name].label if name in form.fields else ""
        return f"{label}: {errors[0]}" if label else errors[0]
    return ""
