"""The coordinator's page of a study's automated judges: who reads what, and enrolling one."""

from django.contrib import messages
from django.db.models import Count, Q
from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render

from annotation.decorators import role_required
from annotation.models import Role, Study, Task
from judges.forms import EnrolJudgeForm
from judges.models import JudgeEnrolment
from judges.services import JUDGE_MARK, EnrolmentRefused, enrol_judge

UNPROCESSABLE = 422


def enrolment_rows(study: Study) -> list[JudgeEnrolment]:
    """The study's judge enrolments, each with .read_counts = {task: {"rated", "open"}} (two queries)."""
    enrolments = list(JudgeEnrolment.objects.filter(study=study).select_related("judge").order_by("judge__username"))
    counts = (
        JudgeEnrolment.objects.filter(study=study)
        .values("pk", "reads__task")
        .annotate(rated=Count("reads", filter=~Q(reads__rating="")), open=Count("reads", filter=Q(reads__rating="")))
        .order_by()
    )
    by_enrolment: dict[int, dict] = {}
    for row in counts:
        if row["reads__task"]:
            by_enrolment.setdefault(row["pk"], {})[row["reads__task"]] = {"rated": row["rated"], "open": row["open"]}
    for enrolment in enrolments:
        found = by_enrolment.get(enrolment.pk, {})
        enrolment.read_counts = {task: found.get(task, {"rated": 0, "open": 0}) for task in enrolment.tasks}
    return enrolments


@role_required(Role.COORDINATOR)
def study_judges(request: HttpRequest, slug: str) -> HttpResponse:
    study = get_object_or_404(Study, slug=slug)
    form = EnrolJudgeForm(request.POST or None)
    status = 200
    if request.method == "POST":
        if form.is_valid():
            try:
                result = enrol_judge(
                    study,
                    judge=form.cleaned_data["judge"],
                    tasks=form.cleaned_data["tasks"],
                    per_variation=form.cleaned_data["per_variation"],
                    seed=form.cleaned_data["seed"],
                    practise=form.cleaned_data["practise"],
                    actor=request.user,
                )
            except EnrolmentRefused as refused:
                form.add_error(None, str(refused))
                status = UNPROCESSABLE
            else:
                messages.success(request, result.message)
                return redirect("study_judges", slug=study.slug)
        else:
            status = UNPROCESSABLE
    context = {
        "study": study,
        "enrolments": enrolment_rows(study),
        "form": form,
        "judge_mark": JUDGE_MARK,
        "task_labels": dict(Task.choices),
    }
    return render(request, "judges/study_judges.html", context, status=status)
