"""What the `gate` commands share: the settings, the GATE_HOME folder, the ledger and the clock.

The command modules import these from here, not from `gate_cli.main` (which imports them to
build the parser), so the command modules and the entry point form no circle.
"""

from __future__ import annotations

import getpass
import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from gate.clock import SystemClock, iso_ms
from gate.errors import CodedError, GateError
from gate.principals import KEY_PERMISSIONS, Permissions, Principal
from gate.settings import Settings

if TYPE_CHECKING:
    from gate.keys.anchors import TrustAnchors
    from gate.ledger import Ledger
    from workbench.dataset.trust import Trust


class CliError(CodedError):
    """An expected condition a command cannot get past: one line on stderr, exit status 2."""

    CODE = "CLI_REFUSED"


def refusal_text(error: GateError) -> str:
    """What a command prints for a refusal: its code, once, and its message, as the API names
    them (the command line's own refusal is `CLI_REFUSED`; a configuration value's,
    `SETTINGS_INVALID`)."""
    return f"{error.code}: {error.message}"


# The exit statuses of every command (docs/errors.md, "Exit status"): 0 done; 1 the command ran and
# what it checks failed (a verification check, a conformance fixture, a `--fail-on` condition);
# 2 refused, with one `gate COMMAND: CODE: message` line; 3 done with something to report that is
# neither a pass nor a failure (a plan that changes something, fixtures skipped, an inconclusive
# analysis).
DONE, FAILED, REFUSED, REPORTED = 0, 1, 2, 3


def print_refusal(command: str, error: GateError) -> int:
    """The one refusal printer: `gate COMMAND: CODE: message` on stderr; the exit status 2.
    `gate_cli.main` calls it for any refusal a command raises."""
    print(f"gate {command}: {refusal_text(error)}", file=sys.stderr)
    return REFUSED


# The local operator holds the signing key and the ledger: every right (the two-person rule of
# releases and the four eyes of held actions aside: those compare principals, not rights).
OPERATOR_PERMISSIONS: Permissions = frozenset(KEY_PERMISSIONS)


def operator() -> Principal:
    """The local operator: the login of the process's real user id (never a typed name, nor the
    LOGNAME/USER environment variables `getpass.getuser` would read first: setting one must not
    make a second person); `getpass.getuser` where there are no POSIX user ids."""
    try:
        import pwd

        login = pwd.getpwuid(os.getuid()).pw_name
    except (ImportError, KeyError):
        login = getpass.getuser()
    return Principal.operator(login)


def load_settings() -> Settings:
    return Settings.from_env()


def prepare_home(settings: Settings) -> None:
    """Create what the embedded default needs: the GATE_HOME folder (ledger and keyring live in it).

    A SQLite ledger elsewhere (GATE_DATABASE_URL) is the operator's location: when its folder is
    missing the command stops with one line saying so, rather than creating folders it was not
    given."""
    try:
        settings.home.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise CliError(f"cannot create GATE_HOME {settings.home}: {exc.strerror}") from exc
    url = settings.database_url
    if url.startswith("sqlite:///"):
        folder = Path(url[len("sqlite:///"):]).parent
        if not folder.is_dir():
            raise CliError(f"the folder of the SQLite ledger ({folder}) does not exist: create it, or unset "
                           "GATE_DATABASE_URL to use the embedded default under GATE_HOME")


def open_ledger(settings: Settings) -> Ledger:
    """The ledger of `settings`, migrated to the newest revision (GATE_HOME created first)."""
    # Lazy: SQLAlchemy loads only for the commands that open the ledger (`gate --version` stays fast).
    from gate.services.root import ledger_of

    prepare_home(settings)
    ledger = ledger_of(settings)
    try:
        ledger.upgrade()
    except BaseException:
        ledger.dispose()
        raise
    return ledger


def now() -> str:
    """The current time as the ledger stores it (ISO 8601, milliseconds, UTC)."""
    return iso_ms(SystemClock().now())


def ledger_at_hand(settings: Settings) -> Ledger | None:
    """The live ledger when there is one to compare a dataset with (a SQLite file that exists, or a
    server that answers); None otherwise. The caller disposes of it."""
    from gate.errors import LedgerUnavailable
    from gate.ledger import DatabaseError
    from gate.services.root import ledger_of

    url = settings.database_url
    if url.startswith("sqlite:///") and not Path(url[len("sqlite:///"):]).is_file():
        return None
    ledger = None
    try:
        ledger = ledger_of(settings)
        ledger.upgrade()
    except (LedgerUnavailable, DatabaseError, OSError):  # no ledger at hand: staleness is not checked
        if ledger is not None:
            ledger.dispose()
        return None
    return ledger


def dataset_trust(settings: Settings, *, allow_unsigned: bool, ledger: Ledger | None = None,
                  key_registry: str | None = None, public: TrustAnchors | None = None) -> Trust:
    """How a command trusts a dataset (`workbench.dataset.trust.reader_trust`): public keys first
    (`--key-registry`, else GATE_KEY_REGISTRY; `public`, a remote gate's pinned keys), and this
    gate's keyring and HMAC secret where they are at hand; `--allow-unsigned`, the newest-seen state
    in GATE_HOME/cache, and `ledger`'s chain heads. No private key is needed to trust a dataset."""
    from gate.keys.anchors import TrustAnchors
    from gate.services.root import signing_setup
    from workbench.dataset.trust import reader_trust

    anchors = signing_setup(settings).trust_anchors() + (public or TrustAnchors())
    return reader_trust(settings.home, anchors, allow_unsigned=allow_unsigned, ledger=ledger,
                        key_registry=key_registry)
