"""llama-perplexity's KL-divergence statistics of a posrecall run file,
recomputed with numpy from the per-token values the run file stores.

Reads the run file (JSON) named on the command line and prints one JSON
object: {"all": FIGURES, "quarters": [FIGURES or null, x4]}, where FIGURES
names each figure as posrecall's `summary.forced.kld.stats` does, with `.`
as `_` (kld_mean, kld_p99_9, delta_p_rms, same_top_p_se, ...).

The definitions, as llama-perplexity's `--kl-divergence` report computes them:
- every forced token weighs alike, across targets;
- the mean with its standard error sqrt(var / (n - 1)), var the population
  variance, given as 0 for 10 values or fewer (or no spread);
- percentiles by linear interpolation at fraction * (n - 1) (numpy's
  default method), the median included;
- Δp: the forced token's probability in the run minus in the reference;
  RMS Δp = sqrt(mean Δp²), its standard error (1 / (2 RMS)) times that of
  mean Δp²;
- same top p: the share of tokens whose most likely token is the
  reference's, its standard error sqrt(p (1 - p) / (n - 1)).

A target's depth quarter is [0, .25), [.25, .5), [.5, .75) or [.75, 1].
The stored values are float32 (shortest decimal in the JSON): they are read
back as float32, then widened, as posrecall widens them.
"""

import json
import sys

import numpy as np

FRACTIONS = [
    ("max", 1.0), ("p99_9", 0.999), ("p99", 0.99), ("p95", 0.95), ("p90", 0.90), ("p75", 0.75),
    ("median", 0.5), ("p25", 0.25), ("p10", 0.10), ("p5", 0.05), ("p1", 0.01), ("p0_1", 0.001), ("min", 0.0),
]


def widened(values):
    return np.array(values, dtype=np.float32).astype(np.float64)


def mean_se(x):
    n = len(x)
    var = np.var(x)
    return float(np.mean(x)), float(np.sqrt(var / (n - 1))) if var > 0 and n > 10 else 0.0


def spread(prefix, x):
    out = {}
    out[prefix + "_mean"], out[prefix + "_mean_se"] = mean_se(x)
    for name, f in FRACTIONS:
        out[prefix + "_" + name] = float(np.quantile(x, f, method="linear"))
    return out


def figures(klds):
    if not klds:
        return None
    kld = np.concatenate([widened(k["tokens"]) for k in klds])
    delta_p = np.concatenate([widened(k["token_delta_p"]) for k in klds])
    same = np.concatenate([np.isin(np.arange(len(k["tokens"])), k["top_changed"], invert=True) for k in klds])
    n = len(kld)
    if n == 0:
        return None
    out = {"tokens": n}
    out.update(spread("kld", kld))
    out.update(spread("delta_p", delta_p))
    mse, mse_se = mean_se(delta_p ** 2)
    rms = np.sqrt(mse)
    out["delta_p_rms"] = float(rms)
    out["delta_p_rms_se"] = float(mse_se / (2 * rms)) if rms > 0 else 0.0
    p = float(np.mean(same))
    out["same_top_p"] = p
    out["same_top_p_se"] = float(np.sqrt(p * (1 - p) / (n - 1))) if n > 1 else 0.0
    return out


def main():
    with open(sys.argv[1], encoding="utf-8") as f:
        run = json.load(f)
    targets = [t for t in run["targets"] if t.get("forced", {}).get("kld")]
    quarter = lambda t: min(int(t["depth"] * 4), 3)
    print(json.dumps({
        "all": figures([t["forced"]["kld"] for t in targets]),
        "quarters": [figures([t["forced"]["kld"] for t in targets if quarter(t) == q]) for q in range(4)],
    }))


main()
