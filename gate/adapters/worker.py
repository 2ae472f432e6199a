"""The one-shot adapter worker: a stand-alone script run as its own Python process.

It is started by `gate.adapters.executor` as ``python -I -S -B worker.py MEMORY_MB`` with an empty
environment, cwd ``/``, no inherited file descriptors and a new session. It imports nothing of
the gate (only the standard library), so a warm worker is cheap and holds no gate state.

Protocol (one line of JSON each way, UTF-8):

1. start-up: set resource limits (address space, CPU seconds, file size 0, no new processes),
   pre-import the modules adapters commonly use, move stdout aside (the adapter's `print`
   goes nowhere), then write ``{"ready": true}``;
2. read one job ``{"module", "filename", "source", "input", "path"}`` (``path``: the gate's
   import path, appended so an adapter can import its own package; no ``site`` start-up cost),
   then install the capability audit hook, before any adapter code runs;
3. compile the exact source bytes the gate hashed (never re-read from disk), execute them as a
   fresh module, call ``run(input)`` and write one result line, then exit 0. Never reused.

Result lines: ``{"ok": true, "output": …, "denied": []}`` or ``{"ok": false, "error":
"exception"|"memory"|"unserializable", "type": …, "denied": []}``.

Capability enforcement (Python audit hooks, PEP 578) denies: every ``socket.*`` event,
opening any file for writing (``open`` with a w/a/x/+ mode or write/create/truncate flags,
including by descriptor number), opening for reading outside the code (see `_read_roots`),
file-system mutations, new processes (``subprocess.Popen``, ``os.system``, ``os.exec*``,
``os.posix_spawn``, ``os.spawn*``, ``os.fork``), signals to other processes, ``ctypes``, new
interpreters, crafted code objects, ``gc`` object walks, importing modules that reach the OS
without audit events of their own (``_posixsubprocess``, ``cffi``, …) or any C extension from
outside the standard library, and changing resource limits.

SECURITY: the first refused event ends the worker at once with exit status
`DENIED_EXIT_STATUS` after a report line, so an adapter cannot catch a refusal and then write a
clean result; the gate discards the output of a worker that exits with that status. The hook
keeps every value it uses in its own closure (immutable values and built-ins bound at install
time): rebinding this module's globals, ``builtins`` or ``os`` attributes does not change it.
These are guard rails for operator-trusted code, not a sandbox for hostile code.
"""

from __future__ import annotations

import collections  # noqa: F401 - pre-imported: adapters commonly use it, and then it costs no job time
import datetime  # noqa: F401 - pre-imported, as collections
import json
import os
import resource
import sys
import zoneinfo

# Types for the checker only: importing `typing` would add milliseconds to every worker start.
TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable
    from typing import Any, TypedDict

    class Job(TypedDict):
        """The one job line the gate sends (`gate.adapters.AdapterRegistry.run`)."""

        module: str
        filename: str
        source: str
        input: dict[str, Any]  # the caller's adapter input, as its schema admitted it
        path: list[str]

    class WorkerMessage(TypedDict, total=False):
        """A line the worker writes: `{ready, pid}` at start-up, then one result (`ok` and
        `output`, or `error` and the exception's `type`; `denied` in both); the gate adds
        `duration_ms` (`gate.adapters.executor`)."""

        ready: bool
        pid: int
        ok: bool
        output: Any  # what the adapter's `run` returned, checked against its output schema by the gate
        error: str
        type: str
        denied: list[str]
        duration_ms: float

    AuditArgs = tuple[Any, ...]
    Reply = Callable[[WorkerMessage], None]

DENIED_EXIT_STATUS = 86  # the worker's exit status after a refused capability (gate.adapters.executor)
_WRITE_MODE_CHARS = frozenset("wax+")
_DENIED_PREFIXES = ("socket.", "ctypes.", "subprocess.", "os.exec", "os.spawn", "os.posix_spawn",
                    "shutil.", "winreg.", "_winapi.", "msvcrt.")
_DENIED_EVENTS = frozenset({
    "os.system", "os.fork", "os.forkpty", "os.startfile", "os.kill", "os.killpg", "pty.spawn",
    "os.remove", "os.rename", "os.rmdir", "os.mkdir", "os.chmod", "os.chown", "os.link",
    "os.symlink", "os.truncate", "os.utime", "os.setxattr", "os.removexattr", "os.chflags",
    "os.lchflags", "os.lchmod", "os.mkfifo", "os.mknod",
    "resource.setrlimit", "resource.prlimit", "sys.remote_exec", "webbrowser.open",
    "sqlite3.connect", "sqlite3.enable_load_extension", "sqlite3.load_extension",
    # a sub-interpreter has no audit hooks of ours; crafted code objects can corrupt memory
    "cpython.PyInterpreterState_New", "code.__new__",
    # reaching the hook's own function object through the collector would let its bindings change
    "gc.get_objects", "gc.get_referrers", "gc.get_referents",
})
# Modules that reach the operating system without raising an audit event of their own (process
# creation, shared memory, native calls, test back doors, a Tcl interpreter): importing them is
# refused. Any C extension module from outside the standard library is refused as well (cffi and
# other native bindings bypass every hook).
_DENIED_MODULES = frozenset({
    "_posixsubprocess", "_ctypes", "_ctypes_test", "_cffi_backend", "cffi", "_testcapi",
    "_testinternalcapi", "_testbuffer", "_testclinic", "_testimportmultiple", "_testmultiphase",
    "_testsinglephase", "_xxsubinterpreters", "_xxinterpchannels", "_xxinterpqueues", "_interpreters",
    "_interpchannels", "_interpqueues", "_xxtestfuzz", "_posixshmem", "_multiprocessing", "_tkinter",
    "readline", "syslog", "ossaudiodev", "_lsprof",
})
_REPORT_CHARS = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._:-")


def _set_limits(memory_bytes: int) -> None:
    resource.setrlimit(resource.RLIMIT_AS, (memory_bytes, memory_bytes))
    resource.setrlimit(resource.RLIMIT_CPU, (2, 3))       # backstop; the gate kills at 1,000 ms
    resource.setrlimit(resource.RLIMIT_FSIZE, (0, 0))     # no file may grow, whatever the hook says
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    if hasattr(resource, "RLIMIT_NPROC"):
        resource.setrlimit(resource.RLIMIT_NPROC, (0, 0))  # fork fails even past the hook (not for root)


def _directory(path: str) -> str:
    path = os.path.normpath(os.path.abspath(path))
    return path if path.endswith("/") else path + "/"


def _read_roots(job: Job) -> tuple[tuple[str, ...], tuple[str, ...], tuple[str, ...]]:
    """(directories any file of which may be read, directories whose .py/.pyc files may be read,
    the standard library's extension directories), computed from the job before any adapter
    code runs."""
    stdlib = os.path.dirname(os.__file__)
    entries = [entry for entry in job.get("path", ()) if isinstance(entry, str) and entry.startswith("/")]
    any_file = [_directory(os.path.dirname(job["filename"]))]
    any_file += [_directory(entry) for entry in zoneinfo.TZPATH if entry.startswith("/")]
    any_file += [_directory(os.path.join(entry, "tzdata")) for entry in entries]
    code = [_directory(stdlib)] + [_directory(entry) for entry in entries]
    # The standard library's extension directory, wherever this build keeps it: lib-dynload
    # beside os.py, and the folder of every extension the worker itself loaded at start-up
    # (before the job, only the standard library is importable: -I -S).
    dynload = {_directory(os.path.join(stdlib, "lib-dynload"))}
    for module in list(sys.modules.values()):
        filename = getattr(module, "__file__", None)
        if isinstance(filename, str) and filename.endswith(".so"):
            dynload.add(_directory(os.path.dirname(filename)))
    return tuple(any_file), tuple(code), tuple(sorted(dynload))


def _readable_check(read_any: tuple[str, ...], read_code: tuple[str, ...]) -> Callable[[Any], bool]:
    """`readable(path)`: whether `open` may read `path`: any file under `read_any`, .py/.pyc
    files under `read_code`, an already open descriptor; never a relative path, a path with
    `.` or `..` parts or a path-like object."""
    type_of = type

    def readable(path: Any) -> bool:  # Any: whatever the audited call was given
        kind = type_of(path)
        if kind is int:
            return True  # an already open descriptor: the worker holds only its pipes and /dev/null
        if kind is bytes:
            path = path.decode("utf-8", "surrogateescape")
        elif kind is not str:
            return False  # a path-like object could answer differently to the hook and to open()
        if not path.startswith("/"):
            return False
        parts = path.split("/")
        if ".." in parts or "." in parts:
            return False
        allowed: bool = path.startswith(read_any) or (path.startswith(read_code) and path.endswith((".py", ".pyc")))
        return allowed

    return readable


def _open_check(readable: Callable[[Any], bool]) -> Callable[[AuditArgs], bool]:
    """`refused(args)` for an `open` event: a write mode or write flags, or an unreadable path."""
    write_chars = _WRITE_MODE_CHARS
    write_mask = os.O_WRONLY | os.O_RDWR | os.O_APPEND | os.O_CREAT | os.O_TRUNC
    type_of, length = type, len

    def refused(args: AuditArgs) -> bool:
        mode: Any = args[1] if length(args) > 1 else None
        flags: Any = args[2] if length(args) > 2 else 0
        if type_of(mode) is str and not write_chars.isdisjoint(mode):
            return True
        if type_of(flags) is int and flags & write_mask:
            return True
        return not readable(args[0] if args else None)

    return refused


def _import_check(dynload: tuple[str, ...]) -> Callable[[AuditArgs], bool]:
    """`refused(args)` for an `import` event: a denied module (by any component of its name, or
    by its file's name) or an extension module from outside the standard library."""
    denied_modules = _DENIED_MODULES
    type_of, length = type, len

    def refused(args: AuditArgs) -> bool:
        module: Any = args[0] if args else None
        if type_of(module) is not str or not denied_modules.isdisjoint(module.split(".")):
            return True  # any component: a spec named "x._testcapi" still runs PyInit__testcapi
        filename: Any = args[1] if length(args) > 1 else None
        if filename is not None:
            if type_of(filename) is not str or not filename.startswith(dynload):
                return True
            if filename.rpartition("/")[2].partition(".")[0] in denied_modules:
                return True  # the file, whatever name its spec was given
        return False

    return refused


def _refusal_check(read_any: tuple[str, ...], read_code: tuple[str, ...],
                   dynload: tuple[str, ...]) -> Callable[[str, AuditArgs], str | None]:
    """`refusal(event, args)`: the refused event's name, or None when the event is allowed."""
    denied_events, denied_prefixes = _DENIED_EVENTS, _DENIED_PREFIXES
    open_refused = _open_check(_readable_check(read_any, read_code))
    import_refused = _import_check(dynload)

    def refusal(event: str, args: AuditArgs) -> str | None:
        if event in denied_events or event.startswith(denied_prefixes):
            return event
        if event == "open":
            return event if open_refused(args) else None
        if event == "import":
            return event if import_refused(args) else None
        return None

    return refusal


def _install_hook(report_fd: int, read_any: tuple[str, ...], read_code: tuple[str, ...],
                  dynload: tuple[str, ...]) -> None:
    """Install the capability hook. A refused event ends the worker at once (exit status
    DENIED_EXIT_STATUS, after one report line on `report_fd`): the adapter can neither catch the
    refusal nor answer afterwards. Every value the hook and its checks use is bound here and in
    the `_*_check` factories, immutable or a built-in, so an adapter that rebinds this module's
    globals, `builtins` or `os` attributes changes nothing."""
    refusal = _refusal_check(read_any, read_code, dynload)
    report_chars, status = _REPORT_CHARS, DENIED_EXIT_STATUS
    write, exit_now = os.write, os._exit

    def hook(event: str, args: AuditArgs) -> None:
        reason = refusal(event, args)
        if reason is None:
            return
        name = "".join([ch for ch in reason[:80] if ch in report_chars])
        try:
            write(report_fd, ('\n{"ok":false,"error":"denied","denied":["' + name + '"]}\n').encode("ascii"))
        finally:
            exit_now(status)

    sys.addaudithook(hook)


def _detach_stdio() -> int:
    """Move stdout and stderr to /dev/null (the adapter's `print` goes nowhere); the returned
    descriptor is the original stdout, kept for the result lines."""
    result_fd = os.dup(1)
    null_fd = os.open(os.devnull, os.O_WRONLY)
    os.dup2(null_fd, 1)
    os.dup2(null_fd, 2)
    os.close(null_fd)
    return result_fd


def _replier(result_fd: int) -> Reply:
    """`reply(message)`: one line of ASCII JSON on `result_fd`, written whole. Like the hook, it
    binds what it calls before any adapter code runs."""
    dumps, write = json.dumps, os.write

    def reply(message: WorkerMessage) -> None:
        data = (dumps(message, ensure_ascii=True, allow_nan=False, separators=(",", ":")) + "\n").encode()
        view = memoryview(data)
        while view:
            view = view[write(result_fd, view):]

    return reply


def _run_job(job: Job, reply: Reply) -> None:
    """Compile the exact source the gate hashed as a fresh module, call `run(input)` and reply
    with its output or with what went wrong (never a partial output)."""
    output: Any
    message: WorkerMessage | None
    try:
        module = type(sys)(job["module"])
        module.__file__ = job["filename"]
        module.__package__ = job["module"].rpartition(".")[0]
        code = compile(job["source"], job["filename"], "exec", dont_inherit=True)
        exec(code, module.__dict__)  # noqa: S102 - the operator-trusted adapter source, under the hook
        output = module.run(job["input"])
        message = {"ok": True, "output": output, "denied": []}
        try:
            reply(message)
        except (TypeError, ValueError) as exc:
            reply({"ok": False, "error": "unserializable", "type": type(exc).__name__, "denied": []})
    except MemoryError:
        output = message = None  # free what the adapter built before replying
        reply({"ok": False, "error": "memory", "type": "MemoryError", "denied": []})
    except BaseException as exc:  # noqa: BLE001 - the adapter failed: report it, never a partial output
        reply({"ok": False, "error": "exception", "type": type(exc).__name__, "denied": []})


def main() -> None:
    memory_mb = int(sys.argv[1]) if len(sys.argv) > 1 else 256
    # The gate starts us with an empty environment; the interpreter's own C-locale coercion
    # (PEP 538) may still add LC_CTYPE. Adapters see nothing.
    os.environ.clear()
    result_fd = _detach_stdio()
    _set_limits(memory_mb * 1024 * 1024)
    reply = _replier(result_fd)
    reply({"ready": True, "pid": os.getpid()})
    line = sys.stdin.buffer.readline()
    if not line:
        os._exit(0)
    job = json.loads(line)
    read_any, read_code, dynload = _read_roots(job)
    _install_hook(result_fd, read_any, read_code, dynload)  # before any adapter code runs
    sys.path.extend(entry for entry in job.get("path", ()) if entry not in sys.path)
    _run_job(job, reply)
    os._exit(0)


if __name__ == "__main__":
    main()
