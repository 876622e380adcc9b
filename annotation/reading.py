"""What a reader is shown, and nothing more.

A ReadingItem is built without the report type, the variation or the dataset, so no template
can leak them: for a pair, the original's and the alternative's Task 1 items differ only in
their text.
"""

from dataclasses import dataclass

from django.db.models import Q, Subquery

from annotation.models import (
    RATINGS_WITHOUT_RATIONALE,
    TASK_RATINGS,
    Assignment,
    AssignmentStatus,
    Example,
    Rating,
    ReaderQueue,
    ReportType,
    Task,
)

# The protocol's definitions, shown next to the labels.
RATING_DEFINITIONS: dict[str, str] = {
    Rating.REALISTIC: "Reads as written by a practicing radiologist in routine care.",
    Rating.MINOR_ISSUES: "Mostly realistic, with subtle unusual phrasing or formatting; clinically correct.",
    Rating.MAJOR_ISSUES: "Major errors, incoherent phrasing, or unnatural elements a radiologist would not write.",
    Rating.EQUIVALENT: "A treating physician would find the same findings and make the same decisions.",
    Rating.MINOR_DISCREPANCY: "Differences in style, structure, terminology or detail that do not change "
    "clinical actions.",
    Rating.MAJOR_DISCREPANCY: "Differences that could change clinical decisions.",
}

TASK_QUESTIONS: dict[str, str] = {
    Task.REALISM: "Is this report realistic? Rate the Findings and Impression only.",
    Task.EQUIVALENCE: "Are Report A and Report B clinically equivalent?",
}


@dataclass(frozen=True)
class ShownReport:
    heading: str
    findings: str
    impression: str


@dataclass(frozen=True)
class ShownLabel:
    value: str
    label: str
    definition: str
    key: int
    needs_rationale: bool


@dataclass(frozen=True)
class ReadingItem:
    task: str
    task_label: str
    question: str
    context: tuple[tuple[str, str], ...]
    reports: tuple[ShownReport, ...]
    labels: tuple[ShownLabel, ...]


def reading_item(example: Example, *, report_a_type: str = "") -> ReadingItem:
    """The blinded presentation of an example. Task 2 needs the drawn A/B order."""
    return present(example.task, example.pair, report_type=example.report_type, report_a_type=report_a_type)


def present(task: str, source, *, report_type: str = "", report_a_type: str = "") -> ReadingItem:
    """What a reader is shown of a pair's text (a CandidatePair, or a PracticeItem shown the same way)."""
    if task == Task.REALISM:
        findings, impression = source.report(report_type)
        reports: tuple[ShownReport, ...] = (ShownReport("Report", findings, impression),)
    else:
        first = report_a_type or ReportType.ORIGINAL
        second = ReportType.ALTERNATIVE if first == ReportType.ORIGINAL else ReportType.ORIGINAL
        reports = (ShownReport("Report A", *source.report(first)), ShownReport("Report B", *source.report(second)))
    labels = tuple(
        ShownLabel(
            value=rating,
            label=Rating(rating).label,
            definition=RATING_DEFINITIONS[rating],
            key=position,
            needs_rationale=rating not in RATINGS_WITHOUT_RATIONALE,
        )
        for position, rating in enumerate(TASK_RATINGS[task], start=1)
    )
    return ReadingItem(
        task=task,
        task_label=Task(task).label,
        question=TASK_QUESTIONS[task],
        context=(
            ("Indication", source.indication),
            ("Comparison", source.comparison),
            ("Technique", source.technique),
        ),
        reports=reports,
        labels=labels,
    )


def reader_queues(reader) -> list[dict]:
    """The reader's queues, one per (study, task): how many they have rated, and whether an item waits.

    Never a total: a total grows when a third read is routed to the reader, and would tell them
    that two colleagues disagreed. One query, on the queue counters.
    """
    rows = (
        ReaderQueue.objects.filter(reader=reader)
        .filter(Q(open_count__gt=0) | Q(rated_count__gt=0))
        .values("study__slug", "study__name", "task", "open_count", "rated_count")
        .order_by("study__name", "task")
    )
    return [
        {
            "study_slug": row["study__slug"],
            "study_name": row["study__name"],
            "task": row["task"],
            "task_label": Task(row["task"]).label,
            "done": row["rated_count"],
            "waiting": row["open_count"] > 0,
        }
        for row in rows
    ]


def home_studies(queues: list[dict], adjudications: list[dict]) -> list[dict]:
    """The reader's home, one entry per study: its reading queues (Task 1 first) and adjudications.

    Studies with something waiting come first, then by name.
    """
    studies: dict[str, dict] = {}
    for queue in [*queues, *adjudications]:
        study = studies.setdefault(
            queue["study_slug"],
            {"slug": queue["study_slug"], "name": queue["study_name"], "queues": [], "adjudication": None},
        )
        if "task" in queue:
            study["queues"].append(queue)
        else:
            study["adjudication"] = queue
    task_order = {task: position for position, task in enumerate(Task.values)}
    for study in studies.values():
        study["queues"].sort(key=lambda queue: task_order[queue["task"]])
        study["waiting"] = any(queue["waiting"] for queue in study["queues"]) or bool(
            study["adjudication"] and study["adjudication"]["waiting"]
        )
    return sorted(studies.values(), key=lambda study: (not study["waiting"], study["name"], study["slug"]))


def queue_position(assignment: Assignment) -> int | None:
    """N in "Item N": the reader's ratings in this study and task so far, plus one for an open item.

    None for an item that is no longer open. Read from the queue's counters: one row, whatever
    the queue's length.
    """
    if assignment.status != AssignmentStatus.OPEN:
        return None
    rated = (
        ReaderQueue.objects.filter(reader_id=assignment.reader_id, study_id=assignment.study_id, task=assignment.task)
        .values_list("rated_count", flat=True)
        .first()
    )
    return (rated or 0) + 1


def next_assignment(
    reader, *, task: str, study_id: int | None = None, study_slug: str | None = None
) -> Assignment | None:
    """The reader's first open assignment of a task, loaded with its example, pair and study.

    In one study if given, else in the lowest-numbered study with open work. One query: the
    inner SELECT walks the reader-queue index (reader, study, task, status, queue_order) and
    stops at the first entry; the joins apply to that one row only.
    """
    queue = Assignment.objects.filter(reader=reader, task=task).open()
    if study_id is not None:
        queue = queue.filter(study_id=study_id)
    if study_slug is not None:
        queue = queue.filter(study__slug=study_slug)
    first = queue.order_by("study_id", "queue_order", "pk").values("pk")[:1]
    return Assignment.objects.select_related("example__pair", "example__study").filter(pk=Subquery(first)).first()
