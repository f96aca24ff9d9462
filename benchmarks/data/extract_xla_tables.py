"""Extract XLA's measured GPU tables into small CSVs next to this script.

Reads (from the XLA mirror, a bare git dir, default /work/.mirror/ROCm+xla/repo, ref `main`):
* `xla/service/gpu/model/default_matmul_perf_table.txtpb` (a `GemmPerfTable` text proto written
  by `xla/tools/matmul_perf_table_gen`): per GPU key, entries b, m, n, k with one `flops` value
  per "lhs x rhs -> out" type key.  The generator compiled `out[b,m,n] = dot(lhs[b,m,k],
  rhs[b,k,n])` with XLA's full GPU pipeline, ran it once to warm up, then 5 times, and stored
  flops = 2*b*m*n*k * 1e9 / median_kernel_time_ns (integer ns).  We write time_ns =
  2*b*m*n*k * 1e9 / flops (rounded), the measured kernel time.
  -> `matmul_perf_<gpu>.csv`, columns b,m,n,k,lhs_type,rhs_type,out_type,time_ns
  (the generator's own time was integer ns, so time_ns recovers it exactly).
* `xla/service/gpu/model/hlo_op_profiles_data.h` (output of `hlo_op_profiler_run`): per GPU
  key, (opcode, element type) -> clock_cycles per element.
  -> `hlo_op_profiles.csv`, columns gpu,device_name,opcode,type,cycles.

Usage: python benchmarks/data/extract_xla_tables.py [--mirror DIR] [--ref REF]
"""

from __future__ import annotations

import argparse
import re
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
MATMUL = "xla/service/gpu/model/default_matmul_perf_table.txtpb"
PROFILES = "xla/service/gpu/model/hlo_op_profiles_data.h"


def git_show(mirror: str, ref: str, path: str) -> str:
    out = subprocess.run(["git", "-C", mirror, "show", f"{ref}:{path}"], capture_output=True,
                         text=True, check=False)  # fmt: skip
    if out.returncode:
        sys.exit(f"error: cannot read {path} at {ref} in {mirror}: {out.stderr.strip()}")
    return out.stdout


def commit_of(mirror: str, ref: str) -> str:
    out = subprocess.run(["git", "-C", mirror, "rev-parse", ref], capture_output=True, text=True)
    return out.stdout.strip()


def parse_matmul(text: str) -> dict[str, list[tuple]]:
    """{gpu key: [(b, m, n, k, lhs, rhs, out, time_ns)]} from the GemmPerfTable text."""
    rows: dict[str, list[tuple]] = {}
    gpu = None
    dims: dict[str, int] = {}
    for line in text.splitlines():
        s = line.strip()
        if m := re.fullmatch(r'key: "([^"]+)"', s):
            gpu = m.group(1)
            rows[gpu] = []
        elif m := re.fullmatch(r"([bmnk]): (\d+)", s):
            dims[m.group(1)] = int(m.group(2))
        elif m := re.fullmatch(r'flops \{ key: "(\w+)x(\w+)->(\w+)" value: (\d+) \}', s):
            b, mm, n, k = dims["b"], dims["m"], dims["n"], dims["k"]
            flops = int(m.group(4))
            t = round(2 * b * mm * n * k * 1e9 / flops)
            rows[gpu].append((b, mm, n, k, m.group(1), m.group(2), m.group(3), t))
    return rows


def parse_profiles(text: str) -> list[tuple]:
    """[(gpu key, device name comment, opcode, type, cycles)] from the op-profile header."""
    out = []
    gpu = name = opcode = None
    for line in text.splitlines():
        s = line.strip()
        if m := re.fullmatch(r'key: "([^"]+)"\s*(?:#\s*"([^"]*)")?', s):
            gpu, name = m.group(1), m.group(2) or ""
        elif m := re.fullmatch(r'opcode: "([^"]+)"', s):
            opcode = m.group(1)
        elif m := re.fullmatch(r"shape \{ element_type: (\w+) \}", s):
            etype = m.group(1).lower()
        elif m := re.fullmatch(r"clock_cycles: (\d+)", s):
            out.append((gpu, name, opcode, etype, int(m.group(1))))
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--mirror", default="/work/.mirror/ROCm+xla/repo")
    ap.add_argument("--ref", default="main")
    a = ap.parse_args()
    commit = commit_of(a.mirror, a.ref)
    for gpu, rows in parse_matmul(git_show(a.mirror, a.ref, MATMUL)).items():
        path = HERE / f"matmul_perf_{gpu}.csv"
        with path.open("w") as f:
            f.write(f"# openxla/xla {MATMUL} @ {commit}, key {gpu!r}; measured by "
                    "xla/tools/matmul_perf_table_gen; time_ns = 2*b*m*n*k*1e9/flops\n")  # fmt: skip
            f.write("b,m,n,k,lhs_type,rhs_type,out_type,time_ns\n")
            for r in rows:
                f.write(",".join(map(str, r)) + "\n")
        print(f"{path.name}: {len(rows)} rows")
    prof = parse_profiles(git_show(a.mirror, a.ref, PROFILES))
    path = HERE / "hlo_op_profiles.csv"
    with path.open("w") as f:
        f.write(f"# openxla/xla {PROFILES} @ {commit}; measured by "
                "xla/service/gpu/model:hlo_op_profiler_run; cycles = clock_cycles per element\n")  # fmt: skip
        f.write("gpu,device_name,opcode,type,cycles\n")
        for r in prof:
            f.write(",".join(map(str, r)) + "\n")
    print(f"{path.name}: {len(prof)} rows")


if __name__ == "__main__":
    main()
