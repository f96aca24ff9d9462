"""Child process: XLA's parser and printer on HLO texts, one JSON line per text.

XLA may abort the process (a C++ CHECK failure) on some inputs, so the parent
(`tests.child_runner.run_batch`) runs this in a child and restarts it after the text that
killed it. argv[1]: a JSON manifest, a list of texts; argv[2]: the index to start at.
Prints `{"start": i}` before each text, then `{"i": i, "print": text}` (XLA's print with
large constants) or `{"i": i, "error": message}`. The text `--opcodes` answers with the
names of XLA's HloOpcode enum instead; a text starting with the line `--compile` also
says whether XLA:CPU compiles XLA's print (`"compiles"`, its verifier included).
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
        text = texts[i]
        if text == "--opcodes":
            print(json.dumps({"i": i, "opcodes": oracle.opcode_enum_names()}), flush=True)
            continue
        compile_it = text.startswith("--compile\n")
        try:
            msg = {"i": i, "print": oracle.reprint(text.removeprefix("--compile\n"))}
        except Exception as e:  # XLA's parse error (XlaRuntimeError / ValueError)
            msg = {"i": i, "error": str(e)}
        if compile_it and "print" in msg:  # does XLA compile (verify) its own print?
            try:
                oracle.compile(msg["print"])
                msg["compiles"] = True
            except Exception as e:
                msg["compiles"] = False
                msg["compile_error"] = str(e)[:500]
        print(json.dumps(msg), flush=True)


if __name__ == "__main__":
    main()
