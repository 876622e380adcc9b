"""A study's results, computed by the worker from its rows and kept on disk until the data change.

The Results page, its API and its download never analyse inside a request: they read the last
computed results of the study (for one dataset/task filter, a "scope") and ask the worker
(`manage.py db_worker`, through analysis.queueing) for new ones when the study's ratings have
changed since. The work (`analysis.computing.compute_results`, which this module never imports:
a web request loads no scientific package) is the same as `manage.py analyze_release` on the
study's default release: the same DataFrames (`analysis.live.study_frames`), the same `analyze()`
with the same bootstrap seed, the same `write_results()` folder.

In the results storage (a local folder, RESULTS_DIR, on one host; an S3-compatible object store on
several), under <study public id>/<scope>/<version>/:
  analysis/          write_results(): tables/, figures/, results.md, results.json
  results.zip        that folder, zipped (the download)
  reader_quality.json  the coordinator's reader figures (never in the zip)
where <version> names the state of the study's ratings it was computed from. Which version a scope's
results are is a row of analysis.models.ComputedResults; only that version's files are kept. A
computation queued, running or failed is a row of analysis.models.ResultsComputation (status,
progress, heartbeat, why it failed), so that every server and every worker sees the same state; a
worker that dies leaves a row whose heartbeat stops, and the next read marks it failed, as for
releases.
"""

import dataclasses
import hashlib
import json
import logging
import os
import shutil
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

from django.conf import settings
from django.core.files import File
from django.core.files.storage import FileSystemStorage, storages
from django.db import transaction
from django.utils import timezone

from analysis.metric_import import parse_metric_scores
from analysis.models import ComputationStatus, ComputedResults, ImportedMetric, MetricScore, ResultsComputation
from analysis.names import SCHEMA, metrics_version
from annotation.importing import ImportProblem, ImportRejected
from annotation.models import AuditAction, AuditEvent, CandidatePair, Dataset, Study
from exports import models as release_models
from exports.recovery import fail_task_result, tasks_taken_and_dropped

logger = logging.getLogger("readingroom.analysis")

# analyze_release's default seed: a study's page and analyze_release on its release agree.
RESULTS_SEED = 0
TASKS = {"": "Both tasks", "task1": "Task 1: Realism", "task2": "Task 2: Clinical equivalence"}


class ResultsRefused(Exception):
    """The filter does not name something the study has; the message says what to use."""


@dataclass(frozen=True)
class Scope:
    """Which results: one dataset or all (""), one task or both ("")."""

    dataset: str = ""
    task: str = ""

    @property
    def name(self) -> str:
        return f"{self.dataset or 'all'}--{self.task or 'both'}"

    @property
    def description(self) -> str:
        return f"{self.dataset or 'all datasets'}, {TASKS[self.task].lower()}"


def study_datasets(study: Study) -> list[Dataset]:
    return list(Dataset.objects.filter(pairs__study=study, pairs__sampled=True).distinct().order_by("key"))


def check_scope(study: Study, *, dataset: str = "", task: str = "") -> Scope:
    """The scope for these filters, or ResultsRefused naming the bad one and the choices."""
    dataset, task = (dataset or "").strip(), (task or "").strip()
    if task not in TASKS:
        raise ResultsRefused(f"task: unknown task '{task}'. Use task1 (realism), task2 (equivalence) or leave it out.")
    if dataset:
        keys = [d.key for d in study_datasets(study)]
        if dataset not in keys:
            choices = ", ".join(keys) or "none yet: the study has no sampled pairs"
            raise ResultsRefused(f"dataset: the study has no dataset '{dataset}'. Use one of: {choices}.")
    return Scope(dataset, task)


# Every change to what the results rest on writes one of these audit events, in its own transaction.
RESULT_EVENTS = (
    AuditAction.SUBMITTED,
    AuditAction.VOIDED,
    AuditAction.CONSENSUS,
    AuditAction.CONSENSUS_WITHDRAWN,
    AuditAction.ADJUDICATED,
    AuditAction.MARGINS_CHANGED,
)


def data_version(study: Study) -> str:
    """Changes whenever a rating, void, consensus or adjudication changes what the results rest on.

    The newest audit event of those kinds (the audit trail is append-only): one short index scan,
    cheap enough for every page request and every poll.
    """
    last = (
        AuditEvent.objects.filter(study=study, action__in=RESULT_EVENTS)
        .order_by("-pk")
        .values_list("pk", flat=True)
        .first()
    )
    imported = list(
        ImportedMetric.objects.filter(study=study).order_by("name").values_list("name", "imported_at", "perfect_score")
    )
    state = [SCHEMA, RESULTS_SEED, last, metrics_version(), [[n, str(at), p] for n, at, p in imported]]
    return hashlib.sha256(json.dumps(state).encode()).hexdigest()[:16]


@dataclass
class ResultsState:
    """What the page shows for a scope: the last computed results, and any computation under way."""

    scope: Scope
    version: str  # of the study's ratings now
    prefix: str | None = None  # where the last computed results are in the results storage, maybe of an older version
    computed_version: str = ""
    status: str = ""  # "", "queued", "running" or "failed": the computation of `version`
    progress: int = 0
    error: str = ""

    @property
    def is_current(self) -> bool:
        return self.prefix is not None and self.computed_version == self.version

    @property
    def is_pending(self) -> bool:
        return self.status in ("queued", "running")

    def document(self) -> dict | None:
        if self.prefix is None:
            return None
        return json.loads(_read(f"{self.prefix}/analysis/results.json"))

    def reader_quality(self) -> list[dict]:
        name = self._stored("reader_quality.json")
        return json.loads(_read(name)) if name else []

    def figure(self, name: str, fmt: str) -> str | None:
        """A figure's file of the computed results (its name in the results storage), if it exists."""
        return self._stored(f"analysis/figures/{name}.{fmt}")

    def table(self, name: str, fmt: str) -> str | None:
        """A table's file (tables/<name>.csv, .md or .tex) of the computed results, if it exists."""
        return self._stored(f"analysis/tables/{name}.{fmt}")

    def zip_file(self) -> str | None:
        return self._stored("results.zip")

    def _stored(self, relative: str) -> str | None:
        if self.prefix is None:
            return None
        name = f"{self.prefix}/{relative}"
        return name if storages["results"].exists(name) else None


def _read(name: str) -> str:
    with storages["results"].open(name, "rb") as handle:
        return handle.read().decode("utf-8")


def is_stored(prefix: str) -> bool:
    """Whether computed results are in the results storage under prefix (their results.json, which the
    page and the API read): a folder wiped by hand, or objects a bucket's lifecycle rule deleted, are not."""
    return storages["results"].exists(f"{prefix}/analysis/results.json")


def forget_lost_results(study: Study, scope: Scope, state: ResultsState) -> ResultsState:
    """The scope's state, without the record of its last computed results if their files are gone
    from the results storage (logged): the page then computes them again instead of failing."""
    if state.prefix is None or is_stored(state.prefix):
        return state
    ComputedResults.objects.filter(
        study=study, dataset=scope.dataset, task=scope.task, version=state.computed_version
    ).delete()
    logger.warning(
        "The results of study %s (%s, %s) are gone from the results storage; they are computed again.",
        study.slug,
        scope.name,
        state.computed_version,
    )
    return results_state(study, scope)


def scope_prefix(study: Study, scope: Scope) -> str:
    """Where a scope's results are in the results storage (one folder per computed version)."""
    return f"{study.public_id}/{scope.name}"


def store_results(study: Study, scope: Scope, version: str, read_at: datetime, folder: Path) -> None:
    """Keep a computed folder (on this host's disk; it is used up) as the scope's results of version,
    computed from the study's rows as they were at read_at, then forget the version they replace.

    On one host the folder is moved into place; in an object store each file is uploaded. Results of
    rows read earlier than the kept ones' (a slower worker's) are not kept: the newest read wins.
    """
    storage = storages["results"]
    prefix = f"{scope_prefix(study, scope)}/{version}"
    kept = ComputedResults.objects.filter(study=study, dataset=scope.dataset, task=scope.task).first()
    same = kept is not None and kept.version == version and is_stored(prefix)  # not if its files are gone
    if same or (kept is not None and kept.computed_at > read_at):
        shutil.rmtree(folder)  # the same results (another worker's), or newer ones
        return
    try:
        if isinstance(storage, FileSystemStorage):
            target = Path(storage.path(prefix))
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.rmtree(target, ignore_errors=True)  # a crashed attempt's
            os.replace(folder, target)
        else:
            for path in sorted(p for p in folder.rglob("*") if p.is_file()):
                with path.open("rb") as handle:
                    storage.save(f"{prefix}/{path.relative_to(folder).as_posix()}", File(handle))
            shutil.rmtree(folder)
        with transaction.atomic():
            kept = (
                ComputedResults.objects.select_for_update()
                .filter(study=study, dataset=scope.dataset, task=scope.task)
                .first()
            )
            if kept is None:
                ComputedResults.objects.create(
                    study=study, dataset=scope.dataset, task=scope.task, version=version, computed_at=read_at
                )
            elif kept.computed_at <= read_at:
                ComputedResults.objects.filter(pk=kept.pk).update(version=version, computed_at=read_at)
            else:
                version = kept.version  # newer results were kept meanwhile: these go
    except BaseException:
        _delete_tree(storage, prefix)
        raise
    for old in storage.listdir(scope_prefix(study, scope))[0]:
        if old != version and not old.startswith("."):
            _delete_tree(storage, f"{scope_prefix(study, scope)}/{old}")


def _delete_tree(storage, prefix: str) -> None:
    """Every file under prefix in a storage (and, on disk, the folders)."""
    if isinstance(storage, FileSystemStorage):
        shutil.rmtree(storage.path(prefix), ignore_errors=True)
        return
    folders, files = storage.listdir(prefix)
    for name in files:
        storage.delete(f"{prefix}/{name}")
    for folder in folders:
        _delete_tree(storage, f"{prefix}/{folder}")


def scope_computations(study: Study, scope: Scope):
    """The scope's computations, of every version (one per version at most)."""
    return ResultsComputation.objects.filter(study=study, dataset=scope.dataset, task=scope.task)


def results_state(study: Study, scope: Scope) -> ResultsState:
    """The scope's last computed results and the computation of the current version, if any.

    A computation whose worker is gone (see _fail_if_lost) is marked failed on the way.
    """
    state = ResultsState(scope=scope, version=data_version(study))
    kept = ComputedResults.objects.filter(study=study, dataset=scope.dataset, task=scope.task).first()
    if kept is not None:
        state.prefix, state.computed_version = f"{scope_prefix(study, scope)}/{kept.version}", kept.version
    if not state.is_current:
        computation = scope_computations(study, scope).filter(version=state.version).first()
        if computation is not None:
            computation = _fail_if_lost(computation)
            state.status, state.progress, state.error = computation.status, computation.progress, computation.error
    return state


def _fail_if_lost(computation: ResultsComputation) -> ResultsComputation:
    """Mark failed, with the reason, a computation whose worker is gone: running without a heartbeat
    for HEARTBEAT_TIMEOUT, or queued though a worker took its task that long ago and never started it."""
    timeout = release_models.HEARTBEAT_TIMEOUT  # read here: a test may shorten it
    minutes = int(timeout.total_seconds() // 60)
    lost = timezone.now() - timeout
    if computation.status == ComputationStatus.RUNNING and (computation.heartbeat_at or computation.created_at) < lost:
        error = (
            f"The worker computing these results stopped (no sign of life for {minutes} minutes). Compute them again."
        )
    elif (
        computation.status == ComputationStatus.QUEUED
        and computation.created_at < lost
        and tasks_taken_and_dropped([computation.task_id])
    ):
        error = (
            f"The worker that took this computation stopped before starting it ({minutes} minutes ago). "
            "Compute them again."
        )
    else:
        return computation
    # Only if nothing changed meanwhile (a heartbeat, the worker's own end): one conditional UPDATE.
    changed = ResultsComputation.objects.filter(
        pk=computation.pk, status=computation.status, heartbeat_at=computation.heartbeat_at
    ).update(status=ComputationStatus.FAILED, error=error)
    if changed:
        logger.warning("Results computation %s: worker lost, marked failed", computation)
        fail_task_result(computation.task_id, error)
    computation.refresh_from_db()
    return computation


def claim_computation(study: Study, scope: Scope, version: str) -> int | None:
    """The worker's start: the queued computation of that version, now running (its pk), or None
    if it is not queued (any more): taken by another worker, failed meanwhile, or never requested."""
    computation = scope_computations(study, scope).filter(version=version, status=ComputationStatus.QUEUED)
    pk = computation.values_list("pk", flat=True).first()
    if pk is None:
        return None
    claimed = ResultsComputation.objects.filter(pk=pk, status=ComputationStatus.QUEUED).update(
        status=ComputationStatus.RUNNING, progress=0, error="", heartbeat_at=timezone.now()
    )
    return pk if claimed else None


def finish_computation(computation_pk: int) -> None:
    """Its results are stored: the row is no longer needed (ComputedResults is the record)."""
    ResultsComputation.objects.filter(pk=computation_pk).delete()


def fail_computation(computation_pk: int, error: str) -> None:
    """Say why it failed, unless it was marked failed meanwhile (its worker taken for lost)."""
    ResultsComputation.objects.filter(pk=computation_pk, status=ComputationStatus.RUNNING).update(
        status=ComputationStatus.FAILED, error=error
    )


@dataclass(frozen=True)
class MetricImportReport:
    metrics: dict[str, int]  # rows per metric in the file
    created: int
    unchanged: int
    replaced: int
    dry_run: bool

    def as_dict(self) -> dict:
        return dataclasses.asdict(self)

    def summary(self) -> str:
        what = "Would import" if self.dry_run else "Imported"
        metrics = ", ".join(f"{name} ({rows} rows)" for name, rows in self.metrics.items())
        return (
            f"{what} {self.created} new scores, {self.replaced} replaced, {self.unchanged} already stored "
            f"unchanged: {metrics}."
        )


def import_metric_scores(
    study: Study, data: bytes, *, user=None, dry_run: bool = False, replace: bool = False
) -> MetricImportReport:
    """Import a CSV of metric scores (analysis.metric_import) for the study's sampled pairs, all or nothing.

    Every row must name a sampled pair of the study. A score already stored with another value is
    refused (naming the line) unless `replace`, which replaces every stored score of the metrics
    in the file. Raises ImportRejected; the database is then unchanged.
    """
    parsed = parse_metric_scores(data, max_bytes=settings.READINGROOM_IMPORT_MAX_BYTES)
    datasets = {d.key: d for d in Dataset.objects.all()}
    pairs = {
        (dataset, study_id, variation): pk
        for pk, dataset, study_id, variation in CandidatePair.objects.filter(study=study, sampled=True)
        .order_by()
        .values_list("pk", "dataset__key", "source_study_id", "variation__key")
        .iterator(chunk_size=5000)
    }
    problems: list[ImportProblem] = []
    wanted: dict[tuple[str, int], tuple[int, float]] = {}
    for row in parsed.rows:
        dataset = datasets.get(row.dataset)
        study_id = dataset.normalize_study_id(row.study_id) if dataset else row.study_id
        pair = pairs.get((row.dataset, study_id, row.reref_variation))
        if pair is None:
            problems.append(
                ImportProblem(
                    f"No sampled pair {row.dataset} / {row.study_id} / {row.reref_variation} in study {study.slug}. "
                    "Scores are imported for the sampled pairs only: check the three key columns.",
                    line=row.line,
                    field="study_id",
                )
            )
            if len(problems) >= 50:
                break
            continue
        wanted[(row.metric, pair)] = (row.line, row.score)
    if problems:
        raise ImportRejected(problems)

    counts: dict[str, int] = {}
    for metric, _ in wanted:
        counts[metric] = counts.get(metric, 0) + 1
    created = unchanged = replaced = 0
    with transaction.atomic():
        # One metric import per study at a time.
        Study.objects.select_for_update().filter(pk=study.pk).exists()
        existing = {m.name: m for m in ImportedMetric.objects.filter(study=study, name__in=list(counts))}
        stored = {
            (name, pair): score
            for name, pair, score in MetricScore.objects.filter(metric__in=list(existing.values()))
            .order_by()
            .values_list("metric__name", "pair_id", "score")
        }
        for (metric, pair), (line, score) in wanted.items():
            old = stored.get((metric, pair))
            if old is None:
                created += 1
            elif old == score:
                unchanged += 1
            elif replace:
                replaced += 1
            else:
                problems.append(
                    ImportProblem(
                        f"Metric '{metric}' is already stored for this pair with score {old!r}. Import with "
                        "replace to replace every stored score of the metrics in this file.",
                        line=line,
                        field="score",
                    )
                )
                if len(problems) >= 50:
                    break
        for name, metric in existing.items():
            if metric.perfect_score != parsed.perfect.get(name) and not replace:
                problems.append(
                    ImportProblem(
                        f"Metric '{name}' is stored with perfect_score {metric.perfect_score!r}, the file gives "
                        f"{parsed.perfect.get(name)!r}. Give the same value, or import with replace.",
                        field="perfect_score",
                    )
                )
        if problems:
            raise ImportRejected(problems)
        report = MetricImportReport(counts, created, unchanged, replaced, dry_run)
        if dry_run or (created == 0 and replaced == 0 and len(existing) == len(counts)):
            return report
        now = timezone.now()
        for name in counts:
            metric = existing.get(name)
            if metric is None:
                metric = ImportedMetric.objects.create(
                    study=study, name=name, perfect_score=parsed.perfect.get(name), imported_at=now, imported_by=user
                )
                existing[name] = metric
            else:
                metric.perfect_score, metric.imported_at, metric.imported_by = parsed.perfect.get(name), now, user
                metric.save(update_fields=["perfect_score", "imported_at", "imported_by"])
                if replace:
                    metric.scores.all().delete()
        rows = [
            MetricScore(metric=existing[name], pair_id=pair, score=score)
            for (name, pair), (_, score) in wanted.items()
            if replace or (name, pair) not in stored
        ]
        MetricScore.objects.bulk_create(rows, batch_size=5000)
    return report
