"""Metric sensitivity in the results folder, next to the study results (analysis.report).

`attach(results, sensitivity)` adds its table to the results (so tables/metric_sensitivity.csv,
results.md and results.json carry it, the latter under the key "metric_sensitivity");
`write_sensitivity(sensitivity, outdir)` then writes the per-pair scores (tables/metric_scores.csv)
and the figures (figures/metric_<name>.svg|png) and lists the figures in results.md.
`release_sensitivity(frames, ...)` computes it all from a release's frames.
"""

from pathlib import Path

import pandas as pd

from analysis.figure_jobs import render_sensitivity_figures, sensitivity_figure_names
from analysis.frames import ReleaseFrames
from analysis.metric_import import MetricFile
from analysis.metrics import MetricCache, Progress
from analysis.names import IMPORTED, metric_caption
from analysis.results import Results, in_taxonomy_order
from analysis.sensitivity import KEY, SCORES, Sensitivity, builtin_scores, release_pair_texts, sensitivity
from annotation.importing import ImportProblem, ImportRejected

TABLE = "metric_sensitivity"
TITLE = "Metric sensitivity: automatic metrics on clinically equivalent and Major Discrepancy pairs"


def attach(results: Results, result: Sensitivity) -> None:
    """The sensitivity's table and document among the results', its rows in the results' taxonomy order."""
    table = in_taxonomy_order(result.table, results.document.get("variations", []))
    results.tables[TABLE] = table.reset_index(drop=True)
    results.document[TABLE] = {**result.document, "table": [result.document["table"][i] for i in table.index]}


def write_sensitivity(
    result: Sensitivity, outdir: str | Path, variations: dict | None = None, *, scores_written: bool = False
) -> None:
    """The per-pair scores (unless written already, write_scores) and the figures (their rows by the
    labels of `variations`, key -> label and dimension, as analysis.names.variation_labels gives
    them), listed in results.md."""
    outdir = Path(outdir)
    if not scores_written:
        write_scores(result, outdir)
    render_sensitivity_figures(result, outdir / "figures", variations)
    markdown = outdir / "results.md"
    if markdown.is_file():
        lines = ["", f"## {TITLE}: figures", ""]
        for name, entry in sensitivity_figure_names(result).items():
            lines += [
                f"![{entry['figure_title']}](figures/{name}.png)",
                "",
                f"*{entry['figure_title']}.* {metric_caption(entry)}",
                "",
            ]
        lines += ["", "Per-pair scores with their consensus rating: `tables/metric_scores.csv`.", ""]
        with markdown.open("a", encoding="utf-8") as handle:
            handle.write("\n".join(lines))


def write_scores(result: Sensitivity, outdir: str | Path) -> None:
    """tables/metric_scores.csv: the per-pair scores with their consensus rating."""
    tables = Path(outdir) / "tables"
    tables.mkdir(parents=True, exist_ok=True)
    result.scores.to_csv(tables / "metric_scores.csv", index=False, na_rep="", lineterminator="\n")


def imported_release_scores(imported: MetricFile, pairs: pd.DataFrame) -> pd.DataFrame:
    """The imported rows as SCORES, each matched to a Task 2 pair of the release (else ImportRejected)."""
    known = set(zip(pairs["dataset"], pairs["study_id"], pairs["reref_variation"], strict=True))
    problems = [
        ImportProblem(
            f"No Task 2 pair {row.dataset} / {row.study_id} / {row.reref_variation} in the release. Check the "
            "three key columns against task2/task2_consensus.csv.",
            line=row.line,
            field="study_id",
        )
        for row in imported.rows
        if (row.dataset, row.study_id, row.reref_variation) not in known
    ]
    if problems:
        raise ImportRejected(problems[:50])
    frame = pd.DataFrame(
        [(r.dataset, r.study_id, r.reref_variation, r.metric, IMPORTED, r.score) for r in imported.rows],
        columns=SCORES,
    )
    return frame


def release_sensitivity(
    frames: ReleaseFrames,
    *,
    dataset: str | None = None,
    imported: MetricFile | None = None,
    cache: MetricCache | None = None,
    progress: Progress | None = None,
    limit: int | None = None,
) -> Sensitivity:
    """The sensitivity of the built-in (and imported) metrics on a release's Task 2 pairs (needs text frames);
    limit: metrics.score_pairs."""
    pairs = release_pair_texts(frames.task2_full)
    consensus = frames.task2_consensus
    if dataset:
        pairs = pairs[pairs["dataset"] == dataset]
        consensus = consensus[consensus["dataset"] == dataset]
    scores = builtin_scores(pairs, cache=cache, progress=progress, limit=limit)
    perfect = {}
    if imported is not None:
        extra = imported_release_scores(imported, release_pair_texts(frames.task2_full))
        if dataset:
            extra = extra[extra["dataset"] == dataset]
        scores = pd.concat([scores, extra], ignore_index=True)
        perfect = {metric: value for metric, value in imported.perfect.items() if value is not None}
    return sensitivity(scores, consensus, perfect=perfect)


__all__ = ["KEY", "attach", "imported_release_scores", "release_sensitivity", "write_sensitivity"]
