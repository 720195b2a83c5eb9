"""The fits behind ``efficiency="per_type"``, their held-out checks, and what they change in iteration time.

1. Fits (:mod:`frenzy_env.world.efficiency_fits`, published numbers quoted there): the V100 micro-batch curve
   (mixed precision and FP32), the measured level of every benchmarked GPU, the ridge rule; then the constants
   they give against the shipped :data:`~frenzy_env.world.efficiency.HALF_TOKENS_BY_TYPE` and
   :data:`~frenzy_env.world.efficiency.LEVEL_BY_TYPE`.
2. Held-out checks: predicted, measured and the relative error of each.
3. Gavel's measured throughputs (``throughput/gavel/simulation_throughputs.json`` under ``$FRENZY_ENV_DATA``;
   skipped, and said so, where it is unset): the micro-batch curves of the same FP32 jobs on V100 and P100, whose
   half-saturation batches should stand in the ratio of the two GPUs' ridges (the ``T_half`` rule).
4. A measured GPT-2 small run on an RTX 3090 put in the simulator's terms, against the two curves.
5. Iteration times of a few representative jobs under "flat", "microbatch" and "per_type".
6. LLM widths: the H100's level on MosaicML's MPT benchmarks (H100 and A100-80GB, the same code), the width rule
   fitted on them, and the per-GPU H100 / A100 throughput of a 7B-class GPT the model gives against the published.

Usage: ``python scripts/fit_efficiency_per_type.py [--json OUT]``.
"""

from __future__ import annotations

import argparse
import json
import re
import sys

import numpy as np

from frenzy_env.paths import atomic_write_json, shared_data_dir
from frenzy_env.world import efficiency_fits as fits
from frenzy_env.world.cluster import get_gpu_type
from frenzy_env.world.efficiency import (
    HALF_TOKENS_BY_TYPE,
    LEVEL_BY_TYPE,
    REFERENCE_TOKENS,
    WIDTH_EXPONENT,
    microbatch_efficiency,
    saturation,
    type_efficiency,
)
from frenzy_env.world.models import get_model
from frenzy_env.world.throughput import DEFAULT_OVERHEAD_S, DEFAULT_UTILISATION, iteration_time

GAVEL_FILE = "throughput/gavel/simulation_throughputs.json"
#: Gavel's job types run on both V100 and P100 in FP32 (Narayanan et al., OSDI 2020): a Transformer translating
#: Multi30k and an LSTM language model on Wikitext-2, at several batch sizes (sentences / sequences)
GAVEL_JOBS = ("Transformer", "LM")
#: batches at or above which a Gavel row is left out: the V100 Transformer at 256 is slower than at 128 (memory
#: pressure, as the BLOOM rows near the memory limit)
GAVEL_MAX_BATCH = 256
#: V100 and P100 FP32 peaks (datasheets: SXM2 15.7, PCIe 9.3 TFLOP/s) and memory bandwidths (900, 732 GB/s)
GAVEL_RIDGES = {"v100": fits.ridge(15.7, 900.0), "p100": fits.ridge(9.3, 732.0)}

#: Giles Thomas, "Writing an LLM from scratch, part 28: training a base model from scratch on an RTX 3090"
#: (gilesthomas.com, 2025) and part 32h: GPT-2 small (12 layers, width 768, sequence 1024, untied head), AMP,
#: micro-batch 6: 19,921 tokens/s on one RTX 3090
GPT2_3090 = {"model": "gpt2", "micro_batch": 6, "seq_len": 1024, "tokens_per_s": 19921.0}

#: representative jobs: (label, model, global batch, sequence, GPU type, dp, tp, pp, micro-batch, nodes spanned)
JOBS = (
    ("GPT-2 small, 1 x RTX 3090", "gpt2", 32, 1024, "RTX3090-24GB", 1, 1, 1, 32, 1),
    ("GPT-2 small, 8 x RTX 3090 (2 nodes)", "gpt2", 32, 1024, "RTX3090-24GB", 8, 1, 1, 4, 2),
    ("GPT-2 small, 8 x A100-80GB", "gpt2", 32, 1024, "A100-80GB", 8, 1, 1, 4, 1),
    ("GPT-2 XL, 8 x V100-32GB, mb 2", "gpt2-xl", 64, 1024, "V100-32GB", 8, 1, 1, 2, 1),
    ("BERT-large, 4 x T4 (2 nodes), mb 8", "bert-large", 64, 512, "T4-16GB", 4, 1, 1, 8, 2),
    ("GPT-2 medium, 2 x P100, mb 4", "gpt2-medium", 16, 1024, "P100-16GB", 2, 1, 1, 4, 1),
    ("LLaMA-7B, 64 x A100-80GB (dp 8, tp 8)", "llama-7b", 512, 2048, "A100-80GB", 8, 8, 1, 4, 8),
    ("LLaMA-7B, 16 x H100 (dp 2, tp 8), mb 2", "llama-7b", 512, 2048, "H100-80GB", 2, 8, 1, 2, 2),
    ("LLaMA-13B, 32 x H100 (dp 4, tp 8), mb 1", "llama-13b", 256, 2048, "H100-80GB", 4, 8, 1, 1, 4),
)


def section_fits() -> dict:
    mixed, fp32 = fits.fit_v100_half_tokens(), fits.fit_v100_half_tokens("fp32")
    print("1. Fits")
    for name, (half, err, rms, worst) in (("mixed precision", mixed), ("FP32", fp32)):
        print(f"  V100 T_half ({name}): {half:.1f} +- {err:.1f} tokens, rms {rms:.1%}, largest {worst:.1%}")
    lv = fits.levels(mixed[0])
    print("  measured levels (efficiency at 16384 tokens over the A100 80GB SXM4's, same version and model):")
    for (version, label, model), x in sorted(lv.items()):
        print(f"    {version} {label:16s} {model:10s} {x:.3f}  (ridge {fits.ridge(*fits.BENCH_GPUS[label][1:3]):.1f})")
    a, b, worst = fits.fit_level_rule(lv)
    print(f"  level rule: 1 / ({a:.3f} + {b:.5f} ridge), largest log residual {worst:.3f}")
    half, level = fits.fitted_constants()
    print("  constants: fitted against shipped")
    for name in half:
        print(f"    {name:13s} T_half {half[name]:7.1f} ({HALF_TOKENS_BY_TYPE[name]:5.0f})   "
              f"level {level[name]:.4f} ({LEVEL_BY_TYPE[name]:.3f})")
    return {"v100_mixed": mixed, "v100_fp32": fp32, "rule": [a, b, worst], "half_tokens": half, "levels": level}


def section_checks() -> list:
    print("2. Held-out checks: predicted, measured, error")
    out = []
    for what, pred, meas in fits.checks():
        print(f"  {what:72s} {pred:8.3f} {meas:8.3f} {pred / meas - 1:+7.1%}")
        out.append({"check": what, "predicted": pred, "measured": meas})
    return out


def gavel_curves(path) -> dict:
    """``{(gpu, job): (batches, samples/s)}`` of the one-GPU rows of Gavel's file below GAVEL_MAX_BATCH."""
    data = json.loads(path.read_text())
    out = {}
    for gpu in GAVEL_RIDGES:
        for job in GAVEL_JOBS:
            rows = []
            for key, value in data[gpu].items():
                m = re.fullmatch(rf"\('{job} \(batch size (\d+)\)', 1\)", key)
                if m and int(m.group(1)) < GAVEL_MAX_BATCH:
                    rows.append((int(m.group(1)), value["null"] * int(m.group(1))))
            rows.sort()
            out[(gpu, job)] = (np.array([r[0] for r in rows], float), np.array([r[1] for r in rows]))
    return out


def fit_half_batch(batches: np.ndarray, samples_per_s: np.ndarray) -> float:
    """Half-saturation batch of ``samples/s = S b / (b + b_half)``, least squares on log."""
    from scipy.optimize import curve_fit

    popt, _ = curve_fit(lambda b, s, h: np.log(s) + np.log(b / (b + h)), batches, np.log(samples_per_s),
                        p0=[float(samples_per_s.max()), float(batches.mean())])
    return float(popt[1])


def section_gavel() -> dict | None:
    root = shared_data_dir()
    print("3. Gavel FP32 curves, V100 and P100 (the T_half rule across Volta and Pascal)")
    if root is None or not (root / GAVEL_FILE).is_file():
        print(f"  skipped: $FRENZY_ENV_DATA unset or without {GAVEL_FILE}")
        return None
    curves = gavel_curves(root / GAVEL_FILE)
    rule = GAVEL_RIDGES["p100"] / GAVEL_RIDGES["v100"]
    out = {"rule_p100_over_v100": rule}
    for job in GAVEL_JOBS:
        halves = {gpu: fit_half_batch(*curves[(gpu, job)]) for gpu in GAVEL_RIDGES}
        ratio = halves["p100"] / halves["v100"]
        print(f"  {job:12s} half batch V100 {halves['v100']:6.1f}, P100 {halves['p100']:6.1f}: P100 / V100 "
              f"{ratio:.3f}; the rule predicts {rule:.3f} ({rule / ratio - 1:+.1%})")
        out[job] = {"v100": halves["v100"], "p100": halves["p100"]}
    return out


def section_gpt2_3090() -> dict:
    m = get_model(GPT2_3090["model"])
    tokens = GPT2_3090["micro_batch"] * GPT2_3090["seq_len"]
    compute = tokens / GPT2_3090["tokens_per_s"] - DEFAULT_OVERHEAD_S
    u = m.flops_per_token(GPT2_3090["seq_len"]) * tokens / (get_gpu_type("RTX3090-24GB").peak_tflops * 1e12 * compute)
    v5 = microbatch_efficiency(tokens, DEFAULT_UTILISATION)
    per = type_efficiency(tokens, DEFAULT_UTILISATION, "RTX3090-24GB")
    print("4. GPT-2 small on one RTX 3090 (a hobbyist's AMP run, micro-batch 6 x 1024), in the simulator's terms")
    print(f"  measured u {u:.3f}; 'microbatch' {v5:.3f} ({v5 / u - 1:+.0%}); 'per_type' {per:.3f} ({per / u - 1:+.0%})")
    ref = u * saturation(REFERENCE_TOKENS, HALF_TOKENS_BY_TYPE["RTX3090-24GB"]) / saturation(
        tokens, HALF_TOKENS_BY_TYPE["RTX3090-24GB"])
    print(f"  (its level at 16384 tokens on the 3090's curve: {ref:.3f}; no A100 run of the same code exists to "
          "tell the GPU from the software)")
    return {"measured": u, "microbatch": v5, "per_type": per}


def section_llm_width() -> dict:
    print("6. LLM widths: the H100's level over the A100-80GB's on MosaicML's MPT benchmarks (same code, bf16, FSDP)")
    for p in fits.MPT_PAIRS:
        (mh, *_, th), (ma, *_, ta) = p[3], p[4]
        print(f"  {p[0]:5s} width {fits.MPT_WIDTH[p[0]]:5d} seq {p[1]:5d} {p[2]:2d} GPUs: MFU {mh:5.2f} / {ma:5.2f}, "
              f"tokens/s/GPU {th / ta:.2f}x; level {fits.mpt_level(p):.3f}")
    llm, k, sd, n = fits.fit_width_exponent()
    print(f"  level at widths >= {fits.WIDTH_WIDE} (one node, {n} pairs): {llm:.3f} (sd of log {sd:.1%}); "
          f"exponent on the BERT-large level {k:.3f} (shipped {WIDTH_EXPONENT})")
    print("  7B-class GPT (llama-7b, seq 2048, 8 GPUs one node, dp 8, batch 512): per-GPU throughput H100 / A100-80GB")
    ratios = {}
    for mb in (1, 2, 4):
        kw = dict(batch_size=512, seq_len=2048, dp=8, tp=1, micro_batch=mb, nodes_spanned=1)
        row = {}
        for e in ("microbatch", "per_type"):
            row[e] = (iteration_time("llama-7b", gpu="A100-80GB", efficiency=e, **kw)
                      / iteration_time("llama-7b", gpu="H100-80GB", efficiency=e, **kw))
        # the BERT-large level alone (no width rule): the H100's compute at level 0.6615 instead
        half, level = HALF_TOKENS_BY_TYPE["H100-80GB"], LEVEL_BY_TYPE["H100-80GB"]
        u = microbatch_efficiency(mb * 2048.0, DEFAULT_UTILISATION * level, half_tokens=half)
        u_w = type_efficiency(mb * 2048.0, DEFAULT_UTILISATION, "H100-80GB", get_model("llama-7b").hidden)
        t_h = iteration_time("llama-7b", gpu="H100-80GB", efficiency="per_type", **kw)
        t_c = get_model("llama-7b").flops_per_token(2048) * 512 * 2048 / (8 * 989e12)
        row["per_type, BERT-large level"] = (iteration_time("llama-7b", gpu="A100-80GB", efficiency="per_type", **kw)
                                             / (t_h + t_c / u - t_c / u_w))
        ratios[mb] = row
        print(f"    micro-batch {mb}: " + ", ".join(f"{e} {r:.2f}x" for e, r in row.items()))
    pub = [(p[1], p[3][3] / p[4][3]) for p in fits.MPT_PAIRS if p[0] == "7b"]
    print("    published (MPT-7B, 8 GPUs, tokens/s/GPU): " + ", ".join(f"seq {s} {r:.2f}x" for s, r in pub))
    return {"level_llm": llm, "exponent": k, "sd": sd, "pairs": n, "ratio_7b": ratios, "published_7b": pub}


def section_jobs() -> list:
    print("5. Iteration time (s): flat, microbatch, per_type, per_type / microbatch")
    out = []
    for label, model, batch, seq, gpu, dp, tp, pp, mb, span in JOBS:
        t = {e: iteration_time(model, batch_size=batch, seq_len=seq, gpu=gpu, dp=dp, tp=tp, pp=pp, micro_batch=mb,
                               nodes_spanned=span, efficiency=e) for e in ("flat", "microbatch", "per_type")}
        print(f"  {label:42s} {t['flat']:8.3f} {t['microbatch']:8.3f} {t['per_type']:8.3f} "
              f"{t['per_type'] / t['microbatch']:6.2f}")
        out.append({"job": label, **t})
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", help="write every number to this JSON file")
    args = parser.parse_args(argv)
    result = {"fits": section_fits(), "checks": section_checks(), "gavel": section_gavel(),
              "gpt2_3090": section_gpt2_3090(), "jobs": section_jobs(), "llm_width": section_llm_width()}
    if args.json:
        atomic_write_json(args.json, result)
    return 0


if __name__ == "__main__":
    sys.exit(main())
