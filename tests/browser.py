"""A headless Chromium driven over the DevTools protocol on a pipe (`--remote-debugging-pipe`:
JSON messages separated by NUL bytes on file descriptors 3 and 4), so that tests can load a
page, wait for something to be drawn, ask the page questions and take a screenshot with
nothing but the standard library (no websocket client, no webdriver)."""

from __future__ import annotations

import base64
import contextlib
import json
import os
import shutil
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Any


def chromium() -> str | None:
    for name in ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable"):
        path = shutil.which(name)
        if path:
            return path
    return None


class Browser:
    """One headless Chromium with one page; use as a context manager."""

    def __init__(self, width: int = 1400, height: int = 900):
        exe = chromium()
        if exe is None:
            raise RuntimeError("no Chromium on this machine")
        self.profile = tempfile.mkdtemp(prefix="hlopass-chromium-")
        to_child_r, self._to_child = os.pipe()
        self._from_child, from_child_w = os.pipe()
        # The child reads commands on fd 3 and writes replies on fd 4.
        os.set_inheritable(to_child_r, True)
        os.set_inheritable(from_child_w, True)

        def fds() -> None:
            os.dup2(to_child_r, 3)
            os.dup2(from_child_w, 4)

        args = [exe, "--headless", "--no-sandbox", "--remote-debugging-pipe",
                f"--user-data-dir={self.profile}", f"--window-size={width},{height}",
                "--use-angle=swiftshader", "--enable-unsafe-swiftshader", "--no-first-run",
                "--disable-dev-shm-usage", "about:blank"]  # fmt: skip
        self.proc = subprocess.Popen(args, preexec_fn=fds, stdout=subprocess.DEVNULL,
                                     stderr=subprocess.DEVNULL, close_fds=False)  # fmt: skip
        os.close(to_child_r)
        os.close(from_child_w)
        self._buf = b""
        self._id = 0
        self.session = ""
        targets = self.call("Target.getTargets")["targetInfos"]
        page = next(t for t in targets if t["type"] == "page")
        self.session = self.call("Target.attachToTarget", targetId=page["targetId"],
                                 flatten=True, session=False)["sessionId"]  # fmt: skip
        self.call("Page.enable")
        self.call("Runtime.enable")
        self.call("Emulation.setDeviceMetricsOverride", width=width, height=height,
                  deviceScaleFactor=1, mobile=False)  # fmt: skip

    def __enter__(self) -> Browser:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        with contextlib.suppress(Exception):  # it may be gone already
            self.call("Browser.close", session=False, timeout=10)
        try:
            self.proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        for fd in (self._to_child, self._from_child):
            with contextlib.suppress(OSError):
                os.close(fd)
        shutil.rmtree(self.profile, ignore_errors=True)

    # --- protocol ----------------------------------------------------------------------------

    def call(self, method: str, session: bool = True, timeout: float = 120, **params: Any) -> Any:
        self._id += 1
        msg: dict[str, Any] = {"id": self._id, "method": method, "params": params}
        if session and self.session:
            msg["sessionId"] = self.session
        os.write(self._to_child, json.dumps(msg).encode() + b"\0")
        deadline = time.monotonic() + timeout
        while True:
            reply = self._read(deadline)
            if reply.get("id") == self._id:
                if "error" in reply:
                    raise RuntimeError(f"{method}: {reply['error']}")
                return reply.get("result", {})

    def _read(self, deadline: float) -> dict[str, Any]:
        import select

        while b"\0" not in self._buf:
            left = deadline - time.monotonic()
            if left <= 0:
                raise TimeoutError("Chromium did not answer in time")
            ready, _, _ = select.select([self._from_child], [], [], left)
            if ready:
                chunk = os.read(self._from_child, 1 << 20)
                if not chunk:
                    raise RuntimeError("Chromium went away")
                self._buf += chunk
        raw, self._buf = self._buf.split(b"\0", 1)
        return json.loads(raw)

    # --- what tests use ----------------------------------------------------------------------

    def goto(self, url: str) -> None:
        self.call("Page.navigate", url=url)

    def eval(self, expression: str, timeout: float = 120) -> Any:
        r = self.call("Runtime.evaluate", timeout=timeout, expression=expression,
                      returnByValue=True, awaitPromise=True)  # fmt: skip
        if "exceptionDetails" in r:
            raise RuntimeError(f"page error: {r['exceptionDetails'].get('text')}")
        return r["result"].get("value")

    def wait_for(self, expression: str, timeout: float, every: float = 0.25) -> Any:
        """Poll `expression` until it is truthy; its value, or TimeoutError."""
        deadline = time.monotonic() + timeout
        while True:
            try:
                value = self.eval(expression)
            except RuntimeError:
                value = None
            if value:
                return value
            if time.monotonic() > deadline:
                raise TimeoutError(f"not true after {timeout:.0f} s: {expression}")
            time.sleep(every)

    def screenshot(self, path: Path, timeout: float = 600) -> Path:
        # software WebGL (SwiftShader) draws thousands of nodes slowly on a loaded machine
        data = self.call("Page.captureScreenshot", timeout=timeout, format="png")["data"]
        path.write_bytes(base64.b64decode(data))
        return path


def distinct_colours(png: Path, box: tuple[int, int, int, int] | None = None) -> tuple[int, float]:
    """(number of distinct colours, share of pixels not the most common colour) of a PNG,
    or of its `box` (x, y, width, height): a blank area has one colour and 0.0."""
    import collections
    import struct
    import zlib

    raw = png.read_bytes()
    assert raw[:8] == b"\x89PNG\r\n\x1a\n"
    pos, idat, width, height, ctype = 8, b"", 0, 0, 0
    while pos < len(raw):
        (length,) = struct.unpack(">I", raw[pos : pos + 4])
        kind = raw[pos + 4 : pos + 8]
        body = raw[pos + 8 : pos + 8 + length]
        if kind == b"IHDR":
            width, height, depth, ctype = struct.unpack(">IIBB", body[:10])
            assert depth == 8 and ctype in (2, 6), (depth, ctype)
        elif kind == b"IDAT":
            idat += body
        pos += 12 + length
    bpp = 4 if ctype == 6 else 3
    data = zlib.decompress(idat)
    stride = width * bpp
    prev = bytearray(stride)
    counts: collections.Counter[bytes] = collections.Counter()
    x0, y0, bw, bh = box or (0, 0, width, height)
    for y in range(min(height, y0 + bh)):
        f = data[y * (stride + 1)]
        line = bytearray(data[y * (stride + 1) + 1 : (y + 1) * (stride + 1)])
        for i in range(stride):  # undo the PNG row filter
            a = line[i - bpp] if i >= bpp else 0
            b = prev[i]
            c = prev[i - bpp] if i >= bpp else 0
            if f == 1:
                line[i] = (line[i] + a) & 255
            elif f == 2:
                line[i] = (line[i] + b) & 255
            elif f == 3:
                line[i] = (line[i] + (a + b) // 2) & 255
            elif f == 4:
                p = a + b - c
                pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
                line[i] = (line[i] + (a if pa <= pb and pa <= pc else b if pb <= pc else c)) & 255
        prev = line
        if y < y0:
            continue
        for x in range(x0 * bpp, min(stride, (x0 + bw) * bpp), bpp * 4):  # every 4th pixel
            counts[bytes(line[x : x + 3])] += 1
    total = sum(counts.values())
    return len(counts), 1 - counts.most_common(1)[0][1] / total
