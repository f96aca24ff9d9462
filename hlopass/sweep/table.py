"""The summary a sweep ends with: one row per module, then the totals."""

from __future__ import annotations

from typing import Any


def _pair(record: dict[str, Any], what: str, fmt: str) -> str:
    def one(stats: Any) -> str:
        value = stats.get(what) if isinstance(stats, dict) else None
        return "-" if value is None else format(value, fmt)

    return f"{one(record.get('before'))} -> {one(record.get('after'))}"


def table_rows(records: list[dict[str, Any]]) -> list[tuple[str, ...]]:
    """(module, instructions, kernels, time us, seconds, error) per record, timings apart
    from the rest so that two sweeps can be compared row by row without them."""
    rows = []
    for r in records:
        rows.append((r["module"], _pair(r, "instructions", "d"), _pair(r, "kernels", "d"),
                     _pair(r, "time_us", ".3f"), f"{r.get('seconds', 0.0):.2f}",
                     r.get("error") or ""))  # fmt: skip
    return rows


def totals_line(records: list[dict[str, Any]]) -> str:
    ok = [r for r in records if r.get("ok")]

    def total(which: str) -> float:
        return sum((r.get(which) or {}).get("time_us") or 0.0 for r in ok)

    return (f"{len(records)} modules, {len(ok)} ok, {len(records) - len(ok)} errors; "
            f"estimated time of the ok modules {total('before'):.3f} -> {total('after'):.3f} us; "
            f"{sum(r.get('seconds', 0.0) for r in records):.1f} s of work")  # fmt: skip


def summary_table(records: list[dict[str, Any]]) -> str:
    """Aligned text: module, instructions / kernels / estimated us before -> after, seconds,
    error; the totals last."""
    head = ("module", "instructions", "kernels", "time us", "s", "error")
    rows = [head, *table_rows(records)]
    widths = [max(len(r[i]) for r in rows) for i in range(len(head) - 1)]
    lines = []
    for r in rows:
        cells = [r[0].ljust(widths[0])] + [
            c.rjust(w) for c, w in zip(r[1:-1], widths[1:], strict=True)
        ]
        lines.append("  ".join(cells + [r[-1]]).rstrip())
    lines.append(totals_line(records))
    return "\n".join(lines) + "\n"
