"""Which items one reader may be given, next to what they have or had.

The one rule that every routing path asks: automatic assignment, third reads, refills after a
void, readers who join late, assignment and reassignment by hand.

Every example shows report text: a Task 1 example one report (its exam's original, or its pair's
rewrite), a Task 2 example both. One exam (a dataset and a study id) can be in several pairs, one
per variation, and those pairs share the exam's original. Each example has conflict keys, and a
reader who has or had an example (any assignment row: open, rated, voided, or withdrawn after
being shown) is never given another example that shares a key with it.

- Always: the original of exam X has the key ("original", X), the rewrite of pair P the key
  ("rewrite", P), and a Task 2 example has both. So no reader is given one report text twice, in
  any task: an original that comes back would say "this is the original".
- When the study keeps versions apart (the default): every example of exam X has the key
  ("exam", X). A reader gets at most one item of an exam, in either task: never the original of an
  exam and a rewrite of it, never two rewrites of one exam, never Task 1 and Task 2 of one exam.

The cost is readers: every item of an exam needs its own two (three, with a third read) readers,
so the exam with the most items sets the least number the study needs (readers_needed).
"""

from collections.abc import Iterable
from dataclasses import dataclass, field

from django.db import connection
from django.db.models import Count, Q, QuerySet
from django.db.models.expressions import RawSQL

from annotation.models import CandidatePair, Example, ReportType, Study, Task

Exam = tuple[int, str]  # (dataset pk, study id in the dataset)
ConflictKey = tuple[str, object]

INITIAL_READS = 2
READS_WITH_THIRD = 3


def conflict_keys(keep_versions_apart: bool, exam: Exam, pair_pk: int, task: str, report_type: str) -> tuple:
    """The example's conflict keys: two examples conflict if they share one."""
    if keep_versions_apart:
        return (("exam", exam),)
    if task == Task.EQUIVALENCE:
        return (("original", exam), ("rewrite", pair_pk))
    if report_type == ReportType.ORIGINAL:
        return (("original", exam),)
    return (("rewrite", pair_pk),)


def example_keys(example: Example) -> tuple:
    pair = example.pair
    return conflict_keys(
        example.study.keep_versions_apart,
        (pair.dataset_id, pair.source_study_id),
        example.pair_id,
        example.task,
        example.report_type,
    )


def conflicting_examples(example: Example) -> QuerySet:
    """The study's examples that share a conflict key with example, example itself included: the rows
    of conflicting_examples_sql, for the ORM (manual assignment checks a reader against them)."""
    # Parameters bound, names quoted by the connection: no outside text in the statement.
    statement, params = conflicting_examples_sql(example, connection.ops.quote_name)
    return Example.objects.filter(pk__in=RawSQL(statement, params))  # noqa: S611


def conflicting_examples_sql(example: Example, quote) -> tuple[str, list]:
    """The study's examples that share a conflict key with example (example itself included), as SQL
    selecting their ids, and its parameters. Read through the exam's pairs (the pair_exam index), then
    their examples (by pair): a few rows whatever the study's size. Written by hand: the routing of
    third reads (consensus.services.eligible_readers) builds it into its statement, where the ORM took
    0.9 ms of CPU to build and compile the same query (this takes 5 µs); tests/consensus/
    test_eligible_readers.py holds it to the ORM's. `quote` is the connection's quote_name."""
    pair = example.pair
    tables = {"examples": quote(Example._meta.db_table), "pairs": quote(CandidatePair._meta.db_table)}
    params = [pair.source_study_id, pair.dataset_id, example.study_id]
    if example.study.keep_versions_apart:
        return _OF_EXAM.format(wanted="", **tables), params
    wanted = ["e.id = %s"]
    params.append(example.pk)
    if example.task == Task.EQUIVALENCE or example.report_type == ReportType.ORIGINAL:
        wanted.append("(e.task = %s OR e.report_type = %s)")
        params += [Task.EQUIVALENCE, ReportType.ORIGINAL]
    if example.task == Task.EQUIVALENCE or example.report_type == ReportType.ALTERNATIVE:
        wanted.append("(e.pair_id = %s AND (e.task = %s OR e.report_type = %s))")
        params += [example.pair_id, Task.EQUIVALENCE, ReportType.ALTERNATIVE]
    return _OF_EXAM.format(wanted=f" AND ({' OR '.join(wanted)})", **tables), params


# The examples of the exam's pairs (through the pair_exam index), and of those the wanted ones.
_OF_EXAM = """SELECT e.id FROM {examples} e WHERE e.pair_id IN (SELECT p.id FROM {pairs} p
 WHERE p.source_study_id = %s AND p.dataset_id = %s AND p.study_id = %s){wanted}"""


def refusal(study: Study) -> str:
    """Why a reader who has or had a conflicting example may not have this one, in a coordinator's words."""
    if study.keep_versions_apart:
        return (
            "has or had another item of the same exam (the original, a rewrite or Task 2 of it), and the study "
            "keeps the items of an exam apart"
        )
    return "has or had an item that shows the same report text"


@dataclass(frozen=True)
class ReadersNeeded:
    """How many distinct readers the study's examples need, and which exams set the figure."""

    initial: int
    with_third_reads: int
    items_per_exam: int
    keep_versions_apart: bool
    driving_exams: list[str] = field(default_factory=list)
    driving_count: int = 0

    @property
    def explanation(self) -> str:
        if self.keep_versions_apart:
            rule = "A reader gets at most one item of an exam (its original, a rewrite or its Task 2)"
            what = "items"
        else:
            rule = "A reader never sees one report text twice"
            what = "items showing its original"
        if self.driving_exams:
            exams = ", ".join(self.driving_exams)
            more = self.driving_count - len(self.driving_exams)
            if more > 0:
                exams += f" and {more} more"
            most = f"the exams in the most pairs have {self.items_per_exam} {what} ({exams})"
        else:
            one = what.replace("items", "item", 1) if self.items_per_exam == 1 else what
            most = f"each exam has at most {self.items_per_exam} {one}"
        return (
            f"{rule}, and {most}: their initial reads need {self.initial} different readers, and up to "
            f"{self.with_third_reads} so that every third read finds a reader."
        )


def readers_needed(study: Study, tasks: Iterable[str] | None = None, *, shown: int = 3) -> ReadersNeeded:
    """The least number of active readers the study's examples (of the tasks given) need. One query
    (two when more exams than shown set it).

    Keeping versions apart, the items of one exam need distinct readers: two each for the initial
    reads, three each when every one has a third read. Otherwise the items that show one exam's
    original need distinct readers for their initial reads (a pair's rewrite is in two items only,
    never more than those); for every third read, a Task 2 item's third reader must also have
    read none of its pair's rewrite, one more item of three reads.
    """
    tasks = list(tasks) if tasks is not None else list(Task.values)
    examples = Example.objects.filter(study=study, task__in=tasks)
    if not study.keep_versions_apart:
        examples = examples.filter(Q(task=Task.EQUIVALENCE) | Q(report_type=ReportType.ORIGINAL))
    per_exam = (
        examples.values("pair__dataset__key", "pair__source_study_id")
        .annotate(n=Count("pk"), pairs=Count("pair_id", distinct=True))
        .order_by("-n", "-pairs", "pair__dataset__key", "pair__source_study_id")
    )
    top = list(per_exam[:shown])
    most = top[0]["n"] if top else 1
    driving = [
        f"{row['pair__dataset__key']} {row['pair__source_study_id']}"
        for row in top
        if row["n"] == most and row["pairs"] > 1
    ]
    count = len(driving)
    if count == shown:  # perhaps more than shown
        count = per_exam.filter(n=most, pairs__gt=1).count()
    neighbours = most
    if not study.keep_versions_apart and set(tasks) == set(Task.values):
        neighbours += 1  # the Task 2 item's own pair's rewrite
    return ReadersNeeded(
        initial=INITIAL_READS * most,
        with_third_reads=READS_WITH_THIRD * neighbours,
        items_per_exam=most,
        keep_versions_apart=study.keep_versions_apart,
        driving_exams=driving,
        driving_count=count,
    )
