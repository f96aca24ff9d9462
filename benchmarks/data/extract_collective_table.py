"""Turn XLA's measured collective table into one compact CSV per GPU key.

Source: openxla/xla `xla/service/gpu/model/default_collective_perf_table.txtpb`, written by
`xla/tools/collective_perf_table_gen`. What each entry ran (read from the generator):

* one collective with `use_global_device_ids` over `num_replica_groups x
  num_devices_per_group` devices (iota replica groups); collective-permute with explicit
  source/target pairs inside a 100-trip while loop (the table stores one trip's time);
* a 1-D (all-gather also 2-D) f32/bf16 buffer of `tensor_size_bytes`: the full buffer of an
  all-reduce, all-to-all and collective-permute, the gathered output of an all-gather, the
  input of a reduce-scatter (its output is that divided by the group size);
* the median of 20 runs; throughput = tensor_size_bytes / runtime, so
  time = bytes / network_throughput_bytes_per_sec. The stored instruction shape is the
  output shape; `bytes` below is the tensor size the generator measured (XLA's
  `GpuHloCostAnalysis` "bytes transferred": the larger of input and output).

    python benchmarks/data/extract_collective_table.py [TABLE.txtpb]

With no argument the table is read from the XLA mirror (`git show main:...`).
"""

from __future__ import annotations

import csv
import re
import subprocess
import sys
from pathlib import Path

TABLE = "xla/service/gpu/model/default_collective_perf_table.txtpb"
MIRROR = "/work/.mirror/ROCm+xla/repo"
OUT = Path(__file__).resolve().parent
DTYPE_BYTES = {"F32": 4, "BF16": 2, "F16": 2, "F8E4M3FN": 1, "F8E5M2": 1, "S4": 0.5, "U4": 0.5}
COLUMNS = ("opcode", "dtype", "elements", "bytes", "group_size", "num_groups", "devices",
           "pattern", "time_us")  # fmt: skip
_TOKEN = re.compile(
    r'\s*(?:(#[^\n]*)|([A-Za-z_][A-Za-z0-9_]*)\s*(:)?\s*(\{)?|(\})|("[^"]*"|[^\s{}]+))'
)


def parse_textproto(text: str) -> dict:
    """A text-format protobuf as nested dicts; every field maps to a list of its values."""
    stack: list[dict] = [{}]
    pending: str | None = None
    for m in _TOKEN.finditer(text):
        comment, name, _colon, brace, close, value = m.groups()
        if comment:
            continue
        if close:
            stack.pop()
        elif name and brace:
            child: dict = {}
            stack[-1].setdefault(name, []).append(child)
            stack.append(child)
        elif name and pending is None:
            pending = name
        elif name or value:
            raw = value if value is not None else name
            stack[-1].setdefault(pending, []).append(raw.strip('"'))
            pending = None
    return stack[0]


def _one(d: dict, key: str, default=None):
    v = d.get(key)
    return v[0] if v else default


def permute_pattern(pairs: list[tuple[int, int]], n: int) -> str:
    """The generator's three collective-permute patterns, told apart by their pairs."""
    s = set(pairs)
    if all((t, src) in s for src, t in s):
        return "two_way_mutual"
    if all(t == (src + 1) % n for src, t in s):
        return "ring"
    if all(t == src + n // 2 for src, t in s):
        return "one_way"
    return "other"


def entry_row(e: dict) -> dict:
    ins = _one(e, "instruction")
    shape = _one(ins, "shape")
    dtype = _one(shape, "element_type")
    elems = 1
    for d in shape.get("dimensions", []):
        elems *= int(d)
    opcode = _one(ins, "opcode")
    iota = _one(ins, "iota_collective_device_list")
    pattern = ""
    if iota is not None:
        groups = int(_one(iota, "num_replica_groups"))
        size = int(_one(iota, "num_devices_per_group"))
        devices = groups * size
    else:
        pairs = [(int(_one(p, "source", 0)), int(_one(p, "target", 0)))
                 for p in ins.get("source_target_pairs", [])]  # fmt: skip
        devices = max(max(p) for p in pairs) + 1
        groups, size = len(pairs), 2
        pattern = permute_pattern(pairs, devices)
    out_bytes = elems * DTYPE_BYTES[dtype]
    nbytes = out_bytes * size if opcode == "reduce-scatter" else out_bytes
    thr = float(_one(e, "network_throughput_bytes_per_sec", 0))
    if thr <= 0:  # a few entries carry no measurement: nothing to compare with
        return {}
    return {"opcode": opcode, "dtype": dtype.lower(), "elements": elems, "bytes": int(nbytes),
            "group_size": size, "num_groups": groups, "devices": devices, "pattern": pattern,
            "time_us": f"{nbytes / thr * 1e6:.6g}"}  # fmt: skip


def main(argv: list[str]) -> int:
    if argv:
        text = Path(argv[0]).read_text()
    else:
        text = subprocess.run(["git", "-C", MIRROR, "show", f"main:{TABLE}"], check=True,
                              capture_output=True, text=True).stdout  # fmt: skip
    root = parse_textproto(text)
    for gpu in root.get("entries", []):
        key = _one(gpu, "key")
        rows = [r for e in _one(gpu, "value").get("entries", []) if (r := entry_row(e))]
        rows.sort(key=lambda r: (r["opcode"], r["pattern"], r["dtype"], r["devices"],
                                 r["group_size"], r["bytes"]))  # fmt: skip
        path = OUT / f"collective_perf_{key}.csv"
        with path.open("w", newline="") as f:
            f.write(
                f"# source: openxla/xla {TABLE} (key {key}); time_us = bytes / "
                "network_throughput_bytes_per_sec; see extract_collective_table.py\n"
            )
            w = csv.DictWriter(f, COLUMNS)
            w.writeheader()
            w.writerows(rows)
        print(f"{path.name}: {len(rows)} entries")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
