"""``jobpulse master-key``: show or rotate the master key that seals the secrets of access key pairs.

These commands work on the store itself, as the server does (with its settings: ``--data-dir``, ``--store``,
``--database``, ``--master-key-file`` or their ``JOBPULSE_*`` variables), not through the API: the key never
leaves the machine that holds it. The embedded store belongs to one process, so stop the server first; over a
ClickHouse server they run beside the servers (docs/security.md).
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import TYPE_CHECKING

from ..settings import SETTINGS, Settings, load_settings

if TYPE_CHECKING:
    from ..store import Store

_STORE_SETTINGS = ("data_dir", "store", "database", "master_key_file")


def register(sub: argparse._SubParsersAction) -> None:
    """Add the ``master-key`` command and its actions."""
    command = sub.add_parser(
        "master-key",
        help="show or rotate the master key that seals access key pair secrets (on the server's machine)",
        description="Show or rotate the master key that seals the secrets of access key pairs. Works on the "
        "store directly, with the server's settings; stop a server on the embedded store first.",
    )
    actions = command.add_subparsers(dest="action", required=True, metavar="ACTION")
    show = actions.add_parser(
        "show",
        help="print the key file and the fingerprints of its keys",
        description="Print where the master key file is and the fingerprint of each key in it (never the keys).",
    )
    rotate = actions.add_parser(
        "rotate",
        help="make a new master key and re-seal every access key pair's secret with it",
        description="Make a new master key, re-seal the secret of every live access key pair with it, then drop "
        "the old key from the key file. Servers reading the same file pick the new key up by themselves.",
    )
    rotate.add_argument(
        "--keep-old", action="store_true", help="keep the old keys in the file (they still open, the new one seals)"
    )
    for parser in (show, rotate):
        for setting in SETTINGS:
            if setting.name in _STORE_SETTINGS:
                flag = "--" + setting.name.replace("_", "-")
                parser.add_argument(flag, dest=setting.name, type=setting.type, default=None, help=setting.help)
    command.set_defaults(func=cmd_master_key)


def cmd_master_key(args: argparse.Namespace) -> int:
    from ..server.master_key import Keyring, read_keys, rotate

    settings = load_settings({name: getattr(args, name) for name in _STORE_SETTINGS})
    path = settings.master_key_path
    if not path.exists():
        raise ValueError(f"there is no master key file at {path}: the server makes it on its first start")
    if args.action == "show":
        ring = Keyring.load(path, create=False)
        print(f"{path}: seals with {ring.fingerprint}; opens with {', '.join(ring.fingerprints())}")
        return 0
    read_keys(path)  # a malformed file is refused before the store is opened
    store = _open(settings)
    try:
        done = rotate(store, path, keep_old=args.keep_old)
    finally:
        store.close()
    kept = "kept in the file" if args.keep_old else "removed from the file"
    print(f"re-sealed {done.resealed} access key pair secret(s) with the new master key {done.new}")
    print(f"old master key(s) {', '.join(done.retired)} {kept}: {path}")
    return 0


def _open(settings: Settings) -> Store:
    from ..errors import StoreUnavailable
    from ..store import open_store

    try:
        return open_store(settings.store, Path(settings.data_dir), database=settings.database)
    except (StoreUnavailable, RuntimeError) as exc:  # chdb: "Cannot lock file ... already running"
        where = settings.data_dir if settings.store == "embedded" else settings.store
        raise ValueError(f"cannot open the store at {where}; stop the server that uses it first ({exc})") from exc
