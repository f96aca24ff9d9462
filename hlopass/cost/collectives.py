"""Time of a collective on a GPU interconnect: NCCL-style ring and tree algorithms.

A collective over groups of n devices moves S bytes (XLA's "bytes transferred": the larger
of its input and output, `GpuHloCostAnalysis`). Per algorithm, on each GPU:

    ring all-reduce      2(n-1) steps, 2(n-1)/n x S on the wire
    ring all-gather / reduce-scatter / all-to-all   n-1 steps, (n-1)/n x S
    collective-permute   1 step, S
    tree all-reduce (groups over several hosts): reduce-scatter inside each host, an
        all-reduce of the host's S/g share between hosts along a binary tree (2 log2 H
        NIC hops, 2 x S/g over each NIC), all-gather inside the host

and per NCCL protocol p (LL, LL128, Simple; NCCL picks the fastest, as XLA's
`GpuPerformanceWithCollectiveModel` does with its per-protocol bandwidth tables):

    time_p = launch + steps x hop_latency x step_factor_p + wire / (bandwidth x eff_p)

* LL sends 4 data bytes with a 4-byte flag (eff 1/2) and is capped at XLA's
  `kLowLatencyMaxBandwidths` (141 GB/s on Hopper); LL128 sends 120 of every 128 bytes
  (eff 15/16); Simple moves whole buffers (eff 1) but synchronises per step.
* bandwidth: NVLink per GPU inside a host times the group-size efficiency 1 - c/n (fitted:
  a small group drives fewer NVSwitch paths), the NIC when a group spans hosts.
* all-reduce inside one host may instead reduce in the switch (NVLS, H100 SXM onwards):
  S each way in two hops, Simple protocol only; the fastest of ring and NVLS is taken.
* all-reduce and reduce-scatter add the HBM passes of their adds that the transfers do not
  hide: `reduce_passes` x S / n / HBM bandwidth.
* all-to-all is direct (not a ring): its own share of the line rate, no group-size term,
  and a fitted extra fixed cost (NCCL runs it as n-1 grouped send/recv pairs);
  collective-permute is a point-to-point copy split as NCCL splits a send (`enqueue.cc`):
  parts of at least one 512 KiB chunk over at most 4 channels (p2pnChannels 32 / 8 ranks),
  so one channel carries all of a copy up to 512 KiB, one chunk up to 2 MiB, a quarter
  beyond; all channels past a fitted fixed cost for large copies (XLA's table shows the
  switch near 128 MiB).
* under LL a ring step that reduces (reduce-scatter's n-1 steps, all-reduce's first n-1)
  waits on its flags, adds and stores before the next hop: `reduce_step` more hops each.

The fitted constants (`SM90_FIT`) come from `benchmarks/fit_collectives_sm90.py`, on XLA's
measured 8xH100 table (sm_90) only; other GPUs reuse them with their own link bandwidths.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from hlopass.cost.topology import Interconnect, Topology

LL_MAX_BANDWIDTH = 141e9  # XLA kLowLatencyMaxBandwidths (Hopper, Blackwell), bytes/s
LL_EFFICIENCY = 0.5  # 8-byte stores carrying 4 bytes of data and a 4-byte flag
LL128_EFFICIENCY = 120 / 128  # 128-byte lines carrying 120 bytes of data

# NCCL's point-to-point split (enqueue.cc, calcP2pChunkSize / calcP2pChannelCount): a send
# is cut into parts of at least one chunk (NCCL_P2P_NVL_CHUNKSIZE, 512 KiB over NVLink), over
# at most p2pnChannels / nRanks channels (32 / 8 on an 8-GPU host): the part a channel carries
P2P_CHUNK_BYTES = 512 * 1024
P2P_MIN_CHANNELS = 4

KINDS = ("all-reduce", "all-gather", "reduce-scatter", "all-to-all", "collective-permute")


@dataclass(frozen=True)
class CollectiveFit:
    """The constants fitted on the sm_90 table (µs unless named otherwise)."""

    launch_us: float  # fixed cost of one collective (launch, rendezvous, XLA runtime)
    ll_step: float  # per-step latency, in NVLink hops, of LL
    ll128_step: float  # ... of LL128
    simple_step: float  # ... of Simple
    bw_efficiency: float  # achieved share of the NVLink line rate (large messages)
    group_penalty: float  # c in the group-size efficiency 1 - c/n
    all_to_all_us: float  # extra fixed cost of all-to-all (NCCL runs it as n-1 send/recv pairs)
    permute_launch_us: float  # a permute's fixed cost (the table times it inside a loop)
    permute_small_efficiency: float  # share of the line rate of a small point-to-point copy
    permute_large_efficiency: float  # ... of a large one, once all channels are used
    permute_switch_us: float  # the fixed cost of spreading a copy over all channels
    all_to_all_efficiency: float  # all-to-all's share of the line rate (direct, not a ring)
    reduce_passes: float  # unhidden HBM passes over each GPU's shard of a reduction
    nvls_efficiency: float  # in-switch all-reduce (NVLS): its share of the line rate
    non_mutual_factor: float  # small-copy rate of a permute whose devices send and receive
    # with different peers (XLA's kIntraPartitionTwoWayHasNonMutual), relative to the others
    reduce_step: float = 0.0  # extra latency, in hops, of an LL ring step that adds what it
    # receives before forwarding it (reduce-scatter's n-1 steps, all-reduce's first n-1)

    def as_tuple(self) -> tuple[float, ...]:
        return tuple(getattr(self, f) for f in self.__dataclass_fields__)


# printed by `python benchmarks/fit_collectives_sm90.py` (sm_90 entries only)
SM90_FIT = CollectiveFit(11.251, 3.313, 8.451, 23.693, 0.9, 0.822, 13.218, 11.344, 0.229, 0.736,
                         365.594, 0.686, 2.806, 0.353, 0.67, 0.612)  # fmt: skip


@dataclass(frozen=True)
class CollectiveShape:
    """One collective as the model sees it."""

    kind: str  # one of KINDS
    nbytes: float  # bytes transferred (XLA's convention)
    group_size: int
    hosts: int = 1  # hosts one group spans
    pattern: str = ""  # collective-permute: "one_way", "mutual" or "non_mutual"


def ring_terms(kind: str, n: int) -> tuple[int, float]:
    """(steps, wire bytes per byte transferred) of the ring algorithm on n devices."""
    if kind == "collective-permute":
        return (1, 1.0)
    if n <= 1:
        return (0, 0.0)
    if kind == "all-reduce":
        return (2 * (n - 1), 2.0 * (n - 1) / n)
    return (n - 1, (n - 1) / n)


def link_bandwidth(c: CollectiveShape, links: Interconnect, fit: CollectiveFit) -> float:
    """Bytes/s one GPU pushes for this collective: NVLink scaled by the group-size
    efficiency inside a host, the slower of that and the NIC across hosts."""
    n = max(c.group_size, 2)
    if c.kind == "all-to-all":
        bw = links.nvlink_bandwidth * fit.all_to_all_efficiency
    else:
        bw = links.nvlink_bandwidth * fit.bw_efficiency * max(0.05, 1.0 - fit.group_penalty / n)
    return min(bw, links.nic_bandwidth) if c.hosts > 1 else bw


def permute_time(c: CollectiveShape, links: Interconnect, fit: CollectiveFit) -> float:
    """A point-to-point copy: a few channels at first, all of them (after a fixed cost)
    once that is faster; across hosts through the NIC."""
    bw = links.nvlink_bandwidth
    if c.hosts > 1:
        return links.nic_latency_us + c.nbytes / min(bw, links.nic_bandwidth) * 1e6
    small_eff = fit.permute_small_efficiency
    if c.pattern == "non_mutual":
        small_eff *= fit.non_mutual_factor
    # each channel moves one part at `small_eff / P2P_MIN_CHANNELS` of the line rate: one
    # part up to a chunk, then parts of a chunk on more channels, then a quarter on each
    part = max(min(c.nbytes, P2P_CHUNK_BYTES), c.nbytes / P2P_MIN_CHANNELS)
    small = part / (bw * small_eff / P2P_MIN_CHANNELS) * 1e6
    large = fit.permute_switch_us + c.nbytes / (bw * fit.permute_large_efficiency) * 1e6
    return links.nvlink_latency_us + min(small, large)


def protocol_times(steps: int, wire: float, hop_us: float, bw: float, fit: CollectiveFit,
                   adds: int = 0) -> dict[str, float]:  # fmt: skip
    """µs per protocol for `steps` hops of `hop_us` and `wire` bytes at `bw` bytes/s, `adds`
    of the steps adding what they receive: under LL each such step's threads wait on the
    flags, add and store before the next hop (`reduce_step` more hops); LL128 and Simple move
    whole lines or buffers, their adds overlapping the copies."""
    ll_bw = min(bw * LL_EFFICIENCY, LL_MAX_BANDWIDTH)
    return {
        "LL": (steps + adds * fit.reduce_step) * hop_us * fit.ll_step + wire / ll_bw * 1e6,
        "LL128": steps * hop_us * fit.ll128_step + wire / (bw * LL128_EFFICIENCY) * 1e6,
        "Simple": steps * hop_us * fit.simple_step + wire / bw * 1e6,
    }


def ring_time(c: CollectiveShape, links: Interconnect, fit: CollectiveFit) -> float:
    steps, per_byte = ring_terms(c.kind, c.group_size)
    adds = c.group_size - 1 if c.kind in ("all-reduce", "reduce-scatter") else 0
    hop = links.nic_latency_us if c.hosts > 1 else links.nvlink_latency_us
    bw = link_bandwidth(c, links, fit)
    times = protocol_times(steps, per_byte * c.nbytes, hop, bw, fit, adds)
    return min(times.values())


def tree_time(c: CollectiveShape, links: Interconnect, fit: CollectiveFit) -> float:
    """Hierarchical all-reduce over `hosts` hosts: NVLink reduce-scatter and all-gather
    inside each host around a binary-tree all-reduce of each GPU's share between hosts."""
    g = max(1, c.group_size // c.hosts)
    inner = CollectiveShape("reduce-scatter", c.nbytes, g, 1)
    intra = 2.0 * ring_time(inner, links, fit) if g > 1 else 0.0
    depth = 2 * math.ceil(math.log2(c.hosts))
    share = c.nbytes / g
    times = protocol_times(depth, 2.0 * share, links.nic_latency_us, links.nic_bandwidth, fit)
    return intra + min(times.values())


def collective_time_us(c: CollectiveShape, links: Interconnect,
                       fit: CollectiveFit = SM90_FIT) -> float:  # fmt: skip
    """µs for one collective: the launch cost plus the fastest algorithm and protocol."""
    if c.kind == "collective-permute":
        return fit.permute_launch_us + permute_time(c, links, fit)
    if c.group_size <= 1:
        return fit.launch_us  # a group of one copies nothing over a link
    t = ring_time(c, links, fit)
    if c.kind == "all-reduce" and c.hosts > 1:
        t = min(t, tree_time(c, links, fit))
    if c.kind == "all-reduce" and c.hosts == 1 and links.nvls:
        t = min(t, nvls_time(c, links, fit))
    if c.kind in ("all-reduce", "reduce-scatter"):
        t += reduction_time(c, links, fit)
    if c.kind == "all-to-all":
        t += fit.all_to_all_us
    return fit.launch_us + t


def nvls_time(c: CollectiveShape, links: Interconnect, fit: CollectiveFit) -> float:
    """All-reduce reduced inside NVSwitch (NVLink SHARP): each GPU sends its buffer up and
    receives the sum, S each way, in two hops whatever the group size; NCCL runs NVLS with
    the Simple protocol only."""
    bw = links.nvlink_bandwidth * fit.nvls_efficiency
    return protocol_times(2, c.nbytes, links.nvlink_latency_us, bw, fit)["Simple"]


def reduction_time(c: CollectiveShape, links: Interconnect, fit: CollectiveFit) -> float:
    """The part of a reduction's HBM traffic the transfers do not hide: `reduce_passes`
    passes over each GPU's 1/n shard (the last step's add has nothing left to overlap)."""
    return fit.reduce_passes * c.nbytes / max(c.group_size, 1) / links.hbm_bandwidth * 1e6


# --- collectives of an HLO module ----------------------------------------------------------

PRICED = {
    "all-reduce": "all-reduce", "all-reduce-start": "all-reduce",
    "all-gather": "all-gather", "all-gather-start": "all-gather",
    "reduce-scatter": "reduce-scatter", "all-to-all": "all-to-all",
    "ragged-all-to-all": "all-to-all",
    "collective-permute": "collective-permute", "collective-permute-start": "collective-permute",
}  # fmt: skip


def _leaf_bytes(shape: Any) -> float:
    from hlopass.cost.counts import shape_size

    return float(sum(shape_size(leaf) for leaf in shape.leaves()))


def transferred_bytes(op: Any, kind: str) -> float:
    """XLA's "bytes transferred": the larger of the operands and the result (an all-gather's
    output, a reduce-scatter's input, a -start op's result tuple counted without its
    aliased input)."""
    from hlopass.kernel_structure.shapes import operand_shapes

    ins = sum(_leaf_bytes(s) for s in operand_shapes(op))
    out = _leaf_bytes(op.shape)
    if op.opcode.endswith("-start") and op.shape.is_tuple:
        out -= ins  # the start tuple holds the operand buffers next to the results
    if kind == "collective-permute":
        return ins
    return max(ins, out)


def op_groups(op: Any, devices: int) -> list[list[int]]:
    """The device groups of a collective (`replica_groups` list or iota form; a permute:
    one pair per source/target)."""
    from hlopass.interpreter.replicas import replica_groups

    if PRICED.get(op.opcode) == "collective-permute":
        pairs = op.attr("source_target_pairs") or ()
        return [[int(s), int(t)] for s, t in pairs] or [[0]]
    return replica_groups(op.attr("replica_groups"), devices)


def op_collective(op: Any, topo: Topology) -> CollectiveShape | None:
    """The model's view of a collective instruction, or None for anything else."""
    kind = PRICED.get(op.opcode)
    if kind is None:
        return None
    groups = op_groups(op, topo.devices)
    size = max(len(g) for g in groups)
    hosts = max(topo.hosts_spanned(g) for g in groups)
    pattern = permute_pattern(groups) if kind == "collective-permute" else ""
    return CollectiveShape(kind, transferred_bytes(op, kind), size, hosts, pattern)


def permute_pattern(pairs: list[list[int]]) -> str:
    """XLA's collective-permute classes: every pair answered by its reverse ("mutual"), no
    device both sending and receiving ("one_way"), else "non_mutual" (e.g. a ring)."""
    edges = {(p[0], p[-1]) for p in pairs}
    if all((t, s) in edges for s, t in edges):
        return "mutual"
    senders, receivers = {s for s, _ in edges}, {t for _, t in edges}
    return "one_way" if not senders & receivers else "non_mutual"


def op_time_us(op: Any, topo: Topology, fit: CollectiveFit = SM90_FIT) -> float | None:
    c = op_collective(op, topo)
    return None if c is None else collective_time_us(c, topo.links, fit)


def price_row(row: Any, op: Any, topo: Topology) -> None:
    """Give a collective's kernel row (`model.KernelRow`) its time on the interconnect: all
    of it is link time (no launch of its own: `launch_us` is inside the fitted fixed cost)."""
    t = op_time_us(op, topo)
    if t is None:
        return
    row.compute_us, row.memory_us, row.launch_us = 0.0, t, 0.0
    row.time_us, row.bound = t, "network"


def module_devices(module: Any) -> int:
    """Devices a module runs on: replica_count x num_partitions, at least the largest device
    id its collectives name plus one."""
    from hlopass.interpreter.replicas import replicas_needed

    attrs = getattr(module, "attributes", {}) or {}
    n = 1
    for key in ("hlo.replica_count", "hlo.num_partitions"):
        a = attrs.get(key)
        text = str(getattr(a, "text", None) or getattr(a, "value", None) or a or 1)
        digits = "".join(ch for ch in text.split(":")[0] if ch.isdigit())
        n *= int(digits or 1)
    return max(n, replicas_needed(module) if module is not None else 1)


def covering(topo: Topology, devices: int) -> Topology:
    """`topo` with enough hosts for `devices` (a 16-device module on "1x8" runs on 2x8):
    device d sits on host d // gpus_per_host either way."""
    hosts = max(topo.hosts, -(-devices // topo.gpus_per_host))
    return Topology(hosts, topo.gpus_per_host, topo.links)


def resolve_topology(topology: Any, module: Any, device: str) -> Topology | None:
    """The topology `estimate` prices collectives on: "HxG" text or a `Topology` (grown to
    hold all the module's devices), "auto" (1x8 for a module on more than one device, when
    the device's links are known) or None (collectives priced as local copies)."""
    from hlopass.cost.topology import INTERCONNECTS, TABLE_KEYS, parse_topology

    devices = module_devices(module) if module is not None else 1
    if topology == "auto":
        known = TABLE_KEYS.get(device, device) in INTERCONNECTS
        topology = "1x8" if devices > 1 and known else None
    if isinstance(topology, str):
        topology = parse_topology(topology, device)
    return covering(topology, devices) if topology is not None else None
