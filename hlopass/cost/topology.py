"""Interconnect topologies for pricing collectives: hosts x GPUs per host, with the links.

A topology is written `HxG` (`1x8`: one host of 8 GPUs, `2x8`: two such hosts). Inside a
host every GPU reaches every other through NVSwitch (full bisection: disjoint groups do not
slow each other); between hosts each GPU has its own NIC. The numbers are per GPU and per
direction, each with its source:

* NVLink per GPU: H100 SXM5 900 GB/s bidirectional = 450 GB/s each way (NVIDIA H100
  datasheet, "NVLink 900GB/s"; 18 NVLink4 links x 25 GB/s); A100 SXM4 600 GB/s -> 300
  (A100 datasheet); B200 1.8 TB/s -> 900 (HGX B200 datasheet, NVLink5); V100 SXM2 300 GB/s
  -> 150 (V100 datasheet); GB200/GB300 NVL72: 72 GPUs in one NVLink domain at 900 each way
  (GB200 NVL72 datasheet: 130 TB/s over 72 GPUs); MI355X (gfx950): 7 Infinity Fabric links
  x 153.6 GB/s bidirectional = 537.6 GB/s each way (AMD MI355X datasheet).
* NIC per GPU: DGX H100 / DGX B200 carry one ConnectX-7 400 Gb/s = 50 GB/s per GPU (DGX
  datasheets); XLA's SoL model uses 55.56 GB/s x 0.45 for H100 and 111.12 x 0.45 for B200
  (`sol_gpu_cost_model.cc`, `kDefaultNcclCostModelCoeff` = 0.45 in collective_utils.h) --
  we keep the datasheet line rate and let the efficiency of the algorithm model the rest.
* Link latencies: NVLink hop 0.6 us and a NIC hop (RDMA round trip share) 5 us: the order of
  NCCL's own tuning constants for NVLink and InfiniBand; only the NVLink one is fitted
  against measurements (`benchmarks/fit_collectives_sm90.py`), the NIC one is not measured
  in XLA's table (all its sm_90 entries run on one 8-GPU host).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from hlopass.errors import HloInputError

GB = 1e9


@dataclass(frozen=True)
class Interconnect:
    """One GPU's links: NVLink (inside a host) and NIC (between hosts), per direction; its
    HBM bandwidth (the reductions of all-reduce / reduce-scatter read and write it) and
    whether its NVSwitch reduces in the switch (NVLink SHARP, "NVLS": H100 SXM onwards)."""

    nvlink_bandwidth: float  # bytes/s per GPU, one direction
    nic_bandwidth: float  # bytes/s per GPU, one direction
    hbm_bandwidth: float  # bytes/s (datasheet)
    nvls: bool = False
    nvlink_latency_us: float = 0.6
    nic_latency_us: float = 5.0
    gpus_per_domain: int = 8  # GPUs one NVLink domain (host) holds at most
    source: str = ""


T = 1e12
# keyed by DeviceSpec name and by the GPU keys of XLA's collective table (HBM: datasheets)
INTERCONNECTS: dict[str, Interconnect] = {
    "h100_sxm": Interconnect(450 * GB, 50 * GB, 3.35 * T, True,
                             source="H100 datasheet; DGX H100 ConnectX-7; NVSwitch gen3 SHARP"),
    "h100_pcie": Interconnect(300 * GB, 50 * GB, 2.0 * T,
                              source="H100 PCIe datasheet: NVLink bridge 600 GB/s"),
    "a100_sxm_80": Interconnect(300 * GB, 25 * GB, 2.039 * T,
                                source="A100 datasheet; DGX A100 200 Gb/s HDR"),
    "v100": Interconnect(150 * GB, 12.5 * GB, 0.9 * T,
                         source="V100 SXM2 datasheet; DGX-1 100 Gb/s EDR"),
    "b200": Interconnect(900 * GB, 50 * GB, 8.0 * T, True,
                         source="HGX B200 datasheet; DGX B200 ConnectX-7"),
    "a6000": Interconnect(56.25 * GB, 12.5 * GB, 0.768 * T,
                          source="RTX A6000 datasheet: NVLink bridge 112.5 GB/s"),
    "gb200_nvl72": Interconnect(900 * GB, 100 * GB, 8.0 * T, True, gpus_per_domain=72,
                                source="GB200 NVL72 datasheet; ConnectX-8 800 Gb/s"),
    # 7 Infinity Fabric links of 153.6 GB/s both ways together: 537.6 GB/s each way
    "mi355x": Interconnect(537.6 * GB, 50 * GB, 8.0 * T,
                           source="AMD MI355X datasheet: 7 x 153.6 GB/s bidirectional"),
}  # fmt: skip

# XLA collective-table GPU keys -> our interconnect names
TABLE_KEYS = {
    "sm_90": "h100_sxm",
    "sm_100_B200": "b200",
    "sm_100_GB200": "gb200_nvl72",
    "sm_103": "gb200_nvl72",  # GB300 NVL72: the same NVLink5 domain
    "gfx950": "mi355x",
}


@dataclass(frozen=True)
class Topology:
    """`hosts` hosts of `gpus_per_host` GPUs each, linked by `links`; device d lives on
    host d // gpus_per_host (XLA numbers devices host by host)."""

    hosts: int
    gpus_per_host: int
    links: Interconnect

    @property
    def name(self) -> str:
        return f"{self.hosts}x{self.gpus_per_host}"

    @property
    def devices(self) -> int:
        return self.hosts * self.gpus_per_host

    def host_of(self, device: int) -> int:
        return device // self.gpus_per_host

    def hosts_spanned(self, group: list[int]) -> int:
        """How many hosts the devices of `group` sit on."""
        return len({self.host_of(d) for d in group}) or 1


_SPEC = re.compile(r"(\d+)x(\d+)")


def parse_topology(text: str, device: str = "h100_sxm") -> Topology:
    """`HxG` on the links of `device` (a DeviceSpec name or a collective-table GPU key);
    a one-line `HloInputError` for anything else."""
    m = _SPEC.fullmatch(text.strip().lower())
    if not m or int(m.group(1)) < 1 or int(m.group(2)) < 1:
        raise HloInputError(f"bad topology {text!r}: expected HOSTSxGPUS, e.g. 1x8 or 2x8")
    links = interconnect(device)
    return Topology(int(m.group(1)), int(m.group(2)), links)


def interconnect(device: str) -> Interconnect:
    name = TABLE_KEYS.get(device, device)
    if name not in INTERCONNECTS:
        raise HloInputError(f"no interconnect data for device {device!r}")
    return INTERCONNECTS[name]
