"""Settings that import pandas: tests/config/test_startup.py shows its probe would see it."""

import pandas  # noqa: F401

from config.settings import *  # noqa: F403
