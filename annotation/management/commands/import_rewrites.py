from annotation.management.commands import import_pairs
from annotation.services import import_rewrites


class Command(import_pairs.Command):
    help = (
        "Import rewrites (CSV or JSON Lines) into a study, each joined to its stored original report "
        "(see import_reports) to become a candidate pair; all or nothing."
    )
    service = staticmethod(import_rewrites)
