from django.core.management.base import BaseCommand

from consensus.services import settle_due_ratings


class Command(BaseCommand):
    help = (
        "Settle every rating whose undo window has closed and route its example (the worker does this at "
        "each rating's deadline; run it after the worker was down, or from cron as a safety net)."
    )

    def handle(self, *args, **options) -> None:
        settled = settle_due_ratings()
        self.stdout.write(f"Settled {settled} rating{'' if settled == 1 else 's'} whose undo window had closed.")
