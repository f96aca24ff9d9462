"""Instruction scheduling: `latency-hiding-scheduler` orders each computation so that async
collectives overlap the compute around them."""

from .latency_hiding_scheduler import LatencyHidingSchedulerPass

__all__ = ["LatencyHidingSchedulerPass"]
