"""`-o PATH` never destroys what is at PATH (hlopass/commands/output.py, `hlopass-opt`, `hlopass run`).

Each case runs the real command in a child process (as a user would) unless it tests the
helper's own API (chunked data, a write killed by SIGTERM).
"""

from __future__ import annotations

import io
import os
import shutil
import signal
import stat
import subprocess
import sys
import tempfile
import textwrap
import threading
from pathlib import Path

import numpy as np
import pytest

from hlopass.commands.output import OutputError, write_output
from tests.conftest import sigint_default

ROOT = Path(__file__).resolve().parent.parent
MODULE = textwrap.dedent("""\
    HloModule m

    ENTRY main {
      p = f32[2] parameter(0)
      ROOT n = f32[2] negate(p)
    }
""")
IS_ROOT = os.geteuid() == 0


def _pythonpath() -> str:
    """The checkout first, then whatever PYTHONPATH the suite runs with (where the
    dependencies may be)."""
    return os.pathsep.join(p for p in (str(ROOT), os.environ.get("PYTHONPATH", "")) if p)


def _opt(tmp_path: Path, *args: str, umask: int | None = None):
    src = tmp_path / "in.hlo"
    src.write_text(MODULE)
    src.chmod(0o644)
    code = "import sys; from hlopass.commands.cli import opt_main; sys.exit(opt_main(sys.argv[1:]))"
    env = dict(os.environ, PYTHONPATH=_pythonpath())
    return subprocess.run(
        [sys.executable, "-c", code, str(src), *args],
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
        cwd=tmp_path,
        umask=-1 if umask is None else umask,
    )


def _expected_output() -> str:
    from hlopass import parse_hlo
    from hlopass.text.exporter import print_hlo

    return print_hlo(parse_hlo(MODULE), "default")


def _no_temp_left(directory: Path) -> None:
    assert [p.name for p in directory.iterdir() if p.name.startswith(".hlopass-")] == []


def _one_line_error(proc, path: str) -> str:
    assert proc.returncode == 1, proc.stderr
    assert "Traceback" not in proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1, proc.stderr
    assert lines[0].startswith(f"{path}: error: "), lines[0]
    return lines[0]


def test_new_file_gets_umask_mode(tmp_path):
    for umask, mode in ((0o022, 0o644), (0o077, 0o600), (0o002, 0o664)):
        out = tmp_path / f"new{umask:o}.hlo"
        proc = _opt(tmp_path, "-o", str(out), umask=umask)
        assert proc.returncode == 0, proc.stderr
        assert stat.S_IMODE(out.stat().st_mode) == mode
        assert out.read_text() == _expected_output()
    _no_temp_left(tmp_path)


def test_overwritten_file_keeps_mode(tmp_path):
    out = tmp_path / "out.hlo"
    for mode in (0o644, 0o640, 0o755):
        out.write_text("old")
        out.chmod(mode)
        proc = _opt(tmp_path, "-o", str(out), umask=0o077)
        assert proc.returncode == 0, proc.stderr
        assert stat.S_IMODE(out.stat().st_mode) == mode
        assert out.read_text() == _expected_output()


def test_fifo_is_written_in_place(tmp_path):
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    got: list[bytes] = []
    reader = threading.Thread(target=lambda: got.append(fifo.read_bytes()), daemon=True)
    reader.start()
    proc = _opt(tmp_path, "-o", str(fifo))
    reader.join(60)
    assert proc.returncode == 0, proc.stderr
    assert stat.S_ISFIFO(os.lstat(fifo).st_mode), "the FIFO was replaced"
    assert got == [_expected_output().encode()]
    _no_temp_left(tmp_path)


def test_symlink_to_file_is_followed(tmp_path):
    target = tmp_path / "real.hlo"
    target.write_text("old")
    target.chmod(0o640)
    link = tmp_path / "link.hlo"
    link.symlink_to(target.name)
    proc = _opt(tmp_path, "-o", str(link))
    assert proc.returncode == 0, proc.stderr
    assert link.is_symlink() and os.readlink(link) == target.name
    assert target.read_text() == _expected_output()
    assert stat.S_IMODE(target.stat().st_mode) == 0o640
    _no_temp_left(tmp_path)


def test_symlink_chain_and_dangling_link(tmp_path):
    sub = tmp_path / "sub"
    sub.mkdir()
    (tmp_path / "a").symlink_to("b")
    (tmp_path / "b").symlink_to("sub/c")  # dangling: sub/c does not exist yet
    proc = _opt(tmp_path, "-o", str(tmp_path / "a"), umask=0o022)
    assert proc.returncode == 0, proc.stderr
    assert (tmp_path / "a").is_symlink() and (tmp_path / "b").is_symlink()
    assert (sub / "c").read_text() == _expected_output()
    assert stat.S_IMODE((sub / "c").stat().st_mode) == 0o644
    _no_temp_left(tmp_path)
    _no_temp_left(sub)


def test_symlink_to_device_is_written_in_place(tmp_path):
    link = tmp_path / "null"
    link.symlink_to("/dev/null")
    proc = _opt(tmp_path, "-o", str(link))
    assert proc.returncode == 0, proc.stderr
    assert stat.S_ISCHR(os.stat("/dev/null").st_mode)
    assert link.is_symlink()


@pytest.mark.skipif(not IS_ROOT, reason="creating a device node (mknod) needs root")
def test_character_device_is_not_replaced(tmp_path):
    """As root the old writer renamed its temp file over /dev/null. A private copy of the
    null device (same major/minor) stands in for it."""
    null = tmp_path / "null"
    rdev = os.stat("/dev/null").st_rdev
    os.mknod(null, stat.S_IFCHR | 0o666, rdev)
    null.chmod(0o666)  # mknod's mode is masked by the umask
    proc = _opt(tmp_path, "-o", str(null))
    assert proc.returncode == 0, proc.stderr
    st = os.lstat(null)
    assert stat.S_ISCHR(st.st_mode) and st.st_rdev == rdev, "the device was replaced"
    assert stat.S_IMODE(st.st_mode) == 0o666
    _no_temp_left(tmp_path)


def test_full_device_write_error_is_one_line(tmp_path):
    """A write error on a device (ENOSPC from the full device) is one line. As root the
    test uses a private node of the full device: a writer that renames over its target
    (the bug this file guards against) would otherwise replace the machine's /dev/full."""
    if not os.path.exists("/dev/full") or not stat.S_ISCHR(os.stat("/dev/full").st_mode):
        pytest.skip("no full device (/dev/full) on this system")
    full = "/dev/full"
    if IS_ROOT:
        full = str(tmp_path / "full")
        os.mknod(full, stat.S_IFCHR | 0o666, os.stat("/dev/full").st_rdev)
    proc = _opt(tmp_path, "-o", full)
    assert "No space left" in _one_line_error(proc, full)
    assert stat.S_ISCHR(os.lstat(full).st_mode)


def test_missing_directory_is_one_line(tmp_path):
    out = str(tmp_path / "no" / "such" / "dir.hlo")
    proc = _opt(tmp_path, "-o", out)
    assert "No such file or directory" in _one_line_error(proc, out)


def test_directory_target_is_one_line(tmp_path):
    proc = _opt(tmp_path, "-o", str(tmp_path))
    assert "Is a directory" in _one_line_error(proc, str(tmp_path))


def _opt_as_nobody(args: list[str], stdin_path: Path) -> tuple[int, str]:
    """`hlopass-opt ARGS < stdin_path` in a forked child that has dropped root for `nobody`
    (root ignores directory permissions; the interpreter binary may not be reachable for
    `nobody`, so no exec: the child runs the already imported entry point)."""
    from hlopass.commands.cli import opt_main

    read_end, write_end = os.pipe()
    src = os.open(stdin_path, os.O_RDONLY)
    pid = os.fork()
    if pid == 0:  # child
        code = 70
        try:
            os.dup2(src, 0)
            os.dup2(write_end, 2)
            sys.stdin = open(0, encoding="utf-8", closefd=False)  # noqa: SIM115
            sys.stderr = open(2, "w", encoding="utf-8", closefd=False)  # noqa: SIM115
            os.setgroups([])
            os.setgid(65534)
            os.setuid(65534)
            code = opt_main(args)
            sys.stderr.flush()
        finally:
            os._exit(code)
    os.close(write_end)
    os.close(src)
    with os.fdopen(read_end, encoding="utf-8") as f:
        err = f.read()
    _, status = os.waitpid(pid, 0)
    return os.waitstatus_to_exitcode(status), err


def test_read_only_directory_is_one_line(tmp_path):
    base = Path(tempfile.mkdtemp())  # not under pytest's 0700 folder: `nobody` must reach it
    base.chmod(0o755)
    ro = base / "ro"
    ro.mkdir()
    (ro / "out.hlo").write_text("old")
    (ro / "out.hlo").chmod(0o644)
    ro.chmod(0o555)
    src = tmp_path / "in.hlo"
    src.write_text(MODULE)
    try:
        for name in ("out.hlo", "new.hlo"):
            out = str(ro / name)
            if IS_ROOT:
                rc, err = _opt_as_nobody(["-", "-o", out], src)
                proc = subprocess.CompletedProcess([], rc, "", err)
            else:
                proc = _opt(tmp_path, "-o", out)
            assert "Permission denied" in _one_line_error(proc, out)
        assert (ro / "out.hlo").read_text() == "old"
        assert sorted(p.name for p in ro.iterdir()) == ["out.hlo"]  # no temp, no new file
    finally:
        ro.chmod(0o755)
        shutil.rmtree(base)


def test_helper_writes_chunks_and_bytes(tmp_path):
    out = tmp_path / "o"
    write_output(str(out), (c for c in ["a", "b\n", "ü"]))
    assert out.read_text() == "ab\nü"
    write_output(str(out), b"\x00\xff")
    assert out.read_bytes() == b"\x00\xff"
    with pytest.raises(OutputError, match=r"^.*/nope/o: error: cannot write output: No such"):
        write_output(str(tmp_path / "nope" / "o"), "x")


def test_failed_write_leaves_target_and_no_temp(tmp_path):
    out = tmp_path / "out.hlo"
    out.write_text("old")

    def chunks():
        yield "new"
        raise RuntimeError("the producer failed")

    with pytest.raises(RuntimeError):
        write_output(str(out), chunks())
    assert out.read_text() == "old"
    _no_temp_left(tmp_path)


_KILLED_CHILD = """
import sys, time
from hlopass.commands.output import write_output
def chunks():
    for i in range(10_000):
        yield b"x" * (1 << 16)
        if i == 10:
            print("writing", flush=True)
        time.sleep(0.01)
write_output(sys.argv[1], chunks())
"""


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT])
def test_run_killed_mid_write(tmp_path, signum):
    """A child is stopped half-way through writing a big output: the old file is intact,
    the temporary file is gone, and the child died of the signal (SIGINT: Ctrl-C)."""
    out = tmp_path / "out.bin"
    out.write_bytes(b"old content")
    env = dict(os.environ, PYTHONPATH=_pythonpath())
    child = subprocess.Popen(
        [sys.executable, "-c", _KILLED_CHILD, str(out)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=env,
        preexec_fn=sigint_default,
    )
    try:
        assert child.stdout is not None
        assert child.stdout.readline() == b"writing\n"
        assert any(p.name.startswith(".hlopass-") for p in tmp_path.iterdir()), "no temp file"
        child.send_signal(signum)
        _, err = child.communicate(timeout=60)
    finally:
        if child.poll() is None:  # never leave the writer running
            child.kill()
            child.wait()
    assert child.returncode == -signum, err
    assert out.read_bytes() == b"old content"
    _no_temp_left(tmp_path)


# --- hlopass run -o ------------------------------------------------------------------------


def _run(tmp_path: Path, *args: str):
    src = tmp_path / "m.hlo"
    src.write_text(MODULE)
    inputs = tmp_path / "in.npz"
    np.savez(inputs, in0=np.array([1.5, -2.0], np.float32))
    code = "import sys; from hlopass.commands.cli import main; sys.exit(main(sys.argv[1:]))"
    env = dict(os.environ, PYTHONPATH=_pythonpath())
    return subprocess.run(
        [sys.executable, "-c", code, "run", str(src), "--inputs", str(inputs), *args],
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
        cwd=tmp_path,
    )


def test_run_writes_exactly_the_path_given(tmp_path):
    proc = _run(tmp_path, "-o", "results")
    assert proc.returncode == 0, proc.stderr
    assert not (tmp_path / "results.npz").exists()
    with np.load(io.BytesIO((tmp_path / "results").read_bytes())) as d:
        assert d.files == ["out0"]
        assert d["out0"].tolist() == [-1.5, 2.0]  # negate, exact


def test_run_output_to_directory_is_one_line(tmp_path):
    (tmp_path / "adir").mkdir()
    proc = _run(tmp_path, "-o", "adir")
    assert "Is a directory" in _one_line_error(proc, "adir")
    assert not (tmp_path / "adir.npz").exists()
    assert list((tmp_path / "adir").iterdir()) == []


def test_run_output_to_missing_directory_is_one_line(tmp_path):
    out = "/nonexistent/x.npz"
    proc = _run(tmp_path, "-o", out)
    assert "No such file or directory" in _one_line_error(proc, out)


# --- this process's own descriptors ---------------------------------------------------------


def test_dev_stdout_appended_log_is_kept(tmp_path):
    """`hlopass-opt X -o /dev/stdout >> log`: the output is appended through the descriptor;
    the old writer renamed a new file over `log` (what /proc/self/fd/1 resolves to),
    dropping what was logged before."""
    log = tmp_path / "log"
    log.write_text("before\n")
    for path in ("/dev/stdout", "/proc/self/fd/1"):
        if not os.path.exists(path):
            pytest.skip(f"no {path} on this system")
        src = tmp_path / "in.hlo"
        src.write_text(MODULE)
        code = "import sys; from hlopass.commands.cli import opt_main; sys.exit(opt_main(sys.argv[1:]))"
        with open(log, "ab") as out:
            proc = subprocess.run(
                [sys.executable, "-c", code, str(src), "-o", path],
                stdout=out,
                stderr=subprocess.PIPE,
                text=True,
                timeout=120,
                env=dict(os.environ, PYTHONPATH=_pythonpath()),
            )
        assert proc.returncode == 0, proc.stderr
    assert log.read_text() == "before\n" + _expected_output() * 2
    _no_temp_left(tmp_path)


def test_symlink_to_own_stdout_pipe(tmp_path):
    """A link to /proc/self/fd/1 whose stdout is a pipe: written into the pipe."""
    if not os.path.exists("/proc/self/fd/1"):
        pytest.skip("no /proc/self/fd on this system")
    link = tmp_path / "out"
    link.symlink_to("/proc/self/fd/1")
    proc = _opt(tmp_path, "-o", str(link))
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == _expected_output()
    assert link.is_symlink()


def test_descriptor_not_open_is_one_line(tmp_path):
    proc = _opt(tmp_path, "-o", "/dev/fd/57")
    assert "Bad file descriptor" in _one_line_error(proc, "/dev/fd/57")


def test_unbuffered_stdout_large_output_whole_and_closed_pipe(tmp_path):
    """Under PYTHONUNBUFFERED stdout's binary layer is the raw file: one write takes part of
    a large chunk, and text-mode writes dropped the rest silently (a reader that left after
    the first line saw exit 0). The whole output arrives, and a closed pipe gives 141."""
    lines = "\n".join(f"  k{i} = f32[] constant({i})" for i in range(6000))
    names = ", ".join(f"k{i}" for i in range(6000))
    big = f"HloModule m\n\nENTRY e {{\n{lines}\n  ROOT t = ({', '.join(['f32[]'] * 6000)}) tuple({names})\n}}\n"
    src = tmp_path / "big.hlo"
    src.write_text(big)
    code = "import sys; from hlopass.commands.cli import opt_main; sys.exit(opt_main(sys.argv[1:]))"
    env = dict(os.environ, PYTHONPATH=_pythonpath(), PYTHONUNBUFFERED="1")
    whole = subprocess.run([sys.executable, "-c", code, str(src)], capture_output=True,
                           timeout=120, env=env)  # fmt: skip
    assert whole.returncode == 0, whole.stderr
    assert len(whole.stdout) > 200_000 and whole.stdout.endswith(b"}\n\n")
    child = subprocess.Popen([sys.executable, "-c", code, str(src)], stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, env=env)  # fmt: skip
    assert child.stdout is not None
    child.stdout.read(10)
    child.stdout.close()  # as `head -c 10` does
    _, err = child.communicate(timeout=120)
    assert child.returncode == 141, err
    assert err == b""


# --- hlopass viz -o -----------------------------------------------------------------------


def test_viz_output_keeps_mode_and_writes_fifo_in_place(tmp_path):
    src = tmp_path / "m.hlo"
    src.write_text(MODULE)
    code = "import sys; from hlopass.commands.cli import main; sys.exit(main(sys.argv[1:]))"
    env = dict(os.environ, PYTHONPATH=_pythonpath())

    def viz(out: Path) -> subprocess.CompletedProcess:
        return subprocess.run(
            [sys.executable, "-c", code, "viz", str(src), "--format", "dot", "-o", str(out)],
            capture_output=True, text=True, timeout=120, env=env, umask=0o077,
        )  # fmt: skip

    out = tmp_path / "g.dot"
    out.write_text("old")
    out.chmod(0o640)
    proc = viz(out)
    assert proc.returncode == 0, proc.stderr
    assert stat.S_IMODE(out.stat().st_mode) == 0o640
    assert out.read_text().startswith("digraph")
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    got: list[bytes] = []
    reader = threading.Thread(target=lambda: got.append(fifo.read_bytes()), daemon=True)
    reader.start()
    proc = viz(fifo)
    reader.join(60)
    assert proc.returncode == 0, proc.stderr
    assert stat.S_ISFIFO(os.lstat(fifo).st_mode)
    assert got and got[0].startswith(b"digraph")
    missing = str(tmp_path / "no" / "g.dot")
    assert "No such file" in _one_line_error(viz(Path(missing)), missing)
    _no_temp_left(tmp_path)
