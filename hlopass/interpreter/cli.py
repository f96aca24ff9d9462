"""`hlopass run FILE --inputs in.npz [-o out.npz]`: evaluate a module with the interpreter.

Inputs are the flattened parameters `in0..inN` of an `.npz` (`out0..outM` beside them,
reference outputs, are ignored), each with exactly the
parameter's dtype (arrays of raw bytes of the same item size, how numpy keeps bf16 and the
f8 types in an `.npz`, are read as that type). Anything else is one error line naming the
keys found and the parameters expected. `--max-iterations N` stops a `while` loop that has
not ended after N iterations (an infinite loop otherwise runs until Ctrl-C), with one line
`file:line:col: error: ...` at the loop's instruction.
"""

from __future__ import annotations

import argparse
import io
import re
import sys
import zipfile
from collections.abc import Sequence
from typing import Any

import numpy as np

from hlopass.clirun import OneLineArgumentParser, guard
from hlopass.errors import HloInputError
from hlopass.output import write_output


def run_main(argv: Sequence[str]) -> int:
    parser = OneLineArgumentParser(
        prog="hlopass run",
        description="Evaluate an HLO module's entry computation on inputs in0..inN of an .npz.",
    )
    parser.add_argument("file", help="HLO text file ('-' for stdin)")
    parser.add_argument("--inputs", help=".npz holding in0..inN (omit for no parameters)")
    parser.add_argument("-o", "--output", help="write out0..outM to this .npz (default: print)")
    parser.add_argument(
        "--max-iterations",
        type=_positive,
        metavar="N",
        help="error out of a while loop still running after N iterations (default: no limit)",
    )
    args = parser.parse_args(list(argv))
    return guard(lambda: _run(args), "<stdin>" if args.file == "-" else args.file)


def _run(args: argparse.Namespace) -> int:
    from hlopass import evaluate
    from hlopass.cli import _read, parse_input
    from hlopass.interpreter.control import IterationLimitError
    from hlopass.interpreter.core import interpreter_for

    name = "<stdin>" if args.file == "-" else args.file
    text = _read(args.file)
    module = parse_input(text, name)
    inputs = _load_inputs(args.inputs, module)
    interpreter_for(module).max_iterations = args.max_iterations
    try:
        outputs = evaluate(module, *inputs)
    except IterationLimitError as e:
        line, col = _defined_at(text, e.inst_name)
        raise HloInputError(
            f"{name}:{line}:{col}: error: {e} (--max-iterations {e.limit})"
        ) from None
    if args.output:
        # typed as Any: numpy's stubs would match the arrays against `allow_pickle: bool`
        arrays: dict[str, Any] = {f"out{i}": o for i, o in enumerate(outputs)}
        # to bytes first: `np.savez(path)` appends `.npz` to a path without it and replaces
        # whatever is there; `write_output` writes exactly the path given, safely
        buf = io.BytesIO()
        np.savez(buf, **arrays)
        write_output(args.output, buf.getvalue())  # an HloError: one line through guard
    else:
        for i, o in enumerate(outputs):
            print(f"out{i}: {o.dtype}{list(o.shape)}")
            print(np.array2string(o, threshold=64))
    return 0


def _positive(text: str) -> int:
    try:
        n = int(text)
    except ValueError:
        n = 0
    if n < 1:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {text!r}")
    return n


def _defined_at(text: str, inst_name: str) -> tuple[int, int]:
    """Line and column (1-based) of the instruction `inst_name`'s definition in `text`
    (the start of the text where it cannot be found)."""
    at = re.search(rf"^[ \t]*(?:ROOT[ \t]+)?%?({re.escape(inst_name)})[ \t]*=", text, re.M)
    if at is None:
        return 1, 1
    start = at.start(1)
    line = text.count("\n", 0, start) + 1
    return line, start - (text.rfind("\n", 0, start) + 1) + 1


_OUT_KEY = re.compile(r"out\d+")


def _load_inputs(path: str | None, module: Any) -> list[np.ndarray]:
    """The arrays `in0..inN` of the `.npz` at `path`, checked against the entry's flattened
    parameters (count and names here; shapes and dtypes in `evaluate`)."""
    from hlopass.interpreter import describe_parameters
    from hlopass.interpreter.core import interpreter_for
    from hlopass.literal import numpy_dtype

    params = interpreter_for(module).entry().parameters()
    leaves = [leaf for p in params for leaf in p.shape.leaves()]
    expected = [f"in{i}" for i in range(len(leaves))]
    if path is None:
        if leaves:
            raise HloInputError(
                f"error: the entry computation takes {describe_parameters(module)}: "
                "give them with --inputs FILE.npz"
            )
        return []
    try:
        with open(path, "rb") as f:
            is_zip = zipfile.is_zipfile(f)
    except OSError as e:
        raise HloInputError(f"{path}: error: cannot read inputs: {e.strerror}") from None
    if not is_zip:
        raise HloInputError(
            f"{path}: error: not an .npz file (a zip of .npy arrays, as numpy.savez writes)"
        )
    try:
        with np.load(path, allow_pickle=False) as data:
            found = sorted(data.files)
            # out0..outM (reference outputs, as the corpus's io.npz holds) are left alone
            if sorted(k for k in found if not _OUT_KEY.fullmatch(k)) != sorted(expected):
                raise HloInputError(
                    f"{path}: error: holds {', '.join(found) or 'no arrays'}; the entry "
                    f"computation takes {describe_parameters(module)}"
                )
            arrays = [data[k] for k in expected]
    except (ValueError, OSError, zipfile.BadZipFile, EOFError) as e:
        if isinstance(e, HloInputError):
            raise
        lines = str(e).strip().splitlines()
        raise HloInputError(
            f"{path}: error: cannot read inputs: {lines[0] if lines else type(e).__name__}"
        ) from None
    out = []
    for a, leaf in zip(arrays, leaves, strict=True):
        want = (
            numpy_dtype(leaf.element_type) if leaf.element_type not in ("token", "opaque") else None
        )
        if want is not None and a.dtype.kind == "V" and a.dtype.itemsize == want.itemsize:
            a = a.view(want)  # raw bytes: how an .npz keeps bf16 and the f8 types
        out.append(a)
    return out


if __name__ == "__main__":
    sys.exit(run_main(sys.argv[1:]))
