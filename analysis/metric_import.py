"""Reading a CSV of metric scores computed elsewhere (BERTScore, RadGraph-F1, GREEN, RadCliQ, ...).

Columns: dataset, study_id, reref_variation, metric, score, and optionally perfect_score (the
score the metric gives a report against itself; the same on every row of a metric). Every problem
is reported with its line and field, as the pair import does (annotation.importing); nothing is
stored if there is any. This module only reads and checks the file; `analysis.services.import_metric_scores`
matches the rows to a study's pairs and `analyze_release --metric-scores` to a release's.
"""

import csv
import io
import math
from dataclasses import dataclass

from analysis.names import valid_metric_name
from annotation.importing import MAX_PROBLEMS, ImportProblem, ImportRejected, decode

REQUIRED = ("dataset", "study_id", "reref_variation", "metric", "score")
OPTIONAL = ("perfect_score",)


@dataclass(frozen=True)
class MetricRow:
    line: int
    dataset: str
    study_id: str
    reref_variation: str
    metric: str
    score: float


@dataclass(frozen=True)
class MetricFile:
    rows: list[MetricRow]
    perfect: dict[str, float | None]  # per metric in the file


def _number(text: str, line: int, field: str, problems: list[ImportProblem]) -> float | None:
    try:
        value = float(text.strip())
    except ValueError:
        value = math.nan
    if not math.isfinite(value):
        problems.append(ImportProblem(f"'{text}' is not a finite number. Write it like 0.734.", line=line, field=field))
        return None
    return value


def parse_metric_scores(data: bytes, *, max_bytes: int) -> MetricFile:
    """The rows of a metric-score CSV, or ImportRejected naming every bad line and field."""
    text = decode(data, max_bytes=max_bytes)
    reader = csv.reader(io.StringIO(text, newline=""), strict=True)
    try:
        header = [column.strip() for column in next(reader)]
    except csv.Error as error:
        raise ImportRejected([ImportProblem(f"The CSV is malformed here ({error}).", line=1)]) from None
    problems = [
        ImportProblem(f"Required column '{c}' is missing. Add it.", line=1, field=c)
        for c in REQUIRED
        if c not in header
    ]
    problems += [
        ImportProblem(
            f"Unknown column '{c}'. Rename or remove it; the columns are: {', '.join((*REQUIRED, *OPTIONAL))}.",
            line=1,
            field=c,
        )
        for c in header
        if c not in REQUIRED + OPTIONAL
    ]
    if len(set(header)) != len(header):
        problems.append(ImportProblem("A column appears twice. Keep one.", line=1))
    if problems:
        raise ImportRejected(problems)
    rows: list[MetricRow] = []
    perfect: dict[str, float | None] = {}
    perfect_line: dict[str, int] = {}
    seen: dict[tuple, int] = {}
    line = reader.line_num + 1
    while len(problems) < MAX_PROBLEMS:
        try:
            record = next(reader)
        except StopIteration:
            break
        except csv.Error as error:
            problems.append(ImportProblem(f"The CSV is malformed here ({error}).", line=line))
            break
        if record in ([], [""]):
            line = reader.line_num + 1
            continue
        if len(record) != len(header):
            problems.append(
                ImportProblem(f"This row has {len(record)} fields but the header has {len(header)}.", line=line)
            )
            line = reader.line_num + 1
            continue
        values = dict(zip(header, record, strict=True))
        for column in ("dataset", "study_id", "reref_variation", "metric"):
            if not values[column].strip():
                problems.append(ImportProblem(f"'{column}' is empty. Fill it in.", line=line, field=column))
        metric = values["metric"].strip()
        if metric and not valid_metric_name(metric):
            problems.append(
                ImportProblem(
                    f"'{metric}' cannot name an imported metric: use letters, digits, '_', '-' and '.' (at most "
                    "64), and not the name of a built-in metric (bleu2, rougeL, chrf).",
                    line=line,
                    field="metric",
                )
            )
        score = _number(values["score"], line, "score", problems)
        raw_perfect = values.get("perfect_score", "").strip()
        best = _number(raw_perfect, line, "perfect_score", problems) if raw_perfect else None
        if metric in perfect and perfect[metric] != best:
            problems.append(
                ImportProblem(
                    f"perfect_score differs from line {perfect_line[metric]} for metric '{metric}'. Give one value "
                    "for every row of a metric (or leave it empty on all).",
                    line=line,
                    field="perfect_score",
                )
            )
        perfect.setdefault(metric, best)
        perfect_line.setdefault(metric, line)
        key = (values["dataset"].strip(), values["study_id"].strip(), values["reref_variation"].strip(), metric)
        if key in seen:
            problems.append(
                ImportProblem(
                    f"Duplicate score: this pair and metric are already on line {seen[key]}. Keep one of the two.",
                    line=line,
                )
            )
        seen.setdefault(key, line)
        if score is not None:
            rows.append(MetricRow(line, *key, score))
        line = reader.line_num + 1
    if problems:
        raise ImportRejected(problems)
    if not rows:
        raise ImportRejected([ImportProblem("The file has a header but no rows. Add at least one score.")])
    return MetricFile(rows=rows, perfect=perfect)
