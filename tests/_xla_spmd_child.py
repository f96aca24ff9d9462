"""Child process: run HLO modules on replicas x partitions XLA:CPU host devices.

argv[1]: a JSON manifest `[{"hlo", "inputs", "outputs", "replicas", "partitions"}, ...]`,
argv[2]: the index to start at (`tests.child_runner.run_batch`'s protocol: `{"start": i}`
before each case, then `{"i": i, "ok": true}` or `{"i": i, "error": message}`). Inputs
hold each device's arguments in turn (`in0..`), outputs each device's results in turn.
The host platform gets as many devices as the largest case needs, which must be set
before jax starts.
"""

import json
import os
import sys


def main() -> None:
    with open(sys.argv[1]) as f:
        cases = json.load(f)
    most = max(c["replicas"] * c["partitions"] for c in cases)
    flag = f"--xla_force_host_platform_device_count={most}"
    os.environ["XLA_FLAGS"] = (os.environ.get("XLA_FLAGS", "") + " " + flag).strip()
    import jax

    jax.config.update("jax_enable_x64", True)
    from hlopass.execution import oracle
    from tests._xla_exec_child import load_arrays, save_arrays

    for i in range(int(sys.argv[2]), len(cases)):
        print(json.dumps({"start": i}), flush=True)
        case = cases[i]
        try:
            with open(case["hlo"]) as f:
                text = f.read()
            args = load_arrays(case["inputs"], "in")
            n = case["replicas"] * case["partitions"]
            k = len(args) // n
            per = [args[d * k : (d + 1) * k] for d in range(n)]
            outs = oracle.execute_devices(text, per, case["replicas"], case["partitions"])
            save_arrays(case["outputs"], "out", [o for device in outs for o in device])
            reply = {"i": i, "ok": True}
        except Exception as e:  # XLA rejects the module or its arguments
            reply = {"i": i, "error": (str(e).splitlines() or [type(e).__name__])[0][:300]}
        print(json.dumps(reply), flush=True)


if __name__ == "__main__":
    main()
