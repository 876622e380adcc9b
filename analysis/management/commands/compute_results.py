import time

from django.core.management.base import BaseCommand, CommandError, CommandParser

from analysis.management.exit import ExitWhenDone
from analysis.queueing import request_results
from analysis.services import ResultsRefused, check_scope
from annotation.models import Study


class Command(ExitWhenDone, BaseCommand):
    help = (
        "Compute a study's results now, as the worker does for the Results page (for example right after "
        "loading data, so that the page opens filled); with --queue, ask the worker to compute them."
    )
    # Django's system checks import every URL, view and API module first: `manage.py check` is there
    # for that, and this command reads the database and writes results only.
    requires_system_checks = []

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--study", required=True, help="Study slug.")
        parser.add_argument("--dataset", default="", help="Only this dataset (default: all).")
        parser.add_argument("--task", default="", help="task1 or task2 (default: both).")
        parser.add_argument(
            "--queue",
            action="store_true",
            help="Queue the computation for the worker (manage.py db_worker) and return at once, as the "
            "Results page does; nothing is queued if the results are current or already queued.",
        )

    def handle(self, *args, **options) -> None:
        study = Study.objects.filter(slug=options["study"]).first()
        if study is None:
            raise CommandError(f"No study '{options['study']}'.")
        try:
            scope = check_scope(study, dataset=options["dataset"], task=options["task"])
        except ResultsRefused as refused:
            raise CommandError(str(refused)) from None
        if options["queue"]:
            state = request_results(study, scope)
            said = "are current" if state.is_current else f"are {state.status} for the worker"
            self.stdout.write(f"The results of {study.slug} ({scope.description}) {said}.")
            return
        # The process that draws the figures starts first, and imports the drawing code while this one
        # imports the scientific stack (analysis.figure_jobs.drawing_processes). Both load here, not
        # when the command starts (--queue needs neither; tests/config/test_startup.py).
        from analysis.figure_jobs import drawing_processes

        start = time.perf_counter()
        with drawing_processes():
            from analysis.computing import compute_results

            stored = compute_results(study, scope)
        seconds = time.perf_counter() - start
        self.stdout.write(
            f"Computed the results of {study.slug} ({scope.description}) in {seconds:.1f} s: "
            f"{stored} in the results storage"
        )
