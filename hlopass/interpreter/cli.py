"""`hlopass run FILE --inputs in.npz [-o out.npz]`: evaluate a module with the interpreter.

Inputs are the flattened parameters `in0..inN` of an `.npz` (`out0..outM` beside them,
reference outputs, are ignored), each with exactly the
parameter's dtype (arrays of raw bytes of the same item size, how numpy keeps bf16 and the
f8 types in an `.npz`, are read as that type). Anything else is one error line naming the
keys found and the parameters expected. `--max-iterations N` stops a `while` loop that has
not ended after N iterations (an infinite loop otherwise runs until Ctrl-C), with one line
`file:line:col: error: ...` at the loop's instruction.

`--random-inputs [SEED]` draws the inputs instead (`hlopass.execution.inputs.random_inputs`: exactly
each parameter's shape and dtype, the same arrays for the same seed) and `--save-inputs
PATH` writes the inputs used as an `.npz` that `--inputs` reads back, so a run can be
repeated, or repeated on XLA. `--devices N [--partitions P]` runs the module on N simulated devices
(N / P replicas of P partitions; P defaults to the module's `num_partitions`), each on
the same inputs (`replica-id` and `partition-id` tell them apart); the outputs are printed
per device, or written as `d0_out0..` to the `-o` file. A module whose run needs a constant printed elided
(`constant({...})`, XLA's default for large constants) is refused right after parsing,
with one line at the constant: its values are not in the text.
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

from hlopass.commands.clirun import OneLineArgumentParser, guard, whole_number
from hlopass.commands.output import write_output
from hlopass.errors import HloInputError


def run_main(argv: Sequence[str]) -> int:
    parser = OneLineArgumentParser(
        prog="hlopass run",
        description="Evaluate an HLO module's entry computation on inputs in0..inN of an .npz.",
    )
    parser.add_argument("file", help="HLO text file ('-' for stdin)")
    given = parser.add_mutually_exclusive_group()
    given.add_argument("--inputs", help=".npz holding in0..inN (omit for no parameters)")
    given.add_argument(
        "--random-inputs",
        type=whole_number("a seed (an integer >= 0)"),
        nargs="?",
        const=0,
        metavar="SEED",
        help="draw seeded random inputs of each parameter's shape and dtype (seed 0 if none)",
    )
    parser.add_argument(
        "--save-inputs",
        metavar="PATH",
        help="write the inputs used to this .npz (in0..inN, as --inputs reads them)",
    )
    parser.add_argument("-o", "--output", help="write out0..outM to this .npz (default: print)")
    parser.add_argument(
        "--max-iterations",
        type=_positive,
        metavar="N",
        help="error out of a while loop still running after N iterations (default: no limit)",
    )
    parser.add_argument(
        "--devices",
        type=_positive,
        default=1,
        metavar="N",
        help="run on N devices (replicas x partitions), every one on the same inputs",
    )
    parser.add_argument(
        "--partitions",
        type=_positive,
        metavar="P",
        help="partitions per replica of the N devices (default: the module's num_partitions)",
    )
    args = parser.parse_args(list(argv))
    return guard(lambda: _run(args), "<stdin>" if args.file == "-" else args.file)


def _run(args: argparse.Namespace) -> int:
    from hlopass import evaluate
    from hlopass.commands.cli import parse_input, read_input
    from hlopass.interpreter.control import IterationLimitError
    from hlopass.interpreter.core import flatten, interpreter_for

    name = "<stdin>" if args.file == "-" else args.file
    text = read_input(args.file)
    module = parse_input(text, name)
    _refuse_elided(module, text, name)  # before any input is read or instruction run
    if args.random_inputs is not None:
        from hlopass.execution.inputs import random_inputs

        inputs = [leaf for a in random_inputs(module, args.random_inputs) for leaf in flatten(a)]
    else:
        inputs = _load_inputs(args.inputs, module)
    if args.save_inputs:
        _write_npz(args.save_inputs, "in", inputs)
    interpreter_for(module).max_iterations = args.max_iterations
    replicas, partitions = _device_grid(args, module, name)
    try:
        outputs = evaluate(module, *inputs, replicas=replicas, partitions=partitions)
    except IterationLimitError as e:
        line, col = _defined_at(text, e.inst_name)
        raise HloInputError(
            f"{name}:{line}:{col}: error: {e} (--max-iterations {e.limit})"
        ) from None
    if replicas * partitions == 1:
        _show(args.output, "", [outputs])
    else:
        _show(args.output, "d", outputs, partitions)  # type: ignore[arg-type]
    return 0


def _device_grid(args: argparse.Namespace, module: Any, name: str) -> tuple[int, int]:
    """(replicas, partitions) for --devices N [--partitions P]."""
    partitions = args.partitions
    if partitions is None:
        attr = module.attributes.get("hlo.num_partitions")
        text = str(getattr(attr, "text", None) or attr or 1)
        declared = int(re.sub(r"\D", "", text) or 1)
        partitions = declared if args.devices % declared == 0 else 1
    if args.devices % partitions:
        raise HloInputError(
            f"{name}: error: --devices {args.devices} is not a multiple of --partitions "
            f"{partitions}"
        )
    return args.devices // partitions, partitions


def _show(path: str | None, prefix: str, per_device: list, partitions: int = 1) -> None:
    """Each device's outputs: to `path` as `{prefix}{d}_out{k}` (`out{k}` for one device),
    or printed, under a heading per device when there are several."""
    if path:
        named = {}
        for d, outs in enumerate(per_device):
            for k, o in enumerate(outs):
                named[f"{prefix}{d}_out{k}" if prefix else f"out{k}"] = o
        _write_named_npz(path, named)
        return
    for d, outs in enumerate(per_device):
        if prefix:
            print(f"device {d} (replica {d // partitions}, partition {d % partitions}):")
        for i, o in enumerate(outs):
            print(f"out{i}: {o.dtype}{list(o.shape)}")
            print(np.array2string(o, threshold=64))


def _write_npz(path: str, prefix: str, arrays: Sequence[np.ndarray]) -> None:
    """`arrays` as `{prefix}0..` of an `.npz` at exactly `path` (bf16 and the f8 types go
    in as raw bytes of their item size, which `_load_inputs` reads back as the type)."""
    _write_named_npz(path, {f"{prefix}{i}": a for i, a in enumerate(arrays)})


def _write_named_npz(path: str, arrays: dict[str, np.ndarray]) -> None:
    # typed as Any: numpy's stubs would match the arrays against `allow_pickle: bool`
    named: dict[str, Any] = {k: np.asarray(a) for k, a in arrays.items()}
    # to bytes first: `np.savez(path)` appends `.npz` to a path without it and replaces
    # whatever is there; `write_output` writes exactly the path given, safely
    buf = io.BytesIO()
    np.savez(buf, **named)
    write_output(path, buf.getvalue())  # an HloError: one line through guard


def _refuse_elided(module: Any, text: str, name: str) -> None:
    """One located line for a constant the run needs whose value the text elides."""
    from hlopass.interpreter import elided_constant, elided_message

    found = elided_constant(module)
    if found is None:
        return
    line, col = _defined_at(text, found[1].inst_name, "{...}")
    raise HloInputError(f"{name}:{line}:{col}: error: {elided_message(*found)}")


def _positive(text: str) -> int:
    try:
        n = int(text)
    except ValueError:
        n = 0
    if n < 1:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {text!r}")
    return n


def _defined_at(text: str, inst_name: str, part: str = "") -> tuple[int, int]:
    """Line and column (1-based) of the instruction `inst_name`'s definition in `text`, or
    of `part` within it where the definition's line holds it (the start of the text where
    the definition cannot be found)."""
    definition = rf"^[ \t]*(?:ROOT[ \t]+)?%?({re.escape(inst_name)})[ \t]*=[^\n]*"
    at = None
    for m in re.finditer(definition, text, re.M):  # names may repeat across computations
        at = at or m
        if part and part in m.group(0):
            at = m
            break
    if at is None:
        return 1, 1
    start = at.start(1)
    if part and part in at.group(0):
        start = at.start() + at.group(0).index(part)
    line = text.count("\n", 0, start) + 1
    return line, start - (text.rfind("\n", 0, start) + 1) + 1


_OUT_KEY = re.compile(r"out\d+")


def _load_inputs(path: str | None, module: Any) -> list[np.ndarray]:
    """The arrays `in0..inN` of the `.npz` at `path`, checked against the entry's flattened
    parameters (count and names here; shapes and dtypes in `evaluate`)."""
    from hlopass.interpreter import describe_parameters
    from hlopass.interpreter.core import interpreter_for
    from hlopass.ir.literal import numpy_dtype

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
