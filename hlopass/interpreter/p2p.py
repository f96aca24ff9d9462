"""Send and recv between the devices of one run, paired by `channel_id`.

Who talks to whom is the frontend attribute `_xla_send_recv_source_target_pairs`
(`{{source,target},...}`, as XLA's collective-permute decomposer and pipeliner write it),
in ids of the group mode's domain: partitions of this replica with a channel id above 0,
replicas of this partition otherwise (XLA's P2P config for send/recv). `send` posts its
data to each target and does not wait (the transfer is buffered); `recv` notes which
device it receives from and `recv-done` waits for that device's data, so a ring of
recv; send; recv-done; send-done, XLA's usual schedule, completes. A device no pair sends
to receives zeros. A send or recv without the attribute, or to the host
(`is_host_transfer=true`), has no peer in the run and is refused.
"""

from __future__ import annotations

import re

import numpy as np

from hlopass.interpreter.core import dtype_of, handler, unsupported
from hlopass.interpreter.groups import peers
from hlopass.interpreter.replicas import collect, device_state, post

_PAIRS_ATTR = re.compile(r"_xla_send_recv_source_target_pairs=\"?(\{[{}\d,\s]*\})")
_PAIR = re.compile(r"\{\s*(\d+)\s*,\s*(\d+)\s*\}")


def _pairs(op) -> list[tuple[int, int]]:
    if op.attr("is_host_transfer"):
        raise unsupported(op, "a host transfer (is_host_transfer=true) has no host here")
    raw = op.attr("frontend_attributes")
    m = _PAIRS_ATTR.search(str(getattr(raw, "text", raw) or ""))
    if m is None:
        raise unsupported(op, "no _xla_send_recv_source_target_pairs frontend attribute: "
                              "its peer is another program or the host")  # fmt: skip
    return [(int(s), int(t)) for s, t in _PAIR.findall(m.group(1))]


def _channel(op) -> int:
    return int(op.attr("channel_id") or 0)


def _pending() -> dict[int, list]:
    """channel -> the device each of this device's outstanding recvs receives from (None
    where no pair sends to it), oldest first."""
    return device_state("recv")


@handler("send")
def _send(interp, op, args):
    data = args[0]
    _, targets, _ = peers(op, _pairs(op))
    for t in targets:
        post(_channel(op), t, np.array(data))
    return (data, np.zeros((), np.uint32), np.zeros((0,), np.uint8))


@handler("send-done")
def _send_done(interp, op, args):
    return np.zeros((0,), np.uint8)


@handler("recv")
def _recv(interp, op, args):
    _, _, sources = peers(op, _pairs(op))
    data_shape = op.shape.elements[0]
    # the data arrives at recv-done; until then the buffer holds zeros
    _pending().setdefault(_channel(op), []).append(sources[0] if sources else None)
    placeholder = np.zeros(data_shape.dims, dtype_of(data_shape))
    return (placeholder, np.zeros((), np.uint32), np.zeros((0,), np.uint8))


@handler("recv-done")
def _recv_done(interp, op, args):
    waiting = _pending().get(_channel(op))
    if not waiting:
        raise unsupported(op, f"no recv outstanding on channel {_channel(op)}")
    source = waiting.pop(0)
    data = args[0][0]
    if source is not None:
        data = np.asarray(collect(_channel(op), source)).astype(data.dtype, copy=False)
    return (data, np.zeros((0,), np.uint8))
