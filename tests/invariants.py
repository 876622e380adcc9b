"""Checks of the protocol's bookkeeping that several tests share."""

from collections import Counter

from annotation.models import THIRD_READ_SLOT, Assignment, AssignmentStatus, ReaderQueue, ReportType, Study, Task


def queue_counter_mismatches(study: Study) -> dict:
    """Each (reader, task) whose ReaderQueue counters differ from its assignments: {key: (counted, actual)}.

    Open items count as open, or as held while in the reader's reserve; rated and voided ones as rated
    (a voided read was a rating); every third read, of any status, as a third read.
    """
    counted = {
        (q.reader_id, q.task): (q.open_count, q.held_count, q.rated_count, q.third_read_count)
        for q in ReaderQueue.objects.filter(study=study)
    }
    actual: Counter = Counter()
    thirds: Counter = Counter()
    rows = Assignment.objects.filter(study=study).values_list("reader_id", "task", "status", "held", "slot")
    for reader_id, task, status, held, slot in rows:
        actual[(reader_id, task, "held" if status == AssignmentStatus.OPEN and held else status)] += 1
        thirds[(reader_id, task)] += slot == THIRD_READ_SLOT
    mismatches = {}
    for key in {(r, t) for r, t, _ in actual} | set(counted):
        opened = actual[(*key, AssignmentStatus.OPEN)]
        held = actual[(*key, "held")]
        rated = actual[(*key, AssignmentStatus.DONE)] + actual[(*key, AssignmentStatus.VOIDED)]
        if counted.get(key, (0, 0, 0, 0)) != (opened, held, rated, thirds[key]):
            mismatches[key] = (counted.get(key), (opened, held, rated, thirds[key]))
    return mismatches


def texts_shown_twice(study: Study) -> dict:
    """Each (reader, report text) that reached one reader in more than one assignment: {key: count}.

    Read off the texts themselves, not the conflict keys routing uses: a Task 1 item shows one
    report, a Task 2 item both. Any assignment row counts (the reader was given it).
    """
    shown: Counter = Counter()
    rows = Assignment.objects.filter(study=study).values_list(
        "reader_id",
        "task",
        "example__report_type",
        "example__pair__original_findings",
        "example__pair__original_impression",
        "example__pair__alternative_findings",
        "example__pair__alternative_impression",
    )
    for reader_id, task, report_type, o_findings, o_impression, a_findings, a_impression in rows:
        texts = []
        if task == Task.EQUIVALENCE or report_type == ReportType.ORIGINAL:
            texts.append((o_findings, o_impression))
        if task == Task.EQUIVALENCE or report_type == ReportType.ALTERNATIVE:
            texts.append((a_findings, a_impression))
        for text in texts:
            shown[(reader_id, text)] += 1
    return {key: n for key, n in shown.items() if n > 1}


def exams_given_twice(study: Study) -> dict:
    """Each (reader, exam) with more than one item given to that reader: {key: count}."""
    given = Counter(
        Assignment.objects.filter(study=study).values_list(
            "reader_id", "example__pair__dataset_id", "example__pair__source_study_id"
        )
    )
    return {key: n for key, n in given.items() if n > 1}


def readers_barred_from(example) -> set[int]:
    """Readers who may not be given the example: they have or had it, an item showing one of its
    report texts, or, when the study keeps versions apart, any item of its exam.

    Read off the texts and exams themselves, independently of the keys routing uses.
    """

    def texts(task, report_type, pair) -> set:
        shown = set()
        if task == Task.EQUIVALENCE or report_type == ReportType.ORIGINAL:
            shown.add((pair.original_findings, pair.original_impression))
        if task == Task.EQUIVALENCE or report_type == ReportType.ALTERNATIVE:
            shown.add((pair.alternative_findings, pair.alternative_impression))
        return shown

    pair = example.pair
    exam = (pair.dataset_id, pair.source_study_id)
    own = texts(example.task, example.report_type, pair)
    barred = set()
    for assignment in Assignment.objects.filter(study=example.study).select_related("example__pair"):
        other = assignment.example
        same_exam = (other.pair.dataset_id, other.pair.source_study_id) == exam
        if (
            other.pk == example.pk
            or own & texts(other.task, other.report_type, other.pair)
            or (example.study.keep_versions_apart and same_exam)
        ):
            barred.add(assignment.reader_id)
    return barred
