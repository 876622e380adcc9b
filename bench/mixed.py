"""Mixed-model benchmark: analysis.mixed.fit_lmm on the reads of a study of N pairs.

    .venv/bin/python bench/mixed.py [--pairs 1000 10000 100000] [--logistic]

Draws, for each N, the Task 1 reads of N pairs as a study with versions kept apart gives them (one
exam per pair, two readers of 13 read the original and two others the alternative, 12 variations)
and fits score ~ alternative + (1 | reader) + (1 | exam) + (1 | reader:variation), the overall
row of the Results page's mixed-model table, including Satterthwaite's degrees of freedom. Each
fit runs in a process of its own so that its peak memory is its own. Beside it, in the same
process, the peer: ordinary least squares of the same score on the same design (numpy lstsq),
the cheapest fit of the fixed effects alone. Prints wall time, peak resident memory, the ratio
and the load average before and after (the machine is shared). Target: 100,000 pairs in under
5 s and 1 GB. With --logistic, the logistic model of "Realistic" (fit_glmm, Laplace) instead, on
1000 and 10000 pairs by default (the results fit it on groups of up to 20,000 reads).
"""

import argparse
import json
import os
import resource
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
READERS, VARIATIONS = 13, 12


def _reads(pairs: int, seed: int = 0):
    import numpy as np

    rng = np.random.default_rng(seed)
    exam = np.repeat(np.arange(pairs), 4)
    variation = np.repeat(rng.integers(0, VARIATIONS, pairs), 4)
    alternative = np.tile([0.0, 0.0, 1.0, 1.0], pairs)
    reader = np.concatenate([rng.choice(READERS, 4, replace=False) for _ in range(pairs)])
    severity, difficulty = rng.normal(0, 0.35, READERS), rng.normal(0, 0.35, pairs)
    latent = 0.45 + 0.3 * alternative + severity[reader] + difficulty[exam] + rng.normal(0, 0.55, len(exam))
    return np.clip(np.round(latent), 0, 2), alternative, reader, exam, reader * 100 + variation


def _child(pairs: int, logistic: bool) -> None:
    import numpy as np

    sys.path.insert(0, str(ROOT))
    from analysis.mixed import fit_glmm, fit_lmm

    score, alternative, reader, exam, reader_variation = _reads(pairs)
    X = np.column_stack([np.ones(len(score)), alternative])
    started = time.perf_counter()
    np.linalg.lstsq(X, score, rcond=None)
    peer = time.perf_counter() - started
    started = time.perf_counter()
    terms = {"reader": reader, "exam": exam, "reader x variation": reader_variation}
    if logistic:
        fit = fit_glmm((score == 0).astype(float), X, ["(Intercept)", "alternative"], terms)
        seconds = time.perf_counter() - started
        estimate, _, low, high, _ = fit.wald("alternative")
        df = float("inf")
    else:
        fit = fit_lmm(score, X, ["(Intercept)", "alternative"], terms)
        seconds = time.perf_counter() - started
        estimate, _, df, low, high, _ = fit.t_test("alternative")
    print(
        json.dumps(
            {
                "reads": len(score),
                "seconds": seconds,
                "peer_seconds": peer,
                "peak_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
                "estimate": estimate,
                "interval": [low, high],
                "df": df,
            }
        )
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--pairs", type=int, nargs="+")
    parser.add_argument("--logistic", action="store_true")
    parser.add_argument("--child", type=int, help=argparse.SUPPRESS)
    options = parser.parse_args()
    if options.child:
        _child(options.child, options.logistic)
        return
    pairs_list = options.pairs or ([1000, 10000] if options.logistic else [1000, 10000, 100000])
    print(f"load average before: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    header = f"{'pairs':>8} {'reads':>8} {'fit_lmm':>9} {'OLS peer':>9} {'ratio':>8} {'peak MB':>8}"
    print(f"{header}  alternative [95% CI], df".replace("fit_lmm", "fit_glmm" if options.logistic else "fit_lmm"))
    for pairs in pairs_list:
        command = [sys.executable, __file__, "--child", str(pairs)] + (["--logistic"] if options.logistic else [])
        out = subprocess.run(command, capture_output=True, text=True, check=True).stdout
        r = json.loads(out)
        print(
            f"{pairs:>8} {r['reads']:>8} {r['seconds']:>8.2f}s {r['peer_seconds']:>8.4f}s "
            f"{r['seconds'] / r['peer_seconds']:>7.0f}x {r['peak_mb']:>8.0f}  "
            f"{r['estimate']:.3f} [{r['interval'][0]:.3f}, {r['interval'][1]:.3f}], {r['df']:.0f}"
        )
    print(f"load average after: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")


if __name__ == "__main__":
    main()
