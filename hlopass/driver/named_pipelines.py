"""Named pipelines: one word on the command line for the passes a compiler runs, in its order.

`hlopass-opt m.hlo -p 'gpu{device=h100_sxm}'` runs the passes XLA's GPU compiler runs, in
the order it runs them, as far as hlopass has them. A named pipeline is expanded where the
pipeline string is parsed, so every pass in it is instrumented on its own
(`--print-ir-after-all`, `--time-passes`, `--trace-rewrites`) and `hlopass-opt
--print-pipeline -p gpu` prints the expansion: a user who wants to swap one pass for their
own copies that line and edits it.

Each stage below names the part of XLA's `GpuCompiler` it stands for (the pass lists of
`gpu_compiler.cc`: `RunOptimizationPasses`, layout assignment and
`OptimizeHloPostLayoutAssignment`, `RunFusionPasses`, the collective and scheduling passes
after fusion). XLA passes hlopass does not have are not silently replaced: `MISSING` lists
them, and `--help-pass gpu` prints that list.
"""

from __future__ import annotations

from dataclasses import dataclass

from hlopass.errors import HloError


@dataclass(frozen=True)
class Stage:
    """A run of passes standing for one part of a compiler's pipeline; `{device}` in a pass
    spec is the named pipeline's `device` option, `{cc}` its CUDA compute capability."""

    label: str
    passes: tuple[str, ...]


TRITON_PASSES = frozenset({"splitk-rewriter", "gemm-fusion", "softmax-rewriter-triton"})
"""Passes XLA's GPU compiler runs from Ampere (compute capability 8.0) on only."""


@dataclass(frozen=True)
class NamedPipeline:
    """A pipeline known by name, with the one option every stage shares (`device`)."""

    name: str
    summary: str
    stages: tuple[Stage, ...]
    missing: tuple[str, ...]
    default_device: str = "h100_sxm"

    def expand(self, options: dict[str, str]) -> str:
        """The pipeline string for these options; HloError (one line) on a bad option."""
        from hlopass.cost.devices import DEVICES

        unknown = sorted(set(options) - {"device"})
        if unknown:
            raise HloError(
                f"error: pipeline '{self.name}' has no option '{unknown[0]}' (options: device)"
            )
        device = options.get("device", self.default_device)
        if device not in DEVICES:
            raise HloError(
                f"error: pipeline '{self.name}': unknown device '{device}' "
                f"(known: {', '.join(sorted(DEVICES))})"
            )
        from hlopass.cost.profiles import compute_capability

        major, minor = compute_capability(device)
        passes = [p for s in self.stages for p in s.passes]
        if major < 8:  # no Triton fusions before Ampere (XLA's GPU compiler)
            passes = [p for p in passes if p.split("{")[0] not in TRITON_PASSES]
        return ",".join(
            p.replace("{device}", device).replace("{cc}", f"{major}.{minor}") for p in passes
        )

    def help_text(self) -> str:
        lines = [f"{self.name} (named pipeline)", f"  {self.summary}", "", "options:"]
        lines.append(f"  device={self.default_device}  (a name)")
        lines.append("      GPU the device-dependent passes price and decide for (before Ampere,")
        lines.append("      compute capability 8.0, without the Triton passes, as XLA).")
        lines.append("")
        lines.append("stages (XLA's GpuCompiler order):")
        for s in self.stages:
            lines.append(f"  {s.label}: {', '.join(s.passes)}")
        lines.append("")
        lines.append("XLA GPU passes hlopass does not run (left out, not replaced):")
        lines += [f"  {m}" for m in self.missing]
        return "\n".join(lines) + "\n"


# XLA's algsimp flips a zero's sign where hlopass's default does not (no-signed-zeros)
_SIMPLIFY = (
    "algsimp{supports-non-canonical-dots=false no-signed-zeros=true},constant-folding,dce,cse"
)
_SIMPLIFY_POST_LAYOUT = "algsimp{is-layout-sensitive=true},dce,cse"

GPU = NamedPipeline(
    name="gpu",
    summary="XLA's GPU compiler passes in XLA's order, as far as hlopass has them.",
    stages=(
        # The pre-SPMD pipeline's call inlining and TopK passes: JAX's `topk` instructions
        # to sort + slice, and every sort read through its first K elements to a `TopK` call.
        Stage("pre-SPMD", ("call-inliner", "topk-decomposer{topk-only=true}", "topk-rewriter")),
        # RunOptimizationPasses: gathers and scatters without batching dims first, the TopK
        # calls the GPU kernel takes to `__gpu$TopK`, the rest back to sort + slice,
        # select-and-scatters into a reduce-window and a scatter; then the
        # "simplification" HloPassFix (GPU dots are
        # canonical: supports_non_canonical_dots=false), DotMerger, and DotDecomposer (dots
        # to the [batch, m, k] x [batch, k, n] form GEMM fusion reads).
        Stage(
            "optimization",
            (
                "batched-gather-scatter-normalizer",
                "topk-specializer",
                "topk-decomposer",
                "select-and-scatter-expander",
                f'fixpoint{{passes="{_SIMPLIFY}"}}',
                "dot-merger",
                "dot-decomposer",
            ),  # fmt: skip
        ),
        # The "collective-optimizations" pipeline that follows simplification.
        Stage(
            "collective optimizations",
            ("all-reduce-folder", "reduce-scatter-creator", "all-reduce-reassociate"),
        ),
        # OptimizeHloConvolutionCanonicalization: convolutions to cuDNN calls, their fused
        # epilogues, explicit padding, then the simplification XLA runs after them.
        Stage(
            "conv canonicalization",
            (
                "conv-rewriter{compute-capability={cc}}",
                "cudnn-fused-convolution-rewriter{compute-capability={cc}}",
                "conv-padding-legalization",
                f'fixpoint{{passes="{_SIMPLIFY}"}}',
            ),
        ),
        # Layout assignment and the normalization XLA runs right after it; copy-elision stands
        # for the copies XLA's algsimp and copy removal drop again (what `layout-assignment`'s
        # own `price-after` runs before pricing a plan).
        Stage(
            "layout",
            (
                "layout-assignment{device={device}}",
                "layout-normalization",
                "copy-elision",
                f'fixpoint{{passes="{_SIMPLIFY_POST_LAYOUT}"}}',
            ),
        ),
        # OptimizeHloPostLayoutAssignment: first the NVPTX compiler's "part 1"
        # (DotDimensionMerger: batch dimensions merged into the one GEMM emitters take), then
        # split-K (long contractions into batched pieces and a reduce, right before GEMM
        # fusion, on Triton devices only), Triton GEMM fusions, the dots left to cuBLAS calls (XLA's default: no cublasLt),
        # Triton softmax fusions (XLA's GPU compiler asks for profitable ones only), then the
        # reduction passes.
        Stage(
            "post-layout",
            (
                "dot-dimension-merger",
                "splitk-rewriter{device={device}}",
                "gemm-fusion{compute-capability={cc}}",
                "gemm-rewriter{compute-capability={cc}}",
                "softmax-rewriter-triton{device={device} only-fuse-if-profitable=true}",
                "tree-reduction-rewriter",
            ),
        ),
        # RunFusionPasses (XLA's FusionPipeline): sort-iota fusion, priority fusion, CSE and
        # DCE, multi-output fusion, CSE and DCE. No horizontal fusion: XLA removed
        # HorizontalLoopFusion and HorizontalInputFusion from its GPU compiler in July 2025
        # ("it does not add anything to the benchmarks except for OOMs"); the
        # `horizontal-fusion` pass stays for pipelines that want it.
        Stage(
            "fusion",
            (
                "sort-iota-fusion",
                "priority-fusion{device={device}}",
                "cse",
                "dce",
                "multi-output-fusion{device={device}}",
                "cse",
                "dce",
            ),
        ),
        # After fusion: the GPU combiners, async collectives and the latency-hiding scheduler.
        Stage(
            "collectives and scheduling",
            (
                "all-reduce-combiner{gpu=true}",
                "all-gather-combiner{gpu=true}",
                "reduce-scatter-combiner{gpu=true}",
                "async-collective-creator{convert-all-reduce=true convert-all-gather=true "
                "convert-reduce-scatter=true convert-collective-permute=true "
                "convert-all-to-all=true}",
                "latency-hiding-scheduler{device={device}}",
            ),
        ),
    ),
    missing=(
        "FP8 GEMM rewriting and DotAlgorithmRewriter (such dots stay dots, priced as a library "
        "GEMM); CublasPadForGemms; autotuned GEMM tiles",
        "GemvRewriter, HoistFusedBitcasts and GemmFusionSwapOperands around GEMM fusion (the "
        "fusions keep their bitcasts inside and XLA's operand order)",
        "TopKSplitter (a long single-row TopK split into blocks)",
        "ReduceWindowRewriter (a long "
        "scan stays one reduce-window, where XLA makes a two-level tree of 16-wide windows), "
        "GatherSimplifier and ScatterSimplifier (gathers and scatters keep their form)",
        "CudnnPadForConvolutions and CudnnVectorizeConvolutions (channel padding for "
        "f16/int8 tensor cores), ReshapeMover and ConvertMover after conv canonicalization",
        "priority fusion into Triton fusions (XLA's CanFuseTriton): softmax and GEMM "
        "fusions stay as built",
        "SPMD partitioning and sharding propagation (modules arrive partitioned)",
        "while-loop simplification and double-buffer unrolling, copy insertion, buffer assignment",
    ),
)

NAMED_PIPELINES: dict[str, NamedPipeline] = {GPU.name: GPU}
"""Every named pipeline `-p` knows, by name."""
