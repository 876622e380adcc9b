"""The worker's computation of a study's results (analysis.services says when it runs and keeps its state).

Imported by the worker's task and the commands only, never by a web request: it loads the
scientific stack (pandas, scipy, statsmodels, matplotlib, the metric packages).
"""

import dataclasses
import json
import shutil
import tempfile
from functools import partial
from pathlib import Path

import pandas as pd
from django.conf import settings
from django.utils import timezone

from analysis import parallel
from analysis.live import study_frames, study_imported_scores, study_pair_texts
from analysis.metrics import DatabaseMetricCache
from analysis.reader_quality import reader_quality
from analysis.report import write_analysis
from analysis.results import Margins, analyze
from analysis.sensitivity import builtin_scores, sensitivity
from analysis.sensitivity_report import attach, write_scores
from analysis.services import RESULTS_SEED, Scope, data_version, scope_prefix, store_results
from annotation.models import Study
from exports.building import zip_release


def compute_results(study: Study, scope: Scope, *, progress=None) -> str:
    """Analyse the study's current rows for a scope and store the results (the worker's job, and
    the compute_results command). progress(percent) is told how far it is.

    The rows are streamed with the release's own queries (binary COPY on PostgreSQL). Returns where
    the computed version is in the results storage.
    """
    progress = progress or (lambda percent: None)

    progress(5)
    # The version is read before the rows: a rating saved while they are read changes the study's
    # version, so these results are stale at once and the next request computes them again.
    version, read_at = data_version(study), timezone.now()
    frames = study_frames(study, datasets=[scope.dataset] if scope.dataset else None, text=False)
    progress(40)
    # Written here, on this host's disk (the worker's scratch folder in RESULTS_DIR), then stored.
    scratch = Path(settings.RESULTS_DIR)
    scratch.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix=".computing-", dir=scratch))
    try:
        reads = frames.reads[frames.reads["task"] == scope.task] if scope.task else frames.reads
        jobs: list = [partial(reader_quality, dataclasses.replace(frames, reads=reads))]
        if scope.task != "task1":
            scores, perfect = study_scores(
                study, dataset=scope.dataset, progress=lambda done, total: progress(40 + 20 * done // max(total, 1))
            )
            consensus = frames.task2_consensus
            jobs.append(partial(_sensitivity_with_scores, scores, consensus, perfect, work / "analysis"))
        progress(60)
        analysis = partial(
            analyze,
            frames,
            seed=RESULTS_SEED,
            dataset=scope.dataset or None,
            task=scope.task or None,
            progress=lambda done, total: progress(60 + 30 * done // max(total, 1)),
            taxonomy=list(study.variations.order_by("position", "key").values_list("key", "label", "dimension")),
            margins=study_margins(study),
            defer_fits=True,  # run beside the figures (write_analysis)
        )
        # Reader quality and the metric sensitivity are computed in a process of their own beside the
        # analysis (at 100,000 pairs they take as long as half of it); their DB reads were done above.
        (readers, *metric_sensitivity), [results] = parallel.forked_beside(jobs, [analysis])
        metric_sensitivity = metric_sensitivity[0] if metric_sensitivity else None
        if metric_sensitivity is not None:
            attach(results, metric_sensitivity)
        progress(90)

        write_analysis(results, work / "analysis", metric_sensitivity, scores_written=True)
        (work / "reader_quality.json").write_text(
            json.dumps([dataclasses.asdict(r) for r in readers], ensure_ascii=False), encoding="utf-8"
        )
        zip_release(work / "analysis", work / "results.zip", root=f"{study.slug}-results-{scope.name}")
        store_results(study, scope, version, read_at, work)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return f"{scope_prefix(study, scope)}/{version}"


def study_margins(study: Study) -> Margins:
    """The study's margins as the analysis takes them: fractions (the study keeps points and percent)."""

    def fraction(value):
        return None if value is None else float(value) / 100

    return Margins(
        task1_realistic=fraction(study.noninferiority_margin), task2_major=fraction(study.equivalence_margin)
    )


# Metric sensitivity ------------------------------------------------------------------------------


def metric_cache() -> DatabaseMetricCache:
    """The scores of the built-in metrics by text hash, in the database: shared by every study and
    every worker (analyze_release, which may run without a study, keeps a file of its own)."""
    return DatabaseMetricCache()


def _sensitivity_with_scores(scores: pd.DataFrame, consensus: pd.DataFrame, perfect: dict, outdir: Path):
    """The metric sensitivity, its per-pair scores written to outdir already (beside the analysis:
    writing 500,000 rows takes two seconds)."""
    result = sensitivity(scores, consensus, perfect=perfect)
    write_scores(result, outdir)
    return result


def score_pairs(study: Study) -> int:
    """Score the built-in metrics of the study's sampled pairs into the metric cache (those not there
    yet); returns how many pairs the study has."""
    pairs = study_pair_texts(study)
    builtin_scores(pairs, cache=metric_cache())
    return len(pairs)


def study_scores(study: Study, *, dataset: str = "", progress=None) -> tuple[pd.DataFrame, dict]:
    """The built-in metrics' scores of the study's sampled pairs (from the metric cache, or computed
    and kept there) and its imported metrics' scores, with the imported metrics' perfect scores."""
    datasets = [dataset] if dataset else None
    pairs = study_pair_texts(study, datasets=datasets)
    scores = builtin_scores(pairs, cache=metric_cache(), progress=progress)
    imported, perfect = study_imported_scores(study, datasets=datasets)
    if not imported.empty:
        scores = pd.concat([scores, imported], ignore_index=True)
    return scores, perfect
