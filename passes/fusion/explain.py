"""Why each fusion happened: one record per producer a fusion pass considered.

A record holds the decision (`fused` or `kept`), the refusal rule (XLA's reason text) or the
two estimated times (µs, unfused vs fused), the consumers, and the kernels the producer
ended in. `hlopass-opt --explain-fusion[=text|json]` prints them on stderr;
`explain_sink.enable(stream, fmt)` does the same from Python, and every fusion pass
returns its records from `plan(...)`.
"""

from __future__ import annotations

import json
import sys
from dataclasses import asdict, dataclass, field
from typing import Any, TextIO


@dataclass
class FusionRecord:
    pass_name: str
    computation: str
    producer: str
    decision: str  # "fused" | "kept"
    reason: str | None = None
    unfused_us: float | None = None
    fused_us: float | None = None
    consumers: list[str] = field(default_factory=list)
    kernels: list[str] = field(default_factory=list)

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)

    def text(self) -> str:
        head = f"{self.pass_name} {self.computation}: {self.decision} {self.producer}"
        if self.consumers:
            head += f" -> {', '.join(self.consumers)}"
        parts = [head]
        if self.reason:
            parts.append(f"because {self.reason}")
        if self.unfused_us is not None and self.fused_us is not None:
            parts.append(f"unfused {self.unfused_us:.3f} us, fused {self.fused_us:.3f} us")
        if self.kernels:
            parts.append(f"kernel {', '.join(self.kernels)}")
        return "; ".join(parts)


class ExplainSink:
    """Where passes print their records (nowhere unless enabled)."""

    def __init__(self) -> None:
        self.stream: TextIO | None = None
        self.fmt = "text"

    def enable(self, stream: TextIO | None = None, fmt: str = "text") -> None:
        if fmt not in ("text", "json"):
            raise ValueError(f"unknown explain format '{fmt}' (text or json)")
        self.stream = stream if stream is not None else sys.stderr
        self.fmt = fmt

    def disable(self) -> None:
        self.stream = None

    def emit(self, records: list[FusionRecord]) -> None:
        if self.stream is None:
            return
        for r in records:
            line = json.dumps(r.as_dict(), sort_keys=True) if self.fmt == "json" else r.text()
            print(line, file=self.stream)


explain_sink = ExplainSink()
