"""`hlopass run FILE --inputs in.npz [-o out.npz]`: evaluate a module with the interpreter."""

from __future__ import annotations

import argparse
import io
import sys
import zipfile
from collections.abc import Sequence
from typing import Any

import numpy as np

from hlopass.errors import HloError
from hlopass.output import write_output


def run_main(argv: Sequence[str]) -> int:
    parser = argparse.ArgumentParser(
        prog="hlopass run",
        description="Evaluate an HLO module's entry computation on inputs in0..inN of an .npz.",
    )
    parser.add_argument("file", help="HLO text file ('-' for stdin)")
    parser.add_argument("--inputs", help=".npz holding in0..inN (omit for no parameters)")
    parser.add_argument("-o", "--output", help="write out0..outM to this .npz (default: print)")
    args = parser.parse_args(list(argv))
    try:
        from hlopass import evaluate, parse_hlo

        if args.file == "-":
            text, name = sys.stdin.read(), "<stdin>"
        else:
            with open(args.file) as f:
                text, name = f.read(), args.file
        module = parse_hlo(text, name)
        inputs = _load_inputs(args.inputs)
        outputs = evaluate(module, *inputs)
    except (HloError, OSError, ValueError, zipfile.BadZipFile) as e:
        message = str(e).splitlines()[0] if str(e) else type(e).__name__
        print(f"error: {message}" if not isinstance(e, HloError) else message, file=sys.stderr)
        return 1
    if args.output:
        # typed as Any: numpy's stubs would match the arrays against `allow_pickle: bool`
        arrays: dict[str, Any] = {f"out{i}": o for i, o in enumerate(outputs)}
        # to bytes first: `np.savez(path)` appends `.npz` to a path without it and replaces
        # whatever is there; `write_output` writes exactly the path given, safely
        buf = io.BytesIO()
        np.savez(buf, **arrays)
        try:
            write_output(args.output, buf.getvalue())
        except HloError as e:
            print(str(e), file=sys.stderr)
            return 1
    else:
        for i, o in enumerate(outputs):
            print(f"out{i}: {o.dtype}{list(o.shape)}")
            print(np.array2string(o, threshold=64))
    return 0


def _load_inputs(path: str | None) -> list[np.ndarray]:
    if path is None:
        return []
    with np.load(path, allow_pickle=False) as data:
        names = set(data.files)
        inputs = []
        i = 0
        while f"in{i}" in names:
            inputs.append(data[f"in{i}"])
            i += 1
        extra = sorted(
            n for n in names if n.startswith("in") and n not in {f"in{j}" for j in range(i)}
        )
        if extra:
            raise ValueError(
                f"{path}: inputs must be named in0..inN without gaps; found {extra[0]}"
            )
    return inputs
