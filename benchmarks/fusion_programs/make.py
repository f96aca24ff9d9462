"""Programs the fusion pipeline was not written against (issue 32's "tried as a new user
would"), in the corpus's folder format, so `benchmarks/fusion_vs_xla.py --unseen` holds our
plan to XLA's H100 plan on them too.

    cd benchmarks/fusion_programs
    JAX_PLATFORMS=cpu python make.py .                       # CPU part (project venv)
    JAX_SKIP_CUDA_CONSTRAINTS_CHECK=1 JAX_PLATFORMS=cpu \
        /tmp/cudavenv/bin/python make.py . --gpu-spec ../../../shared/gpu_specs/h100_sxm.txtpb

Per program `NAME/`: `before_optimizations.hlo` (what JAX hands XLA), `io.npz` (`in{k}`,
`out{k}`: the flattened inputs and XLA:CPU's outputs), `xla_h100_optimized.hlo` (XLA's GPU
pipeline for one H100 SXM, compiled without a GPU through jax's topologies API; needs the
CUDA plugin, kept in a separate venv so the project's stays CPU-only) and `meta.json`.

- `moe_gate`: a mixture-of-experts router. Two projections of the same tokens (gate logits
  and a noise scale: XLA's dot merger makes one GEMM of them), the top-2 experts per token
  (TopK), their softmax weights, and the dispatch einsum of the tokens into the experts.
  The top-2 indices are an integer output held exactly: with these inputs the smallest gap
  between a token's 2nd and 3rd score is 2.2e-4 (1.3e-3 between 1st and 2nd), over a
  hundred times what a different f32 summation order (another host's XLA:CPU, our
  interpreter) can move a score of magnitude <= 4.2 summed over 256 terms.
- `argsort_iota`: an argsort, i.e. a sort of (keys, iota): XLA fuses the iota into the sort.
- `layer_norm_matmul`: a layer norm feeding a bf16 matmul with a bias-and-gelu epilogue.
"""

from __future__ import annotations

import argparse
import json
import os
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np


def moe_gate(x, w_gate, w_noise, w_expert):
    logits = x @ w_gate
    noise = jax.nn.softplus(x @ w_noise)
    scores = logits + noise
    top, idx = jax.lax.top_k(scores, 2)
    weights = jax.nn.softmax(top, axis=-1)
    onehot = jax.nn.one_hot(idx, w_gate.shape[1], dtype=x.dtype)  # [tokens, 2, experts]
    dispatch = jnp.einsum("tk,tke->te", weights, onehot)
    expert_in = jnp.einsum("te,td->ed", dispatch, x)
    return expert_in @ w_expert, idx


def argsort_iota(keys):
    return jnp.argsort(keys, axis=-1)


def layer_norm_matmul(x, g, b, w, bias):
    mu = x.mean(-1, keepdims=True)
    var = ((x - mu) ** 2).mean(-1, keepdims=True)
    h = ((x - mu) * jax.lax.rsqrt(var + 1e-5) * g + b).astype(jnp.bfloat16)
    y = (h @ w.astype(jnp.bfloat16)).astype(jnp.float32) + bias
    return jax.nn.gelu(y)


def _inputs(name: str, rng: np.random.Generator) -> tuple:
    f32 = np.float32
    if name == "moe_gate":
        return (rng.standard_normal((256, 256)).astype(f32),
                (rng.standard_normal((256, 8)) * 0.05).astype(f32),
                (rng.standard_normal((256, 8)) * 0.05).astype(f32),
                (rng.standard_normal((256, 256)) * 0.05).astype(f32))  # fmt: skip
    if name == "argsort_iota":
        return (rng.standard_normal((64, 512)).astype(f32),)
    return (rng.standard_normal((256, 256)).astype(f32), np.ones(256, f32),
            np.zeros(256, f32), (rng.standard_normal((256, 1024)) * 0.06).astype(f32),
            np.zeros(1024, f32))  # fmt: skip


PROGRAMS = {"moe_gate": moe_gate, "argsort_iota": argsort_iota,
            "layer_norm_matmul": layer_norm_matmul}  # fmt: skip


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("out")
    ap.add_argument("--gpu-spec", help="also compile for one GPU of this XLA device description")
    ap.add_argument("--only", default="")
    a = ap.parse_args()
    names = [n for n in PROGRAMS if not a.only or n in a.only.split(",")]
    for name in names:
        d = Path(a.out) / name
        d.mkdir(parents=True, exist_ok=True)
        fn = jax.jit(PROGRAMS[name])
        args = _inputs(name, np.random.default_rng(0))
        if a.gpu_spec:
            from jax.experimental import topologies

            topo = topologies.get_topology_desc(
                "h100", "cuda", target_config=Path(a.gpu_spec).read_text(), topology="1x1x1"
            )
            dev = topo.devices[0]
            sharding = jax.sharding.SingleDeviceSharding(dev)
            specs = [jax.ShapeDtypeStruct(x.shape, x.dtype, sharding=sharding) for x in args]
            text = jax.jit(PROGRAMS[name]).lower(*specs).compile().as_text()
            (d / "xla_h100_optimized.hlo").write_text(str(text))
            meta = json.loads((d / "meta.json").read_text()) if (d / "meta.json").exists() else {}
            meta["h100"] = os.path.basename(a.gpu_spec)
            (d / "meta.json").write_text(json.dumps(meta, indent=1) + "\n")
            continue
        (d / "before_optimizations.hlo").write_text(str(fn.lower(*args).as_text(dialect="hlo")))
        outs = jax.tree.leaves(fn(*args))
        arrays = {f"in{i}": np.asarray(x) for i, x in enumerate(args)}
        arrays |= {f"out{i}": np.asarray(o) for i, o in enumerate(outs)}
        np.savez(d / "io.npz", **arrays)  # type: ignore[arg-type]
        meta = {"jax": jax.__version__, "inputs": [list(x.shape) for x in args]}
        (d / "meta.json").write_text(json.dumps(meta, indent=1) + "\n")
        print(name, "ok")


if __name__ == "__main__":
    main()
