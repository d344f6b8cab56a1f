"""Running the engine: argv lists only, environment overlays, timeouts, peak RSS and CPU time,
and a classification of how the process ended (exit status, signal, timeout, not found)."""

from __future__ import annotations

import os
import sys
import re
import shutil
import signal
import subprocess
import tempfile
import threading
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import IO, Any


@dataclass
class ProcResult:
    argv: list[str]
    env_overlay: dict[str, str]
    returncode: int | None  # None: never started
    signal: str | None  # e.g. SIGSEGV when killed by a signal
    timed_out: bool
    wall_s: float
    cpu_s: float | None  # user + system of the child
    peak_rss_mb: float | None
    stdout_path: str | None
    stderr_path: str | None
    error: str | None = None  # could not start (not found, not executable)
    stdout: str = ""  # whole when at most KEEP_WHOLE bytes, else head + marker + tail (see kept_text)
    stderr: str = ""
    stdout_bytes: int = 0  # the full sizes, in the log files
    stderr_bytes: int = 0

    @property
    def stdout_whole(self) -> bool:
        return self.stdout_bytes <= KEEP_WHOLE

    @property
    def stderr_whole(self) -> bool:
        return self.stderr_bytes <= KEEP_WHOLE

    @property
    def ok(self) -> bool:
        return self.error is None and not self.timed_out and self.signal is None and self.returncode == 0

    def describe(self) -> str:
        """How the process ended, in a few words."""
        if self.error:
            return self.error
        if self.timed_out:
            return f"timed out after {self.wall_s:.1f} s (killed)"
        if self.signal:
            return f"killed by signal {self.signal}"
        if self.returncode != 0:
            tail = _last_line(self.stderr)
            return f"exit status {self.returncode}" + (f": {tail}" if tail else "")
        return "exit status 0"

    def to_json(self) -> dict[str, Any]:
        d = asdict(self)
        d.pop("stdout")
        d.pop("stderr")
        return d


# The engine's output goes to files; what is kept in memory is bounded: all of it up to
# KEEP_WHOLE bytes (JSON to parse, a selftest's lines), else its first KEEP_HEAD and last
# KEEP_TAIL bytes (the first error, the closing line), about 2 x 8 MiB at most per stream.
KEEP_WHOLE = 8 * 1024 * 1024
KEEP_HEAD = 1024 * 1024
KEEP_TAIL = 4 * 1024 * 1024


def kept_text(f: IO[bytes]) -> tuple[str, int]:
    """(text kept in memory, full size in bytes) of an output file."""
    size = f.seek(0, os.SEEK_END)
    f.seek(0)
    if size <= KEEP_WHOLE:
        return f.read().decode("utf-8", errors="replace"), size
    head = f.read(KEEP_HEAD).decode("utf-8", errors="replace")
    f.seek(size - KEEP_TAIL)
    tail = f.read(KEEP_TAIL).decode("utf-8", errors="replace")
    gap = size - KEEP_HEAD - KEEP_TAIL
    return f"{head}\n[... {gap} bytes not kept in memory: the whole output is in the log ...]\n{tail}", size


def _die_with_parent() -> None:
    """In the child before exec (Linux): SIGKILL it when the harness dies, so an engine left by a
    killed harness cannot go on writing into a folder that `verify --resume` reuses."""
    import ctypes

    try:
        ctypes.CDLL(None, use_errno=True).prctl(1, 9)  # PR_SET_PDEATHSIG, SIGKILL
    except (OSError, AttributeError):
        pass


# The tree guard (Linux), between the harness and a command that starts its own children (a
# build: cmake, ninja, the compilers). It is a subreaper, so every orphan of the command's tree
# becomes its child and none escapes, whatever process group or session it moved to (ninja puts
# each job in a group of its own). When the command ends, or on SIGTERM from the harness, or when
# the harness dies (PR_SET_PDEATHSIG), it kills the whole tree and reaps it before it exits.
TREE_GUARD_MARK = "kite-tree-guard"
_TREE_GUARD = r"""
import ctypes, os, signal, sys
libc = ctypes.CDLL(None, use_errno=True)
libc.prctl(36, 1, 0, 0, 0)  # PR_SET_CHILD_SUBREAPER
libc.prctl(1, int(signal.SIGTERM), 0, 0, 0)  # PR_SET_PDEATHSIG
me = os.getpid()

def descendants():
    kids = {}
    for name in os.listdir("/proc"):
        if name.isdigit():
            try:
                with open("/proc/" + name + "/stat", "rb") as f:
                    rest = f.read().rsplit(b")", 1)[1].split()
                kids.setdefault(int(rest[1]), []).append((int(name), rest[0]))
            except (OSError, IndexError, ValueError):
                pass
    out, todo = [], [me]
    while todo:
        for pid, state in kids.get(todo.pop(), []):
            out.append((pid, state))
            todo.append(pid)
    return out

def end_tree():
    while True:
        for pid, state in descendants():
            if state != b"Z":
                try:
                    os.kill(pid, signal.SIGKILL)
                except OSError:
                    pass
        try:
            os.waitpid(-1, 0)
        except ChildProcessError:
            return

def on_signal(signum, frame):
    end_tree()
    os._exit(128 + signum)

for s in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
    signal.signal(s, on_signal)
if os.getppid() != int(sys.argv[2]):
    on_signal(signal.SIGTERM, None)  # the harness died before the guard was set
child = os.fork()
if child == 0:
    for s in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(s, signal.SIG_DFL)
    try:
        os.execvp(sys.argv[3], sys.argv[3:])
    except OSError as e:
        os.write(2, ("cannot start %s: %s\n" % (sys.argv[3], e.strerror)).encode())
        os._exit(127)
while True:
    got, status = os.waitpid(-1, 0)
    if got == child:
        break
end_tree()
if os.WIFSIGNALED(status):
    sig = os.WTERMSIG(status)
    if sig not in (signal.SIGKILL, signal.SIGSTOP):
        signal.signal(sig, signal.SIG_DFL)
    os.kill(me, sig)
os._exit(os.WEXITSTATUS(status))
"""


def _tree_guarded(argv: list[str]) -> list[str]:
    """argv run under the tree guard (see _TREE_GUARD)."""
    return [sys.executable, "-I", "-S", "-c", _TREE_GUARD, TREE_GUARD_MARK, str(os.getpid()), *argv]


# Every command the harness starts carries this variable, set to a token of its own run: what is
# left with that token once the command has ended (an engine's helper that moved to a session of
# its own) is ended too, wherever it was reparented.
TREE_ENV = "KITE_HARNESS_TREE"
_runs = 0


def _environ_has(pid: str, needle: bytes) -> bool:
    try:
        with open(f"/proc/{pid}/environ", "rb") as f:
            return needle in b"\0" + f.read()
    except OSError:
        return False


def end_strays(token: str) -> list[int]:
    """Linux: kill (SIGKILL) every process whose environment holds TREE_ENV=token, reaping those
    that are the harness's children; returns the pids ended."""
    if not os.path.isdir("/proc"):
        return []
    needle = f"\0{TREE_ENV}={token}\0".encode()
    ended: list[int] = []
    for _ in range(100):  # a stray may fork while it is being ended: until none is left
        found = [int(n) for n in os.listdir("/proc") if n.isdigit() and _environ_has(n, needle)]
        found = [p for p in found if not _zombie(p) or _reap(p)]
        if not found:
            break
        for pid in found:
            try:
                os.kill(pid, signal.SIGKILL)
            except OSError:
                pass
            _reap(pid)
            ended.append(pid)
    return sorted(set(ended))


def _zombie(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            return f.read().rsplit(b")", 1)[1].split()[0] == b"Z"
    except (OSError, IndexError):
        return True


def _reap(pid: int) -> bool:
    """Wait for pid if it is the harness's child (False either way: nothing left to kill)."""
    try:
        os.waitpid(pid, 0)
    except (ChildProcessError, OSError):
        pass
    return False


def _last_line(text: str) -> str:
    lines = [ln.strip() for ln in text.strip().splitlines() if ln.strip()]
    return lines[-1][:200] if lines else ""


def _signame(num: int) -> str:
    try:
        return signal.Signals(num).name
    except ValueError:
        return f"signal {num}"


def run_process(argv: list[str], env_overlay: dict[str, str] | None = None, *, timeout: float = 120.0,
                log_prefix: Path | None = None, cwd: Path | None = None,
                base_env: dict[str, str] | None = None, guard_group: bool = False) -> ProcResult:
    """Run argv (never through a shell). stdout/stderr go to files `<log_prefix>.stdout/.stderr`
    (unnamed temporary files when log_prefix is None) and are also returned as text. POSIX: reaped
    with wait4 (exact peak RSS and CPU time); elsewhere psutil samples them. guard_group (POSIX),
    for commands that start their own children (builds): should the harness die, a guard process
    ends the command's whole process group."""
    global _runs
    overlay = dict(env_overlay or {})
    env = dict(os.environ if base_env is None else base_env)
    env.update(overlay)
    _runs += 1
    token = f"{os.getpid()}.{_runs}"
    env[TREE_ENV] = token
    tree = guard_group and sys.platform.startswith("linux")
    if tree and shutil.which(argv[0]) is None:
        res = ProcResult(list(argv), overlay, None, None, False, 0.0, None, None, None, None)
        res.error = f"not found: {argv[0]}"
        return res
    out_path = err_path = None
    if log_prefix is not None:
        log_prefix.parent.mkdir(parents=True, exist_ok=True)
        out_path = Path(str(log_prefix) + ".stdout")
        err_path = Path(str(log_prefix) + ".stderr")
        Path(str(log_prefix) + ".cmd").write_text(
            "".join(f"{k}={v}\n" for k, v in overlay.items()) + " ".join(_quote(a) for a in argv) + "\n",
            encoding="utf-8")
    t0 = time.perf_counter()
    res = ProcResult(list(argv), overlay, None, None, False, 0.0, None, None,
                     str(out_path) if out_path else None, str(err_path) if err_path else None)
    # files, never pipes: no deadlock on large output, and the POSIX path can reap with wait4
    fo = open(out_path, "w+b") if out_path else tempfile.TemporaryFile()
    fe = open(err_path, "w+b") if err_path else tempfile.TemporaryFile()
    try:
        try:
            # the tree guard must outlive the harness to end the tree: it sets its own death signal
            proc = subprocess.Popen(_tree_guarded(argv) if tree else argv, stdin=subprocess.DEVNULL, stdout=fo,
                                    stderr=fe, env=env, cwd=str(cwd) if cwd else None,
                                    start_new_session=(os.name != "nt"),
                                    preexec_fn=_die_with_parent if sys.platform.startswith("linux") and not tree
                                    else None)
        except FileNotFoundError:
            res.error = f"not found: {argv[0]}"
            return res
        except PermissionError:
            res.error = f"not executable: {argv[0]}"
            return res
        except OSError as e:
            res.error = f"cannot start {argv[0]}: {e.strerror or e}"
            return res
        try:
            if hasattr(os, "wait4"):
                _wait_posix(proc, res, timeout, tree)
            else:
                _wait_portable(proc, res, timeout)
        finally:
            end_strays(token)
        res.wall_s = time.perf_counter() - t0
        for f, attr in ((fo, "stdout"), (fe, "stderr")):
            text, size = kept_text(f)
            setattr(res, attr, text)
            setattr(res, f"{attr}_bytes", size)
    finally:
        fo.close()
        fe.close()
    return res


def _kill_group(proc: subprocess.Popen[bytes], tree: bool = False) -> None:
    """End the command: its tree guard (which ends the whole tree), else its process group."""
    try:
        if tree:
            os.kill(proc.pid, signal.SIGTERM)
        elif os.name != "nt":
            os.killpg(proc.pid, signal.SIGKILL)
        else:
            proc.kill()
    except (ProcessLookupError, PermissionError, OSError):
        pass


def _read_hwm_kb(pid: int) -> int | None:
    """Linux: the process's peak resident set since exec (VmHWM), in kB."""
    try:
        with open(f"/proc/{pid}/status", "rb") as f:
            for line in f:
                if line.startswith(b"VmHWM:"):
                    return int(line.split()[1])
    except (OSError, ValueError):
        pass
    return None


class _PeakSampler(threading.Thread):
    """Samples the child's peak RSS every few ms until stopped (wait4's ru_maxrss alone is not enough:
    it includes the harness's own peak from before exec). Linux reads VmHWM; elsewhere psutil."""

    def __init__(self, pid: int, interval: float = 0.005):
        super().__init__(daemon=True)
        self.pid = pid
        self.interval = interval
        self.stop = threading.Event()
        self.peak_kb = 0
        self.proc_fs = os.path.exists(f"/proc/{pid}/status")

    def sample(self, ps: Any = None) -> None:
        """One reading (VmHWM, else psutil's RSS) into peak_kb."""
        if ps is None:
            kb = _read_hwm_kb(self.pid)
        else:
            try:
                kb = ps.memory_info().rss // 1024
            except Exception:  # noqa: BLE001
                kb = None
        if kb:
            self.peak_kb = max(self.peak_kb, kb)

    def run(self) -> None:
        ps = None
        if not self.proc_fs:
            try:
                import psutil

                ps = psutil.Process(self.pid)
            except Exception:  # noqa: BLE001 - no psutil or process gone: no figure
                return
        while True:
            self.sample(ps)
            if self.stop.wait(self.interval):
                return


def _wait_posix(proc: subprocess.Popen[bytes], res: ProcResult, timeout: float, tree: bool = False) -> None:
    """Reap with wait4: exact CPU time from the kernel, no polling delay; peak RSS sampled."""
    fired = threading.Event()
    sampler = _PeakSampler(proc.pid)
    if sampler.proc_fs:
        sampler.sample()  # one reading now: a figure even when the thread is first scheduled too late
    sampler.start()

    def on_timeout() -> None:
        fired.set()
        _kill_group(proc, tree)

    timer = threading.Timer(timeout, on_timeout)
    timer.daemon = True
    timer.start()
    try:
        while True:
            try:
                _, status, ru = os.wait4(proc.pid, 0)
                break
            except InterruptedError:
                continue
    except BaseException:  # Ctrl-C, SIGTERM: the command runs in its own session, so end it here
        _kill_group(proc, tree)
        try:
            proc.wait(timeout=60)
        except subprocess.TimeoutExpired:  # a guard that does not end: its group at least
            _kill_group(proc)
            proc.wait()
        raise
    finally:
        timer.cancel()
        sampler.stop.set()
    if fired.is_set():
        res.timed_out = True
    # a child's own children may still hold the process group: end them too
    if os.name != "nt":
        try:
            os.killpg(proc.pid, 0)
            _kill_group(proc)
        except (ProcessLookupError, PermissionError, OSError):
            pass
    if os.WIFSIGNALED(status):
        res.signal = _signame(os.WTERMSIG(status))
        res.returncode = -os.WTERMSIG(status)
    else:
        res.returncode = os.WEXITSTATUS(status)
    proc.returncode = res.returncode
    res.cpu_s = ru.ru_utime + ru.ru_stime
    sampler.join(1.0)
    # ru_maxrss also counts the harness's own peak (the child shares its memory until exec): when it
    # is above that, it is the engine's exact peak; else the samples are the best figure there is
    try:
        import resource

        own_peak_kb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    except (ImportError, OSError):
        own_peak_kb = None
    if own_peak_kb is not None and ru.ru_maxrss > own_peak_kb:
        res.peak_rss_mb = ru.ru_maxrss / 1024.0
    else:
        res.peak_rss_mb = sampler.peak_kb / 1024.0 if sampler.peak_kb else None
    if res.timed_out:
        res.signal = None


def _wait_portable(proc: subprocess.Popen[bytes], res: ProcResult, timeout: float) -> None:
    """psutil sampling where wait4 is missing (Windows)."""
    peak = 0
    cpu = None
    deadline = time.monotonic() + timeout
    try:
        import psutil

        p = psutil.Process(proc.pid)
    except Exception:  # noqa: BLE001 - psutil missing or process gone: no resource figures
        p = None
    while True:
        try:
            proc.wait(timeout=0.02)
            break
        except subprocess.TimeoutExpired:
            pass
        if p is not None:
            try:
                peak = max(peak, p.memory_info().rss)
                t = p.cpu_times()
                cpu = t.user + t.system
            except Exception:  # noqa: BLE001
                pass
        if time.monotonic() > deadline:
            res.timed_out = True
            _kill_group(proc)
            proc.wait()
            break
    res.returncode = proc.returncode
    if proc.returncode is not None and proc.returncode < 0 and not res.timed_out:
        res.signal = _signame(-proc.returncode)
    res.peak_rss_mb = peak / 2**20 if peak else None
    res.cpu_s = cpu


def _quote(a: str) -> str:
    import shlex

    return shlex.quote(a)


_PASS_RE = re.compile(r"^\s*(\d+) passed, (\d+) failed\s*$", re.M)


def closing_counts(text: str) -> tuple[int, int] | None:
    """The selftest's closing line `N passed, M failed` (the last such line)."""
    found = _PASS_RE.findall(text)
    if not found:
        return None
    n, m = found[-1]
    return int(n), int(m)


class Interrupted(KeyboardInterrupt):
    """SIGTERM or SIGHUP to the harness, or its parent's death: handled as Ctrl-C is (the command
    tree ended, the report written as interrupted), with the signal's number for the exit status."""

    def __init__(self, signum: int):
        super().__init__(_signame(signum))
        self.signum = signum


def _raise_interrupted(signum: int, frame: Any) -> None:
    raise Interrupted(signum)


class interrupts:
    """While active (main thread): SIGTERM and SIGHUP raise Interrupted, and on Linux the death of
    the harness's parent sends it SIGTERM (PR_SET_PDEATHSIG). The previous handlers come back after."""

    def __enter__(self) -> interrupts:
        self.saved: dict[int, Any] = {}
        if threading.current_thread() is not threading.main_thread():
            return self
        for sig in (getattr(signal, "SIGTERM", None), getattr(signal, "SIGHUP", None)):
            if sig is not None:
                self.saved[sig] = signal.signal(sig, _raise_interrupted)
        self.parent = os.getppid()
        _set_parent_death_signal(signal.SIGTERM)
        if os.getppid() != self.parent:  # the parent died in between
            raise Interrupted(signal.SIGTERM)
        return self

    def __exit__(self, *exc: object) -> None:
        if self.saved:
            _set_parent_death_signal(0)
        for sig, handler in self.saved.items():
            signal.signal(sig, handler)


def _set_parent_death_signal(sig: int) -> None:
    if not sys.platform.startswith("linux"):
        return
    import ctypes

    try:
        ctypes.CDLL(None, use_errno=True).prctl(1, int(sig))  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        pass
