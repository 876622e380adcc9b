#!/usr/bin/env python
import os
import sys


def main() -> None:
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")
    from django.conf import settings
    from django.core.exceptions import ImproperlyConfigured
    from django.core.management import execute_from_command_line

    # A setting that cannot be understood is a mistake in the environment, not in the code: say it
    # in one line, not as a traceback.
    try:
        settings.INSTALLED_APPS  # noqa: B018 - reading one setting loads them all
    except ImproperlyConfigured as error:
        sys.exit(f"ReadingRoom cannot start: {error}")
    execute_from_command_line(sys.argv)


if __name__ == "__main__":
    main()
