"""Settings of the benchmark server: the project's own, with the floor endpoint added (urls_floor)."""

from config.settings import *  # noqa: F403

ROOT_URLCONF = "bench.urls_floor"
