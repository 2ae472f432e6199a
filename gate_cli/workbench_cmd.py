"""`gate workbench`: serve the policy workbench (Panel) over the dataset and the ledger.

This module is the composition root of the workbench: it reads the settings, opens the ledger
and the signing setup, decides the access policy from the bind address, and hands them to
`workbench.app.server`. It fails with one clear line (exit 2) for an unusable configuration.
"""

from __future__ import annotations

import argparse
import atexit
import contextlib
import getpass
import ipaddress
import logging
import os
import signal
import subprocess
import sys
import threading
from pathlib import Path
from typing import TYPE_CHECKING

from gate.settings import Settings
from gate_cli.cluster_opt import add_cluster_argument
from gate_cli.context import CliError
from gate_cli.help import Subparsers

if TYPE_CHECKING:
    from workbench.app.oidc_settings import OIDCSettings
    from workbench.app.store import WorkbenchStore

DEFAULT_PORT = 5006


def add_workbench_parser(sub: Subparsers) -> None:
    p = sub.add_parser(
        "workbench",
        description="Serve the Panel workbench over the Parquet dataset and the ledger. On a loopback "
                    "address (the default) it serves without sign-in, as the local operator; on any other "
                    "address it refuses to start unless sign-in (--oidc-issuer or --basic-auth) and --grants "
                    "are given.",
        formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    p.add_argument("--host", default="127.0.0.1", help="bind address")
    p.add_argument("--port", type=int, default=DEFAULT_PORT, help="port")
    p.add_argument("--dataset", default=None,
                   help="Parquet dataset (path or URL); default $GATE_HOME/dataset")
    p.add_argument("--basic-auth", type=Path, default=None,
                   help='password file {"user": "scrypt$…"} written by `gate workbench-passwd`: sign-in '
                        "on the login page, failed sign-ins throttled; plaintext entries are refused "
                        "(default: none; needed on a non-loopback --host)")
    p.add_argument("--grants", type=Path, default=None,
                   help='JSON file {"users": {NAME: {SCOPE: [ROLE, ...]}}, "groups": {GROUP: {...}}} ("*" for '
                        "every scope; roles viewer, author, releaser, approver, reviewer, admin): each signed-in "
                        "person's roles per scope (docs/workbench.md; default: none; needed with sign-in)")
    add_oidc_arguments(p)
    p.add_argument("--allow-origin", action="append", default=[], metavar="HOST:PORT",
                   help="a name browsers reach the workbench under when it is not on loopback "
                        "(repeatable; its websocket and sign-in form refuse other origins; default: none)")
    p.add_argument("--trusted-proxy", action="append", default=[], metavar="ADDRESS",
                   help="the address or network of a TLS-terminating proxy whose X-Forwarded-Proto is believed "
                        "(repeatable): a request it says came over https gets Secure cookies and is judged as https "
                        "(default: none; the header is ignored)")
    add_cluster_argument(p, "the full-history dry-run (default: GATE_CLUSTER when set)")
    p.add_argument("--refresh", action="store_true",
                   help="export what is new in the ledger into the dataset before serving")
    p.add_argument("--allow-unsigned", action="store_true",
                   help="show a dataset whose manifest carries no signature (synthetic or local data); every "
                        "page then says UNSIGNED (default: pages show a refusal instead of its figures)")
    p.add_argument("--allow-stale", action="store_true",
                   help="let the Migration page sign a dry-run over a dataset behind the live ledger by more than "
                        "GATE_DATASET_STALE_AFTER (default: its export is refused, DATASET_STALE)")
    p.add_argument("--log-editor", action="store_true",
                   help="log to standard error each change the draft editor sends the server: what changed, the "
                        "text's length and the start of its SHA-256, never the text (default: not logged)")
    p.set_defaults(func=cmd_workbench)


OIDC_SECRET_ENV = "GATE_OIDC_CLIENT_SECRET"  # noqa: S105  # the variable's name, not a secret


def add_oidc_arguments(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group("sign-in through an OpenID Connect provider (docs/workbench.md)")
    g.add_argument("--oidc-issuer", default=None, metavar="URL",
                   help="the provider's issuer URL (its /.well-known/openid-configuration is read at start; "
                        "https, or http on loopback) (default: none)")
    g.add_argument("--oidc-client-id", default=None, metavar="ID",
                   help="this workbench's client id at the provider (required with --oidc-issuer; default: none)")
    g.add_argument("--oidc-client-secret-file", type=Path, default=None, metavar="FILE",
                   help=f"a file holding the client secret (default: ${OIDC_SECRET_ENV}; neither: a public "
                        "client, PKCE alone)")
    g.add_argument("--oidc-groups-claim", default="groups", metavar="CLAIM",
                   help="the ID token claim listing the person's groups (the grants file's \"groups\")")
    g.add_argument("--oidc-scopes", default="openid profile", metavar="SCOPES",
                   help="the scopes asked for, space-separated (must include openid; add the one that "
                        "releases the groups claim where the provider needs it)")
    g.add_argument("--oidc-redirect-uri", default=None, metavar="URL",
                   help="the redirect URI registered at the provider (default: the URL the browser used, "
                        "path /login)")


def oidc_settings(args: argparse.Namespace) -> OIDCSettings | None:
    """The OIDCSettings `args` ask for (None without --oidc-issuer), or ValueError with the line to print."""
    from workbench.app.oidc_settings import OIDCSettings

    if args.oidc_issuer is None:
        if args.oidc_client_id or args.oidc_client_secret_file:
            raise ValueError("--oidc-client-id and --oidc-client-secret-file need --oidc-issuer")
        return None
    if not args.oidc_client_id:
        raise ValueError("--oidc-issuer needs --oidc-client-id")
    scopes = tuple(args.oidc_scopes.split())
    if "openid" not in scopes:
        raise ValueError("--oidc-scopes must include openid")
    secret = os.environ.get(OIDC_SECRET_ENV) or None
    if args.oidc_client_secret_file is not None:
        try:
            secret = args.oidc_client_secret_file.read_text(encoding="utf-8").strip() or None
        except OSError as exc:
            raise ValueError(f"--oidc-client-secret-file {args.oidc_client_secret_file}: {exc.strerror or exc}") from None
        if secret is None:
            raise ValueError(f"--oidc-client-secret-file {args.oidc_client_secret_file} is empty")
    return OIDCSettings(args.oidc_issuer, args.oidc_client_id, secret, args.oidc_groups_claim, scopes,
                        args.oidc_redirect_uri)


def add_passwd_parser(sub: Subparsers) -> None:
    p = sub.add_parser(
        "workbench-passwd",
        description="Add a user to the workbench password file or set their password. The password is "
                    "read from a prompt (asked twice), or as one line from standard input when that is "
                    "not a terminal; never from the command line. The file holds only scrypt hashes "
                    "(n=2**15, r=8, p=1, random salt) and is written with mode 0600. --convert replaces "
                    "every plaintext entry of an old file by its hash.",
        formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    p.add_argument("file", type=Path, help="the password file (created if missing)")
    p.add_argument("user", nargs="?", help="the user to add or change")
    p.add_argument("--convert", action="store_true",
                   help="hash every plaintext password in FILE in place (no USER)")
    p.set_defaults(func=cmd_passwd)


def _read_new_password() -> str:
    if not sys.stdin.isatty():
        return sys.stdin.readline().removesuffix("\n")
    first = getpass.getpass("New password: ")
    if getpass.getpass("Repeat it: ") != first:
        raise ValueError("the two passwords differ")
    return first


def cmd_passwd(args: argparse.Namespace) -> int:
    # Lazy (here and in cmd_workbench): the workbench's modules load only for its commands.
    from workbench.app.passwords import PasswordFileError, convert_plaintext, set_password

    if args.convert == bool(args.user):
        raise CliError("give either USER or --convert")
    try:
        if args.convert:
            converted = convert_plaintext(args.file)
            print(f"{args.file}: {len(converted)} plaintext password(s) replaced by hashes"
                  + (f" ({', '.join(converted)})" if converted else ""))
            return 0
        password = _read_new_password().removesuffix("\r")
        existed = set_password(args.file, args.user, password)
    except PasswordFileError as exc:
        raise PasswordFileError(f"{exc.message}; {args.file} is unchanged") from None
    except ValueError as exc:
        raise CliError(f"{exc}; {args.file} is unchanged") from None
    print(f"{args.file}: password of {args.user!r} {'changed' if existed else 'set'} (scrypt hash)")
    return 0


def bind_address(host: str, port: int) -> tuple[str, str]:
    """(address to bind, `host:port` as a browser names it) for `--host`, or a ValueError
    whose message is the one line `gate workbench` prints before exiting 2.

    IPv6 literals (`::1`, `[::1]`) are refused by name: the Panel/Bokeh server splits every
    Host and Origin at its first colon, so it cannot serve a page or a websocket under an IPv6
    address (it answered each request with a traceback). A host name that resolves to one works.
    """
    text = host.strip()
    bare = text[1:-1] if text.startswith("[") and text.endswith("]") else text
    if ":" in bare or "[" in bare or "]" in bare:
        try:
            address = ipaddress.IPv6Address(bare)
        except ValueError:
            raise ValueError(f"--host {host!r} is neither a host name nor an IP address") from None
        hint = "127.0.0.1 or localhost" if address.is_loopback else "an IPv4 address or a host name"
        raise ValueError(f"--host {host!r}: the workbench server cannot serve under an IPv6 address; use {hint}")
    if not bare:
        raise ValueError("--host must not be empty")
    return bare, f"{bare}:{port}"


def build_store(settings: Settings, dataset: str | None, cluster: str | None = None, *, allow_unsigned: bool = False,
                allow_stale: bool = False) -> WorkbenchStore:
    # Lazy (here and below): the ledger and the workbench bring SQLAlchemy, Polars and Panel.
    from gate_cli.context import open_ledger
    from workbench.app.store import WorkbenchStore
    from workbench.services.root import signing_setup

    ledger = open_ledger(settings)
    return WorkbenchStore(ledger, signing_setup(settings), Path(dataset) if dataset else settings.home / "dataset", cluster=cluster,
                          home=settings.home, allow_unsigned=allow_unsigned, allow_stale=allow_stale,
                          webhook_allow_hosts=settings.webhook_allow_hosts, checkpoint_log=settings.checkpoint_log)


def cmd_workbench(args: argparse.Namespace) -> int:
    from workbench.app.access import access_for
    from workbench.app.origins import parse_proxies

    try:
        bind, authority = bind_address(args.host, args.port)
        proxies = parse_proxies(args.trusted_proxy)
        access = access_for(bind, args.basic_auth, args.grants, oidc_settings(args))
        discovery = None
        if access.oidc is not None:  # the provider's discovery document, read before anything is opened
            # Panel's sign-in handlers come with it (0.7 s): imported after the refusals above.
            from workbench.app.oidc import discover

            discovery = discover(access.oidc)  # OIDCConfigError
    except ValueError as exc:  # OIDCConfigError (AccessConfigError is a refusal of its own)
        raise CliError(str(exc)) from None
    if args.log_editor:
        _log_editor()
    settings = Settings.from_env()
    settings.home.mkdir(parents=True, exist_ok=True)
    store = build_store(settings, args.dataset, args.cluster, allow_unsigned=args.allow_unsigned,
                        allow_stale=args.allow_stale)
    if args.refresh:

        outcome = store.refresh_dataset()  # SigningRefused: a refusal
        print(f"dataset {store.dataset_dir}: {outcome['added']:,} new rows", flush=True)
    from workbench.app.server import make_server

    try:
        server = make_server(store, access, bind, args.port, origins=args.allow_origin, discovery=discovery,
                             trusted_proxies=proxies)
    except OSError as exc:  # the address is not this machine's, or the port is taken
        raise CliError(f"cannot listen on {authority}: {exc.strerror or exc}") from None
    print(f"workbench on http://{authority}/workbench", flush=True)
    server.start()
    server.io_loop.start()
    return 0


def _log_editor() -> None:
    """`--log-editor`: the `workbench.editor` logger's lines on standard error (issue 65: the
    browser tests run with it, so a lost edit's messages are in CI's log)."""
    handler = logging.StreamHandler()
    handler.setFormatter(logging.Formatter("%(asctime)s %(name)s %(message)s"))
    editor_log = logging.getLogger("workbench.editor")
    editor_log.addHandler(handler)
    editor_log.setLevel(logging.DEBUG)
    editor_log.propagate = False  # once: Bokeh's server gives the root logger a handler of its own


SERVING = "workbench on http"  # the line `gate workbench` prints once its socket is bound


def start_beside(host: str, port: int) -> subprocess.Popen[str]:
    """Start `gate workbench --refresh` as a child process beside a server in the foreground
    (`gate demo`). The child exports what is new in the ledger, then serves; it is stopped when
    this process exits, and on Linux the kernel stops it even if this process is killed.

    Its address is announced only once it listens (its own "workbench on …" line, printed after
    the bind, is relayed as the banner); if it ends without serving, one line says so."""
    # Imported here, in the parent before the fork, so the child imports nothing (ctypes serves
    # only this; `gate` starts without it).
    import ctypes

    def die_with_parent() -> None:  # pragma: no cover - runs in the child
        with contextlib.suppress(OSError):  # not Linux: the atexit hook alone stops the child
            ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG

    gate = os.path.join(os.path.dirname(sys.executable), "gate")
    # Our own `gate` beside this interpreter; the child's hook makes one prctl call and nothing else.
    child = subprocess.Popen([gate, "workbench", "--host", host, "--port", str(port), "--refresh"],  # noqa: S603
                             preexec_fn=die_with_parent,  # noqa: PLW1509
                             stdout=subprocess.PIPE, text=True)
    def stop_child() -> None:
        if child.poll() is None:
            child.terminate()

    atexit.register(stop_child)
    print("Policy workbench: exporting the ledger to the Parquet dataset first; its address follows "
          "once it listens", flush=True)
    threading.Thread(target=_relay, args=(child, host, port), daemon=True, name="workbench-relay").start()
    return child


def _relay(child: subprocess.Popen[str], host: str, port: int) -> None:
    """Copy the workbench's output; announce it when it serves, or say that it did not."""
    served = False
    for line in child.stdout or ():  # a pipe: the child was started with stdout=PIPE
        if line.startswith(SERVING) and not served:
            served = True
            print(f"\nPolicy workbench (dashboard): http://{host}:{port}/workbench\n", flush=True)
        else:
            print(line, end="", flush=True)
    if not served:
        status = child.wait()
        print(f"gate demo: the policy workbench did not start on port {port} (exit status {status}; "
              "its message is above); the API serves alone", file=sys.stderr, flush=True)
