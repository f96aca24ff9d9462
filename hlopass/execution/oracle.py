"""Every use of jaxlib's private XLA APIs, in one place and imported lazily.

XLA is the oracle for tests and benchmarks: its parser, printer, cost analysis and CPU
execution. These are private APIs of jaxlib; the `test` extra pins the range they were
checked with. Nothing in the library imports this module at import time.
"""

from __future__ import annotations

from functools import cache
from typing import Any


@cache
def _xc() -> Any:
    # a private jaxlib module on purpose: this file is the one place that uses it
    from jax._src.lib import xla_client  # pyright: ignore[reportPrivateImportUsage]

    return xla_client


def available() -> bool:
    try:
        _xc()
    except ImportError:
        return False
    return True


def parse(text: str) -> Any:
    """XLA's parser (raises on invalid HLO). Returns XLA's HloModule object."""
    return _xc().hlo.hlo_module_from_text(text)


def to_string(module: Any, large_constants: bool = True) -> str:
    options = _xc().hlo.HloPrintOptions()
    options.print_large_constants = large_constants
    return module.to_string(options)


def reprint(text: str) -> str:
    """What XLA prints for `text`: parse, then print with large constants in full."""
    return to_string(parse(text))


def accepts(text: str) -> tuple[bool, str]:
    try:
        parse(text)
    except Exception as e:  # XLA raises XlaRuntimeError / ValueError with its message
        return False, str(e).splitlines()[0] if str(e) else type(e).__name__
    return True, ""


def cost_analysis(text: str) -> dict[str, float]:
    """XLA's HloCostAnalysis totals on the CPU client (flops, transcendentals, bytes accessed)."""
    import jax

    xc = _xc()
    client = jax.devices("cpu")[0].client
    return dict(xc._xla.hlo_module_cost_analysis(client, parse(text)))


def compile(text: str, platform: str = "cpu", numpy: bool = True) -> Any:
    """Compile an HLO module for XLA:CPU (or another of jax's platforms, e.g. "gpu"); call
    the result with a list of arrays to run it. Outputs are numpy arrays, or with
    `numpy=False` jax arrays left on the device (no copy, no wait: what jax.jit returns)."""
    import jax

    xc = _xc()
    module = parse(text)
    mlir = xc._xla.mlir.hlo_to_stablehlo(module.as_serialized_hlo_module_proto())
    devices = jax.devices(platform)[:1]
    client = devices[0].client
    exe = client.compile_and_load(mlir, xc.DeviceList(tuple(devices)), xc.CompileOptions())

    def run(args: list[Any]) -> list[Any]:
        results = exe.execute_sharded([jax.device_put(a, devices[0]) for a in args])
        arrays = results.disassemble_into_single_device_arrays()
        return [_numpy(a[0]) for a in arrays] if numpy else [a[0] for a in arrays]

    return run


def _numpy(array: Any) -> Any:
    """An output as numpy; a token (no data, no numpy form) as the interpreter's stand-in."""
    import numpy as np

    try:
        return np.asarray(array)
    except Exception as e:  # XLA: "Cannot convert a token-shape buffer to a numpy array"
        if "token" not in str(e):
            raise
        return np.zeros((0,), np.uint8)


def execute(text: str, args: list[Any]) -> list[Any]:
    """Compile and run an HLO module on XLA:CPU; returns flattened outputs as numpy arrays."""
    return compile(text)(args)


def execute_replicas(text: str, args_per_replica: list[list[Any]]) -> list[list[Any]]:
    """Run N replicas of an HLO module on XLA:CPU, replica r on args_per_replica[r]; returns
    each replica's flattened outputs. Needs N CPU devices: the process must start with
    XLA_FLAGS=--xla_force_host_platform_device_count=N (or more)."""
    import jax
    import numpy as np
    from jax.sharding import Mesh, NamedSharding, PartitionSpec

    xc = _xc()
    n = len(args_per_replica)
    devices = jax.devices("cpu")[:n]
    if len(devices) < n:
        raise ValueError(f"{n} replicas need {n} CPU devices, the process has {len(devices)}")
    module = parse(text)
    mlir = xc._xla.mlir.hlo_to_stablehlo(module.as_serialized_hlo_module_proto())
    options = xc.CompileOptions()
    options.num_replicas = n
    options.device_assignment = xc.DeviceAssignment.create(np.arange(n).reshape(n, 1))
    exe = devices[0].client.compile_and_load(mlir, xc.DeviceList(tuple(devices)), options)
    sharding = NamedSharding(Mesh(np.array(devices), ("r",)), PartitionSpec("r"))

    def global_array(per: list[Any]) -> Any:
        per = [np.asarray(a).reshape((1,) + np.shape(a)) for a in per]
        shards = [jax.device_put(a, d) for a, d in zip(per, devices, strict=True)]
        shape = (n,) + per[0].shape[1:]
        return jax.make_array_from_single_device_arrays(shape, sharding, shards)

    args = [global_array([a[k] for a in args_per_replica])
            for k in range(len(args_per_replica[0]))]  # fmt: skip
    outs = exe.execute_sharded(args).disassemble_into_single_device_arrays()
    return [[_numpy(o[r]) for o in outs] for r in range(n)]


def execute_devices(
    text: str, args_per_device: list[list[Any]], replicas: int, partitions: int = 1
) -> list[list[Any]]:
    """Run an HLO module on replicas x partitions XLA:CPU devices, device d (replica
    d // partitions, partition d % partitions) on args_per_device[d]; returns each
    device's flattened outputs. Needs that many CPU devices: the process must start with
    XLA_FLAGS=--xla_force_host_platform_device_count=N (or more).

    XLA:CPU runs several partitions only through its SPMD partitioner; every instruction
    without a sharding is marked `sharding={manual}`, which the partitioner leaves as
    written (each device runs the module as it is, as a shard_map body does)."""
    import re

    import jax
    import numpy as np
    from jax.sharding import Mesh, NamedSharding, PartitionSpec

    xc = _xc()
    n = replicas * partitions
    if len(args_per_device) != n:
        raise ValueError(f"{replicas} x {partitions} devices, {len(args_per_device)} arg lists")
    devices = jax.devices("cpu")[:n]
    if len(devices) < n:
        raise ValueError(f"{n} devices need {n} CPU devices, the process has {len(devices)}")
    if partitions > 1:
        instruction = re.compile(r"^(\s*(?:ROOT\s+)?%?[\w.\-]+\s*=\s*[^\n]*?)\s*$", re.M)
        text = instruction.sub(
            lambda m: (
                m.group(1) if "sharding=" in m.group(1) else m.group(1) + ", sharding={manual}"
            ),
            text,
        )
    module = parse(text)
    mlir = xc._xla.mlir.hlo_to_stablehlo(module.as_serialized_hlo_module_proto())
    options = xc.CompileOptions()
    options.num_replicas, options.num_partitions = replicas, partitions
    options.executable_build_options.use_spmd_partitioning = partitions > 1
    options.device_assignment = xc.DeviceAssignment.create(
        np.arange(n).reshape(replicas, partitions)
    )
    exe = devices[0].client.compile_and_load(mlir, xc.DeviceList(tuple(devices)), options)
    sharding = NamedSharding(Mesh(np.array(devices), ("d",)), PartitionSpec("d"))

    def global_array(per: list[Any]) -> Any:
        per = [np.asarray(a).reshape((1,) + np.shape(a)) for a in per]
        shards = [jax.device_put(a, d) for a, d in zip(per, devices, strict=True)]
        return jax.make_array_from_single_device_arrays((n,) + per[0].shape[1:], sharding, shards)

    args = [global_array([a[k] for a in args_per_device])
            for k in range(len(args_per_device[0]))]  # fmt: skip
    outs = exe.execute_sharded(args).disassemble_into_single_device_arrays()
    return [[_numpy(o[d]) for o in outs] for d in range(n)]


def opcode_enum_names() -> list[str]:
    """The members of XLA's HloOpcode enum (`kAdd`, ...), as jaxlib exposes them."""
    return list(_xc().hlo.HloOpcode.__members__)


def mlir_to_hlo(mlir: str | bytes) -> str:
    """XLA's HLO text for a StableHLO (or MHLO, or CHLO) MLIR module, text or bytecode: the
    converter `jax.jit(f).lower(...).as_text(dialect="hlo")` goes through, with no metadata
    (as jax prints it) and large constants in full. Raises with MLIR's diagnostics
    (`-:line:col: error: ...`, `-` being the buffer) on invalid MLIR."""
    xc = _xc()
    computation = xc._xla.mlir.mlir_module_to_xla_computation(
        mlir, use_tuple_args=False, return_tuple=False
    )
    options = xc.hlo.HloPrintOptions()
    options.print_large_constants = True
    options.print_metadata = False
    return computation.as_hlo_module().to_string(options)


def hlo_to_stablehlo(text: str) -> str:
    """StableHLO MLIR text (with locations: the instruction names) for an HLO module, by
    XLA's HLO-to-StableHLO translation."""
    xc = _xc()
    computation = xc.XlaComputation(parse(text).as_serialized_hlo_module_proto())
    return xc._xla.mlir.xla_computation_to_mlir_module(computation)
