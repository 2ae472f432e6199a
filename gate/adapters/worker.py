"""The one-shot adapter worker: a stand-alone script run as its own Python process.

It is started by `gate.adapters.executor` as ``python -I -S -B worker.py MEMORY_MB`` with an empty
environment, cwd ``/``, no inherited file descriptors and a new session. It imports nothing of
the gate (only the standard library), so a warm worker is cheap and holds no gate state.

Protocol (one line of JSON each way, UTF-8):

1. start-up: set resource limits (address space, CPU seconds, file size 0, no new processes),
   pre-import the modules adapters commonly use, move stdout aside (the adapter's `print`
   goes nowhere), install the capability audit hook, then write ``{"ready": true}``;
2. read one job ``{"module", "filename", "source", "input", "path"}`` (``path``: the gate's
   import path, appended so an adapter can import its own package; no ``site`` start-up cost);
3. compile the exact source bytes the gate hashed (never re-read from disk), execute them as a
   fresh module, call ``run(input)`` and write one result line, then exit. Never reused.

Result lines: ``{"ok": true, "output": …, "denied": []}`` or ``{"ok": false, "error":
"exception"|"memory"|"unserializable", "type": …, "denied": […]}``. ``denied`` lists every
capability the hook refused, even when the adapter caught the exception: the gate fails the
run whenever it is non-empty.

Capability enforcement (Python audit hooks, PEP 578) denies: every ``socket.*`` event
(creation, connect, bind, name resolution), opening any file for writing (``open`` with a
w/a/x/+ mode or write/create/truncate flags, including by descriptor number), file-system
mutations (remove, rename, mkdir, chmod, …), new processes (``subprocess.Popen``,
``os.system``, ``os.exec*``, ``os.posix_spawn``, ``os.spawn*``, ``os.fork``), signals to
other processes, ``ctypes`` (which could bypass all of this) and changing resource limits.
Reading files stays possible (adapters may import standard-library modules).
"""

import sys

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
})


def _set_limits(memory_bytes):
    import resource

    resource.setrlimit(resource.RLIMIT_AS, (memory_bytes, memory_bytes))
    resource.setrlimit(resource.RLIMIT_CPU, (2, 3))       # backstop; the gate kills at 1,000 ms
    resource.setrlimit(resource.RLIMIT_FSIZE, (0, 0))     # no file may grow, whatever the hook says
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    if hasattr(resource, "RLIMIT_NPROC"):
        resource.setrlimit(resource.RLIMIT_NPROC, (0, 0))  # fork fails even past the hook


def _write_flags(flags):
    import os

    mask = os.O_WRONLY | os.O_RDWR | os.O_APPEND | os.O_CREAT | os.O_TRUNC
    return isinstance(flags, int) and bool(flags & mask)


def _install_hook(denied):
    def hook(event, args):
        refused = event in _DENIED_EVENTS or event.startswith(_DENIED_PREFIXES)
        if not refused and event == "open":
            mode = args[1] if len(args) > 1 else None
            flags = args[2] if len(args) > 2 else 0
            refused = (isinstance(mode, str) and bool(_WRITE_MODE_CHARS.intersection(mode))) \
                or _write_flags(flags)
        if refused:
            if len(denied) < 32:
                denied.append(event)
            raise PermissionError(f"capability denied in a trusted adapter worker: {event}")

    sys.addaudithook(hook)


def main():
    import json
    import os

    memory_mb = int(sys.argv[1]) if len(sys.argv) > 1 else 256
    # Modules adapters commonly use, imported before the limits so they cost no job time.
    import datetime, decimal, math, re, statistics, hashlib, fractions, functools, itertools  # noqa: E401,F401
    import collections, dataclasses, enum, typing, calendar, zoneinfo  # noqa: E401,F401

    # The gate starts us with an empty environment; the interpreter's own C-locale coercion
    # (PEP 538) may still add LC_CTYPE. Adapters see nothing.
    os.environ.clear()
    result_fd = os.dup(1)
    null_fd = os.open(os.devnull, os.O_WRONLY)
    os.dup2(null_fd, 1)
    os.dup2(null_fd, 2)
    os.close(null_fd)
    _set_limits(memory_mb * 1024 * 1024)
    denied = []
    _install_hook(denied)

    def reply(message):
        data = (json.dumps(message, ensure_ascii=True, allow_nan=False, separators=(",", ":")) + "\n").encode()
        view = memoryview(data)
        while view:
            view = view[os.write(result_fd, view):]

    reply({"ready": True, "pid": os.getpid()})
    line = sys.stdin.buffer.readline()
    if not line:
        os._exit(0)
    job = json.loads(line)
    sys.path.extend(entry for entry in job.get("path", ()) if entry not in sys.path)
    try:
        module = type(sys)(job["module"])
        module.__file__ = job["filename"]
        module.__package__ = job["module"].rpartition(".")[0]
        code = compile(job["source"], job["filename"], "exec", dont_inherit=True)
        exec(code, module.__dict__)
        output = module.run(job["input"])
        message = {"ok": True, "output": output, "denied": denied}
        try:
            reply(message)
        except (TypeError, ValueError) as exc:
            reply({"ok": False, "error": "unserializable", "type": type(exc).__name__, "denied": denied})
    except MemoryError:
        output = message = None
        reply({"ok": False, "error": "memory", "type": "MemoryError", "denied": denied})
    except BaseException as exc:  # the adapter failed: report it, never a partial output
        reply({"ok": False, "error": "exception", "type": type(exc).__name__, "denied": denied})
    os._exit(0)


if __name__ == "__main__":
    main()
