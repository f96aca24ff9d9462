"""Child process for the cost tests: XLA's HloCostAnalysis on many modules, one JSON line each.

XLA may abort the process (a CHECK failure) on some inputs, so the parent runs this in a
child and restarts it after the module that killed it. Reads a JSON list of HLO texts from
the file named in argv[1], starts at index argv[2], prints `{"i": ..., "cost"|"error": ...}`.
"""

import json
import sys


def main() -> None:
    from hlopass.execution import oracle

    with open(sys.argv[1]) as f:
        texts = json.load(f)
    start = int(sys.argv[2])
    for i in range(start, len(texts)):
        print(json.dumps({"start": i}), flush=True)
        try:
            cost = oracle.cost_analysis(texts[i])
            out = {"i": i, "cost": cost}
        except Exception as e:  # XLA rejects the module
            out = {"i": i, "error": (str(e).splitlines() or [type(e).__name__])[0][:200]}
        print(json.dumps(out), flush=True)


if __name__ == "__main__":
    main()
