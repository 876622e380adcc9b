import argparse
from pathlib import Path

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError, CommandParser

from analysis.figure_jobs import drawing_processes
from analysis.management.exit import ExitWhenDone
from analysis.metric_import import parse_metric_scores
from annotation.importing import ImportRejected
from annotation.progress import progress_bar

# Pairs not in the metric cache that are scored without --score-metrics: 6 s cold on a 2-core machine
# (bench/metrics.py --pairs 10000), so that analysing a release of 100,000 pairs stays within its 30 s
# target. A release of the published shape (120 Task 2 pairs) is scored at once; a larger one once
# asked, and read back from the cache after that.
SCORE_WITHOUT_ASKING = 10_000


class Command(ExitWhenDone, BaseCommand):
    help = (
        "Analyse a release folder (ours or the published MIMIC-CXR-Ext-ReRef files): summary.md, methods.md, "
        "tables (CSV, Markdown, LaTeX), figures (SVG, PNG, PDF), results.md and results.json, with the metric "
        "sensitivity of BLEU-2, ROUGE-L and chrF (and of imported metric scores) on the Task 2 pairs. Reads only "
        "the files; needs no database rows."
    )
    # Reads files and writes files: Django's system checks (models, URLs, settings) have nothing to say here.
    requires_system_checks = []

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("path", type=Path, help="The release folder (the one holding task1/ and task2/).")
        parser.add_argument("--out", required=True, type=Path, help="Folder for the results (created if needed).")
        parser.add_argument("--dataset", help="Only this dataset (e.g. mimic-cxr).")
        parser.add_argument("--task", choices=["task1", "task2"], help="Only this task.")
        parser.add_argument("--seed", type=int, default=0, help="Seed of the judges' bootstrap intervals (default 0).")
        parser.add_argument(
            "--metric-scores",
            type=Path,
            help="CSV of metric scores computed elsewhere (dataset, study_id, reref_variation, metric, score"
            "[, perfect_score]), analysed like the built-in metrics.",
        )
        parser.add_argument(
            "--metric-cache",
            type=Path,
            help="SQLite file of cached metric scores (default: metric-cache.sqlite3 in READINGROOM_RESULTS_DIR).",
        )
        parser.add_argument("--no-metrics", action="store_true", help="Leave out the metric sensitivity.")
        parser.add_argument(
            "--score-metrics",
            action="store_true",
            help=f"Score the metrics of however many pairs are not in the metric cache (without it, more than "
            f"{SCORE_WITHOUT_ASKING:,} such pairs leave the metric sensitivity out, and the command says so).",
        )
        parser.add_argument(
            "--noninferiority-margin",
            type=_margin,
            metavar="POINTS",
            help="Task 1 non-inferiority margin, in percentage points of the share rated Realistic (e.g. 10).",
        )
        parser.add_argument(
            "--equivalence-margin",
            type=_margin,
            metavar="PERCENT",
            help="Task 2 equivalence margin: the largest %% of pairs with a Major Discrepancy (e.g. 5).",
        )

    def handle(self, *args, **options) -> None:
        # The processes that draw the figures start before the scientific stack is imported here, and
        # import the drawing code meanwhile (analysis.figure_jobs.drawing_processes).
        with drawing_processes():
            self._analyze(options)

    def _analyze(self, options: dict) -> None:
        from analysis.metrics import MetricCache, TooManyToScore
        from analysis.release_folder import NotARelease, read_release
        from analysis.report import write_analysis
        from analysis.results import AnalysisInputError, Margins, analyze
        from analysis.sensitivity_report import attach, release_sensitivity

        out: Path = options["out"]
        if out.exists() and not out.is_dir():
            raise CommandError(f"{out}: exists and is not a folder. Give a folder for the results.")
        metrics_on = not options["no_metrics"] and options["task"] != "task1"
        imported = None
        if options["metric_scores"] and metrics_on:
            try:
                data = options["metric_scores"].read_bytes()
                imported = parse_metric_scores(data, max_bytes=settings.READINGROOM_IMPORT_MAX_BYTES)
            except OSError as error:
                raise CommandError(f"{options['metric_scores']}: {error.strerror}.") from None
            except ImportRejected as rejected:
                raise CommandError(self._problems(options["metric_scores"], rejected)) from None
        try:
            # The metric sensitivity scores the Task 2 reports: only task2_full is read with its text.
            frames = read_release(options["path"], text={"task2_full"} if metrics_on else False)
            margins = Margins(
                task1_realistic=_fraction(options["noninferiority_margin"]),
                task2_major=_fraction(options["equivalence_margin"]),
            )
            results = analyze(
                frames,
                seed=options["seed"],
                dataset=options["dataset"],
                task=options["task"],
                margins=margins,
                defer_fits=True,
            )
        except (NotARelease, AnalysisInputError) as error:
            raise CommandError(str(error)) from None
        sensitivity = deferred = None
        if metrics_on:
            cache = MetricCache(options["metric_cache"] or Path(settings.RESULTS_DIR) / "metric-cache.sqlite3")
            with progress_bar(total=0, unit="pairs", desc="Scoring metrics", disable=None) as bar:

                def progress(done: int, total: int) -> None:
                    bar.total = total
                    bar.update(done - bar.n)

                limit = None if options["score_metrics"] else SCORE_WITHOUT_ASKING
                try:
                    sensitivity = release_sensitivity(
                        frames,
                        dataset=options["dataset"],
                        imported=imported,
                        cache=cache,
                        progress=progress,
                        limit=limit,
                    )
                except ImportRejected as rejected:
                    raise CommandError(self._problems(options["metric_scores"], rejected)) from None
                except TooManyToScore as many:
                    deferred = many
        if deferred is not None:
            self.stdout.write(
                f"Metric sensitivity left out: {deferred.unscored:,} of the release's {deferred.total:,} pairs "
                "have not been scored here yet (scoring takes about a minute per 100,000 pairs on two cores). "
                "Run again with --score-metrics to score them; they are kept in the metric cache."
            )
        if sensitivity is not None:
            attach(results, sensitivity)
        write_analysis(results, out, sensitivity)
        counts = ", ".join(
            f"{task}: {values['examples']} examples" for task, values in results.document["counts"].items()
        )
        self.stdout.write(f"Wrote {out}/results.md, results.json, tables/ and figures/ ({counts}).")

    @staticmethod
    def _problems(path: Path, rejected: ImportRejected) -> str:
        return f"{path}: nothing was read.\n" + "\n".join(f"  {problem}" for problem in rejected.problems)


def _margin(text: str) -> float:
    """A margin given on the command line: a number from 0.1 to 50."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number; give e.g. 10") from None
    if not 0.1 <= value <= 50:
        raise argparse.ArgumentTypeError(f"{text} is out of range; give a margin from 0.1 to 50")
    return value


def _fraction(value: float | None) -> float | None:
    return None if value is None else value / 100
