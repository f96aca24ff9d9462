"""Child process: run HLO modules on XLA:CPU (jaxlib), one JSON line per module.

XLA may abort the process (a C++ CHECK failure) on some inputs, so the parent
(`tests.interp_util.xla_execute_many`) runs this in a child and restarts it after the
module that killed it. argv[1]: a JSON manifest `[{"hlo": path, "inputs": npz,
"outputs": npz}, ...]`; argv[2]: the index to start at. Inputs are `in0..inN`; outputs
are written as `out0..outM`. Prints `{"start": i}` before each module and then
`{"i": i, "ok": true}` or `{"i": i, "error": message}`. With argv[1] `--serve` it reads
one case (a JSON object) per stdin line instead and answers each with one line.
"""

import json
import sys


def save_arrays(path, prefix, arrays) -> None:
    """np.savez that keeps ml_dtypes types (bfloat16, int4, ...): their names go in `dtypes`."""
    import numpy as np

    names = [np.asarray(a).dtype.name for a in arrays]
    # ml_dtypes arrays are stored as their raw bytes (npz cannot name float8 types)
    data = {f"{prefix}{k}": _raw(np.asarray(a)) for k, a in enumerate(arrays)}
    np.savez(path, dtypes=np.array(names, dtype="U32"), **data)


def _raw(a):
    import ml_dtypes

    if hasattr(ml_dtypes, a.dtype.name):
        return a.view(f"u{a.dtype.itemsize}")
    return a


def load_arrays(path, prefix):
    import ml_dtypes
    import numpy as np

    with np.load(path) as d:
        names = [str(n) for n in d["dtypes"]]
        out = []
        for k, name in enumerate(names):
            a = d[f"{prefix}{k}"]
            if hasattr(ml_dtypes, name):
                a = a.view(np.dtype(getattr(ml_dtypes, name)))
            out.append(a)
    return out


def main() -> None:
    import os

    # replicas run on host devices, which exist only when asked for before jax starts
    devices = os.environ.get("HLOPASS_XLA_DEVICES")
    if devices:
        flag = f"--xla_force_host_platform_device_count={int(devices)}"
        os.environ["XLA_FLAGS"] = (os.environ.get("XLA_FLAGS", "") + " " + flag).strip()
    import jax

    jax.config.update("jax_enable_x64", True)
    from hlopass.execution import oracle

    def run(i, case):
        try:
            with open(case["hlo"]) as f:
                text = f.read()
            args = load_arrays(case["inputs"], "in")
            n = case.get("replicas", 1)
            if n > 1:  # the inputs hold each replica's arguments in turn, so do the outputs
                k = len(args) // n
                per = oracle.execute_replicas(text, [args[r * k : (r + 1) * k] for r in range(n)])
                outs = [o for replica in per for o in replica]
            else:
                outs = oracle.execute(text, args)
            save_arrays(case["outputs"], "out", outs)
            return {"i": i, "ok": True}
        except Exception as e:  # XLA rejects the module or its arguments
            return {"i": i, "error": (str(e).splitlines() or [type(e).__name__])[0][:300]}

    if sys.argv[1] == "--serve":  # one JSON case per stdin line, one reply line each
        for i, line in enumerate(sys.stdin):
            print(json.dumps(run(i, json.loads(line))), flush=True)
        return
    with open(sys.argv[1]) as f:
        cases = json.load(f)
    for i in range(int(sys.argv[2]), len(cases)):
        print(json.dumps({"start": i}), flush=True)
        print(json.dumps(run(i, cases[i])), flush=True)


if __name__ == "__main__":
    main()
