"""Reference values from Gwet's irrCAC 0.4.4, which cannot be installed next to our pins.

irrCAC 0.4.4 requires pandas<3 and scipy==1.12.0, so the reference values are computed once in a
separate environment and stored in irrcac.json (with the ratings they were computed on):

    python3.12 -m venv /tmp/irrcac && /tmp/irrcac/bin/pip install irrCAC==0.4.4 krippendorff==0.9.0
    /tmp/irrcac/bin/python tests/analysis/reference/make_irrcac_reference.py > tests/analysis/reference/irrcac.json

Data sets: irrCAC's `raw_4raters` (Gwet 2014, also Krippendorff's own worked example of 4 coders and
12 units, 5 categories, with missing ratings) and three on our 0-2 scale: two readers on 60 examples,
the same with a third read only where the first two disagreed (a release's shape), and a skewed one
where nearly every read is 0 (the kappa paradox).
Krippendorff's alpha comes from irrCAC's `krippendorff()` with the weights of Krippendorff's metric.
"""

import json
import sys

import numpy as np
import pandas as pd
from irrCAC.datasets import raw_4raters
from irrCAC.raw import CAC


def krippendorff_weights(counts: np.ndarray, level: str) -> np.ndarray:
    q = counts.shape[1]
    if level == "nominal":
        return np.eye(q)
    marginals = counts[counts.sum(axis=1) >= 2].sum(axis=0).astype(float)
    cumulative = np.concatenate([[0.0], np.cumsum(marginals)])
    distance = np.zeros((q, q))
    for c in range(q):
        for k in range(q):
            low, high = min(c, k), max(c, k)
            distance[c, k] = (cumulative[high + 1] - cumulative[low] - (marginals[c] + marginals[k]) / 2) ** 2
    return 1 - distance / distance.max()


def estimate(result: dict) -> list[float]:
    est = result["est"]
    return [float(est["coefficient_value"]), *(float(v) for v in est["confidence_interval"])]


def reference(ratings: pd.DataFrame, categories: list[float]) -> dict:
    counts = np.stack([(ratings == c).sum(axis=1).to_numpy() for c in categories], axis=1)
    values = {
        "fleiss_kappa": estimate(CAC(ratings, categories=categories, digits=17).fleiss()),
        "gwet_ac1": estimate(CAC(ratings, categories=categories, digits=17).gwet()),
        "gwet_ac2_ordinal": estimate(CAC(ratings, categories=categories, weights="ordinal", digits=17).gwet()),
    }
    for level in ("nominal", "ordinal"):
        weights = krippendorff_weights(counts, level)
        values[f"krippendorff_alpha_{level}"] = estimate(
            CAC(ratings, categories=categories, weights=weights, digits=17).krippendorff()
        )
    rows = [[None if pd.isna(v) else int(v) for v in row] for row in ratings.to_numpy()]
    return {"categories": categories, "ratings": rows, "values": values}


def main() -> None:
    rng = np.random.default_rng(2026)
    first = rng.integers(0, 3, 60)
    second = np.where(rng.random(60) < 0.6, first, rng.integers(0, 3, 60))
    third = np.where(first != second, rng.integers(0, 3, 60), np.nan)
    skewed_first = np.where(rng.random(80) < 0.92, 0, rng.integers(0, 3, 80))
    skewed_second = np.where(rng.random(80) < 0.92, 0, rng.integers(0, 3, 80))
    data = {
        "raw_4raters": (raw_4raters(), [1.0, 2.0, 3.0, 4.0, 5.0]),
        "two_readers_60": (pd.DataFrame({"r1": first, "r2": second}).astype(float), [0.0, 1.0, 2.0]),
        "third_read_on_disagreement_60": (
            pd.DataFrame({"r1": first, "r2": second, "r3": third}).astype(float),
            [0.0, 1.0, 2.0],
        ),
        "skewed_80": (pd.DataFrame({"r1": skewed_first, "r2": skewed_second}).astype(float), [0.0, 1.0, 2.0]),
    }
    json.dump({name: reference(*args) for name, args in data.items()}, sys.stdout, indent=1)
    sys.stdout.write("\n")


if __name__ == "__main__":
    main()
