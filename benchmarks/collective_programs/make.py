"""Write each program of `programs.py` as HLO: what JAX hands XLA, the per-device module,
the inputs and outputs of every device, and XLA's own compilation for 8 H100s.

    cd benchmarks/collective_programs
    XLA_FLAGS=--xla_force_host_platform_device_count=8 JAX_PLATFORMS=cpu \
        python make.py . [--only NAME,...]                      # CPU part (project venv)
    JAX_SKIP_CUDA_CONSTRAINTS_CHECK=1 XLA_FLAGS=--xla_force_host_platform_device_count=8 \
        JAX_PLATFORMS=cpu /tmp/cudavenv/bin/python make.py . \
        --gpu-spec ../../../shared/gpu_specs/h100_sxm.txtpb     # adds the H100 column

The H100 column needs the CUDA plugin (`pip install "jax[cuda12]==<the project's jax>"`, a
separate venv so the project's stays CPU-only) but no GPU: jax's topologies API builds 8
H100 SXM devices (one host, `1x1x8`) from XLA's device description and compiles for them.

Per program `NAME/`:
- `before_optimizations.hlo`: `jit(shard_map(...)).lower(...).as_text(dialect="hlo")`, the
  SPMD module (Shardy custom calls around the manual computation).
- `per_device.hlo`: what every device runs: the manual computation body as the entry of a
  module with `replica_count=8`: with one partition a device's global id is its replica
  id, so `partition-id` becomes `replica-id` and the collectives lose their channel ids and
  `use_global_device_ids` (cross-replica groups of the same devices). This is the input of our passes and of the 8-device interpreter.
- `io.npz`: `d{r}_in{k}` / `d{r}_out{k}`: device r's k-th flattened input / output of the
  SPMD program as jax ran it on 8 host devices of the machine that made it. XLA:CPU's float
  results depend on the host's instruction set, so the tests rerun the programs with
  `--io-only` on their own host before holding the per-device module to them.
- `xla_h100_optimized.hlo`: XLA's GPU pipeline for 8 H100s: XLA's collective decisions.
- `meta.json`: jax version, shapes, whether the H100 compilation succeeded.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
from pathlib import Path
from typing import Any

import jax
import numpy as np
from jax.sharding import Mesh, NamedSharding

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from programs import AXIS, DEVICES, PROGRAMS  # noqa: E402

_BODY_CALL = re.compile(r"to_apply=(xla\.sdy\.manual_computation_body[\w.]*)")
# With one partition a global device id is the replica id, so each collective keeps its
# groups as cross-replica groups: no channel id (with one, a collective-permute or
# all-to-all would run across partitions, and XLA:CPU's StableHLO path fails to compile an
# all-reduce carrying one in a replicated module: "layout minor_to_major field contains 2
# elements, but shape has 1 dimensions") and no use_global_device_ids.
_CHANNEL = re.compile(r", channel_id=\d+|, use_global_device_ids=true")


def per_device_module(spmd: str, name: str) -> str:
    """The manual computation body of `spmd` as the entry of an 8-replica module."""
    bodies = set(_BODY_CALL.findall(spmd))
    if len(bodies) != 1:
        raise ValueError(f"{name}: expected one manual computation, found {sorted(bodies)}")
    (body,) = bodies
    comps = [c.strip("\n") for c in spmd.split("\n", 1)[1].split("\n\n") if c.strip()]
    kept = []
    for c in comps:
        if c.startswith("ENTRY "):
            continue  # the SPMD wrapper: global-to-local shape, the call, local-to-global
        if c.startswith(body + " "):
            c = "ENTRY " + c
        kept.append(c)
    text = "\n\n".join(kept)
    # the device index is the partition id in the SPMD module, the replica id here
    text = text.replace(" partition-id()", " replica-id()")
    text = _CHANNEL.sub("", text)
    return f"HloModule {name}, replica_count={DEVICES}\n\n" + text + "\n"


def _step(fn, in_specs, out_specs, mesh):
    # check_vma off: jax cannot infer that an all-gather of each device's own shard is
    # replicated (zero_step); io.npz keeps every device's outputs, so nothing is assumed
    return jax.jit(
        jax.shard_map(fn, mesh=mesh, in_specs=in_specs, out_specs=out_specs, check_vma=False)
    )


def _per_device(values, devices) -> list[list[np.ndarray]]:
    """Each device's block of every flattened array (the whole array where replicated)."""
    leaves = jax.tree.leaves(values)
    out: list[list[np.ndarray]] = [[] for _ in devices]
    for v in leaves:
        by_dev = {s.device: np.asarray(s.data) for s in v.addressable_shards}
        for r, d in enumerate(devices):
            out[r].append(by_dev[d])
    return out


def run_spmd(name: str) -> tuple[str, list[list[np.ndarray]], list[list[np.ndarray]]]:
    """The SPMD module's text and every device's inputs and outputs as jax runs it here."""
    fn, args, in_specs, out_specs = PROGRAMS[name](np.random.default_rng(len(name)))
    devices = jax.devices("cpu")[:DEVICES]
    mesh = Mesh(np.array(devices), (AXIS,))
    f = _step(fn, in_specs, out_specs, mesh)
    placed = _place(args, in_specs, mesh)
    spmd = f.lower(*placed).as_text(dialect="hlo")
    outs = f(*placed)
    return spmd, _per_device(placed, devices), _per_device(outs, devices)


def write_io(d: str, ins_d: list[list[np.ndarray]], outs_d: list[list[np.ndarray]]) -> None:
    arrays: dict[str, Any] = {
        f"d{r}_in{k}": a for r, per in enumerate(ins_d) for k, a in enumerate(per)
    }
    arrays |= {f"d{r}_out{k}": a for r, per in enumerate(outs_d) for k, a in enumerate(per)}
    np.savez(os.path.join(d, "io.npz"), **arrays)


def write_cpu(name: str, d: str) -> dict:
    spmd, ins_d, outs_d = run_spmd(name)
    Path(d, "before_optimizations.hlo").write_text(spmd)
    Path(d, "per_device.hlo").write_text(per_device_module(spmd, name))
    write_io(d, ins_d, outs_d)
    return {"name": name, "jax": jax.__version__, "devices": DEVICES,
            "inputs": len(ins_d[0]), "outputs": len(outs_d[0])}  # fmt: skip


def _place(args, in_specs, mesh):
    """Each argument tree on the mesh with its spec (one spec per top-level argument)."""
    return tuple(
        jax.tree.map(lambda a, s=spec: jax.device_put(a, NamedSharding(mesh, s)), arg)
        for arg, spec in zip(args, in_specs, strict=True)
    )


def write_h100(name: str, d: str, spec_path: str) -> None:
    from jax.experimental import topologies

    topo = topologies.get_topology_desc(
        "h100x8", "cuda", target_config=Path(spec_path).read_text(), topology=f"1x1x{DEVICES}"
    )
    fn, args, in_specs, out_specs = PROGRAMS[name](np.random.default_rng(len(name)))
    mesh = Mesh(np.array(topo.devices[:DEVICES]), (AXIS,))
    specs = tuple(
        jax.tree.map(lambda a, s=spec: jax.ShapeDtypeStruct(np.shape(a), np.asarray(a).dtype,
                                                            sharding=NamedSharding(mesh, s)), arg)
        for arg, spec in zip(args, in_specs, strict=True)
    )  # fmt: skip
    text = _step(fn, in_specs, out_specs, mesh).lower(*specs).compile().as_text()
    if text is None:
        raise SystemExit(f"{name}: XLA returned no text for the H100 compilation")
    Path(d, "xla_h100_optimized.hlo").write_text(text)


def main() -> None:
    ap = argparse.ArgumentParser(description=(__doc__ or "").split("\n")[0])
    ap.add_argument("out")
    ap.add_argument("--only", help="comma-separated program names")
    ap.add_argument("--gpu-spec", help="XLA device description: compile for 8 of these GPUs")
    ap.add_argument(
        "--io-only",
        action="store_true",
        help="write only NAME/io.npz, as jax runs the programs on this host "
        "(XLA:CPU's float results depend on the host's instruction set)",
    )
    a = ap.parse_args()
    names = a.only.split(",") if a.only else list(PROGRAMS)
    for name in names:
        d = os.path.join(a.out, name)
        os.makedirs(d, exist_ok=True)
        if a.io_only:
            _, ins_d, outs_d = run_spmd(name)
            write_io(d, ins_d, outs_d)
            continue
        meta_path = os.path.join(d, "meta.json")
        if a.gpu_spec:
            meta = (
                json.loads(Path(meta_path).read_text())
                if os.path.exists(meta_path)
                else {"name": name}
            )
            write_h100(name, d, a.gpu_spec)
            meta["h100"] = os.path.basename(a.gpu_spec)
        else:
            meta = write_cpu(name, d)
        Path(meta_path).write_text(json.dumps(meta, indent=1))
        print(name, "ok", file=sys.stderr)


if __name__ == "__main__":
    main()
