"""`hlopass rank MODULE -p PIPELINE_A -p PIPELINE_B ...`: each pipeline applied to its own
fresh copy of one module, ranked by the estimated time of the result (fastest first)."""

from __future__ import annotations

import json
from typing import Any

from hlopass.errors import HloError


class RankError(HloError):
    """A pipeline ranking that cannot be made, as one line."""


def rank_pipelines(path: str, pipelines: list[str], device: str) -> list[dict[str, Any]]:
    """One row per pipeline: its estimated time, kernels and instructions after it ran on
    `path`'s module, fastest first (ties keep the order given)."""
    import hlopass.cost
    from hlopass.commands.cli import parse_input
    from hlopass.commands.opt_stats import count_module
    from hlopass.pipeline import PipelineError, Runner, parse_pass_pipeline

    name = "<stdin>" if path == "-" else path
    from hlopass.commands.cli import read_input

    text = read_input(path)
    rows = []
    for spec in pipelines:
        passes = parse_pass_pipeline(spec)  # a bad pipeline fails before any work
        module = parse_input(text, name)
        try:
            Runner().run(passes, module)
        except PipelineError as e:
            raise RankError(
                f"{name}: error: pipeline '{spec}': {str(e).removeprefix('error: ')}"
            ) from None
        est = hlopass.cost.estimate(module, device)
        rows.append({"pipeline": spec, "time_us": est.time_us, "kernels": len(est.kernels),
                     "instructions": count_module(module)[1]})  # fmt: skip
    rows.sort(key=lambda r: r["time_us"])
    return rows


def rank_pipelines_main(files: list[str], pipelines: list[str], device: str, as_json: bool) -> int:
    """What `hlopass rank FILE -p A -p B` prints."""
    if len(files) != 1:
        raise RankError(
            f"hlopass rank: error: -p ranks pipelines on one module; got {len(files)} files"
        )
    path = files[0]
    rows = rank_pipelines(path, pipelines, device)
    if as_json:
        print(json.dumps({"device": device, "module": path, "ranking": rows}))
        return 0
    best = rows[0]["time_us"] or 1e-9
    for i, r in enumerate(rows, 1):
        print(f"{i}. -p '{r['pipeline']}'  {r['time_us']:.3f} us  ({r['time_us'] / best:.2f}x)"
              f"  {r['kernels']} kernels, {r['instructions']} instructions")  # fmt: skip
    return 0
