"""Where XLA's own pass changes a module, does ours? (algsimp, cse, constant-folding, dce)

jaxlib does not expose XLA's individual passes, but XLA-CPU's compiler dumps the module
around every pass that changed it (`--xla_dump_hlo_pass_re=.*`): a dump named
`...before_algsimp.txt` is the exact input of one run of XLA's AlgebraicSimplifier, and
that run changed the module iff the next dump of the same module is `...after_algsimp...`.
Each corpus module XLA-CPU compiles (in a child process: XLA may abort) yields such inputs
from XLA's own pipeline; our pass runs on each distinct input and we count, per pass:

    XLA changed & we changed | XLA changed & we did not | XLA kept & we changed | both kept

Our pass runs with XLA-CPU's setting where the pipeline says it: `is-layout-sensitive`
after layout assignment. XLA-CPU sets a few AlgebraicSimplifierOptions of its own (e.g. it
disables some dot rewrites), so "XLA changed" is XLA-CPU's algsimp, not the default one.

    python benchmarks/passes_vs_xla.py --max-instructions 3000
"""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import os
import re
import subprocess
import sys
import tempfile
from collections import Counter
from pathlib import Path

from hlopass.checking.corpus import corpus_root, modules
from hlopass.dialects.hlo import computations
from hlopass.errors import HloError
from hlopass.pipeline import parse_pass_pipeline
from hlopass.text.importer import parse_hlo
from hlopass.text.xdsl_io import context

OURS = {"algsimp": "algsimp", "cse": "cse", "constant_folding": "constant-folding", "dce": "dce"}
"""XLA's pass name in dump file names -> our pass."""

_CHILD = """
import sys
from hlopass.execution import oracle
oracle.compile(open(sys.argv[1]).read())
"""

_DUMP = re.compile(
    r"^module_(\d+)\.[^.]*(?:\.[^.]+)*?\.(\d{4})\.([^.]+)\.after_([^.]+)\.before_([^.]+)\.txt$"
)


def dump_inputs(text: str, timeout: float) -> list[tuple[str, str, bool, str]]:
    """(XLA pass, pipeline, changed by XLA, input text) of every run of a pass of `OURS`
    that XLA-CPU's compiler made on `text`, read back from its pass dumps."""
    with tempfile.TemporaryDirectory() as d:
        src = Path(d) / "in.hlo"
        src.write_text(text)
        dump = Path(d) / "dump"
        env = dict(os.environ, XLA_FLAGS=f"--xla_dump_to={dump} --xla_dump_hlo_pass_re=.* "
                   "--xla_dump_hlo_as_text", JAX_PLATFORMS="cpu")  # fmt: skip
        with contextlib.suppress(subprocess.TimeoutExpired):
            subprocess.run([sys.executable, "-c", _CHILD, str(src)], env=env, timeout=timeout,
                           capture_output=True, check=False)  # fmt: skip
        if not dump.is_dir():
            return []
        runs: dict[str, list[tuple[int, str, str, str, Path]]] = {}
        for p in dump.iterdir():
            m = _DUMP.match(p.name)
            if m:
                mod, n, pipe, after, before = m.groups()
                runs.setdefault(mod, []).append((int(n), pipe, after, before, p))
        out = []
        for seq in runs.values():
            seq.sort()
            for i, (_n, pipe, _after, before, p) in enumerate(seq):
                if before not in OURS:
                    continue
                nxt = seq[i + 1] if i + 1 < len(seq) else None
                changed = nxt is not None and nxt[2] == before and nxt[1] == pipe
                out.append((before, pipe, changed, p.read_text()))
        return out


def ours_changes(xla_pass: str, pipeline: str, text: str) -> bool | None:
    """Does our pass change `text`? None when we cannot read it or the pass fails."""
    spec = OURS[xla_pass]
    if xla_pass == "algsimp" and "after_layout" in pipeline:
        spec = "algsimp{is-layout-sensitive=true}"
    try:
        module = parse_hlo(text, "dump")
        (p,) = parse_pass_pipeline(spec)
        return bool(p.run(context(), module))  # type: ignore[attr-defined]
    except (HloError, Exception):  # noqa: BLE001 - counted, not fatal
        return None


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--max-instructions", type=int, default=3000, help="skip larger modules")
    ap.add_argument("--timeout", type=float, default=120, help="seconds per XLA compile")
    ap.add_argument("--groups", default="jax,xla_tests,seeds", help="corpus groups")
    ap.add_argument("--save-missed", type=Path, help="write inputs XLA changed and we kept here")
    args = ap.parse_args()
    root = corpus_root()
    if root is None:
        print("error: the corpus (../shared/corpus or $HLOPASS_CORPUS) is not present")
        return 1
    table: dict[str, Counter] = {p: Counter() for p in OURS}
    missed: dict[str, Counter] = {p: Counter() for p in OURS}
    seen: set[str] = set()
    compiled = 0
    for cm in modules(root, tuple(args.groups.split(","))):
        try:
            n = sum(1 for c in computations(parse_hlo(cm.text, cm.id)) for _ in c.instructions)
        except HloError:
            continue
        if n > args.max_instructions or "ENTRY" not in cm.text:
            continue
        runs = dump_inputs(cm.text, args.timeout)
        compiled += bool(runs)
        for xla_pass, pipe, xla_changed, text in runs:
            key = hashlib.sha1(f"{xla_pass}{pipe}{text}".encode()).hexdigest()
            if key in seen:
                continue
            seen.add(key)
            ours = ours_changes(xla_pass, pipe, text)
            cell = "unread" if ours is None else f"xla {'changed' if xla_changed else 'kept'}"
            cell += "" if ours is None else f", ours {'changed' if ours else 'kept'}"
            table[xla_pass][cell] += 1
            if xla_changed and ours is False:
                missed[xla_pass][cm.id] += 1
                if args.save_missed:
                    args.save_missed.mkdir(parents=True, exist_ok=True)
                    (args.save_missed / f"{xla_pass}_{key[:12]}.hlo").write_text(text)
    print(f"{compiled} corpus modules compiled by XLA-CPU with pass dumps "
          f"(<= {args.max_instructions} instructions); distinct pass inputs:\n")  # fmt: skip
    cells = ("xla changed, ours changed", "xla changed, ours kept",
             "xla kept, ours changed", "xla kept, ours kept", "unread")  # fmt: skip
    print(f"{'pass':18}" + "".join(f"{c:>28}" for c in cells) + f"{'ours/xla changed':>18}")
    for p, t in table.items():
        xla_changed = t[cells[0]] + t[cells[1]]
        share = f"{t[cells[0]]}/{xla_changed}" if xla_changed else "-"
        print(f"{OURS[p]:18}" + "".join(f"{t[c]:>28}" for c in cells) + f"{share:>18}")
    for p, m in missed.items():
        if m:
            print(f"\n{OURS[p]}: XLA changed, ours kept (inputs per corpus module): "
                  + ", ".join(f"{k} ({v})" for k, v in m.most_common(12)))  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())
