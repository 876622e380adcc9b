"""Hypothesis profiles: how long the property tests search, by whom they are run.

- "ci" (CI sets HYPOTHESIS_PROFILE=ci in .ci/run; by hand the same): every property test searches
  its full budget, as written next to it (`examples(25)` means 25 examples).
- "dev" (the default, for the edit-test loop): a quarter of it, at least 3 examples.

Every test's budget is written once, at its full size, and scaled here; no test sets its own
number for a machine. The profile in force is printed in pytest's header.
"""

import os

from hypothesis import settings

PROFILE = os.environ.get("HYPOTHESIS_PROFILE", "dev")
SCALE = {"ci": 1.0, "dev": 0.25}

settings.register_profile("ci", deadline=None, print_blob=True)
settings.register_profile("dev", deadline=None)
if PROFILE not in SCALE:
    raise ValueError(f"HYPOTHESIS_PROFILE is one of {', '.join(SCALE)}, not {PROFILE!r}.")
settings.load_profile(PROFILE)


def examples(full: int) -> int:
    """A test's number of examples under the profile in force, from its full budget."""
    return full if PROFILE == "ci" else max(3, round(full * SCALE[PROFILE]))
