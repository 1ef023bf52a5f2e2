"""The ``jobpulse`` command: server, demo, keys, login, sync, and (from the agent) agent and run."""

from __future__ import annotations

import argparse
import sys
import threading
import time
from collections.abc import Sequence
from pathlib import Path

from .client import ApiError, Client
from .credentials import Credentials, credentials_path, load_credentials, save_credentials
from .errors import JobpulseError
from .settings import SETTINGS, load_settings


def _server_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "server",
        help="run the jobpulse server",
        description="Run the server. Every option can also be set as JOBPULSE_<NAME>.",
    )
    for setting in SETTINGS:
        flag = "--" + setting.name.replace("_", "-")
        if setting.type is bool:
            p.add_argument(
                flag,
                dest=setting.name,
                action=argparse.BooleanOptionalAction,
                default=None,
                help=f"{setting.help} (default: {setting.default})",
            )
        else:
            p.add_argument(
                flag,
                dest=setting.name,
                type=setting.type,
                default=None,
                help=f"{setting.help} (default: {setting.default})",
            )
    p.add_argument("--demo", action="store_true", help="load the demo job once the server is up")
    p.set_defaults(func=cmd_server)


def bootstrap_admin(store, settings) -> str | None:  # noqa: ANN001 - Store, Settings
    """On first start, create the admin key and write it where the local CLI and SDK look.

    Answers a token that works on this server for local tools, or None if none is at hand.
    """
    from .server.access import ADMIN_KEY_STATE

    local = load_credentials()
    if local.api_key and store.keys.verify(local.api_key) is not None:
        return local.api_key
    if store.keys.list():
        return None
    key, token = store.keys.create("local admin", ["*"], "admin")
    store.state.set(ADMIN_KEY_STATE, key.key_id)
    if settings.write_credentials:
        path = save_credentials(settings.url, token)
        print(f"jobpulse: created the admin API key and wrote it to {path}", flush=True)
    else:
        print(f"jobpulse: created the admin API key: {token}", flush=True)
    return token


def cmd_server(args: argparse.Namespace) -> int:
    import logging

    import uvicorn

    from .server import create_app
    from .store import open_store

    overrides = {s.name: getattr(args, s.name) for s in SETTINGS}
    settings = load_settings(overrides)
    logging.basicConfig(level=settings.log_level.upper(), format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    Path(settings.data_dir).mkdir(parents=True, exist_ok=True)
    store = open_store(
        settings.store,
        Path(settings.data_dir),
        database=settings.database,
        raw_ttl_days=settings.raw_ttl_days,
        recent_system_cells=settings.recent_system_cells,
        recent_chart_blocks=settings.recent_chart_blocks,
    )
    if store.previous_version and store.previous_version < store.schema_version:
        print(
            f"jobpulse: upgraded the store schema from version {store.previous_version} to {store.schema_version}",
            flush=True,
        )
    token = bootstrap_admin(store, settings)
    app = create_app(store, settings)
    login = app.state.ctx.access.login_url()
    where = settings.data_dir if settings.store == "embedded" else settings.store
    print(
        f"jobpulse: {store.engine.name} store at {where}",
        flush=True,
    )
    print(f"jobpulse: serving on {settings.url}", flush=True)
    if login:
        print(f"jobpulse: open the web UI with {login}", flush=True)
    if args.demo:
        threading.Thread(target=_load_demo_when_up, args=(settings.url, token, store), daemon=True).start()
    server = uvicorn.Server(
        uvicorn.Config(app, host=settings.host, port=settings.port, log_level=settings.log_level, access_log=False)
    )
    try:
        server.run()
    finally:
        store.close()
    return 0


def _load_demo_when_up(url: str, token: str | None, store) -> None:  # noqa: ANN001
    from .demo import load_demo

    if token is None:
        _, token = store.keys.create("demo loader", ["demo"], "write")
    client = Client(Credentials(url=url, api_key=token))
    for _ in range(200):
        try:
            client.request("GET", "/healthz")
            break
        except ApiError:
            time.sleep(0.1)
    try:
        result = load_demo(client)
    except ApiError as exc:
        print(f"jobpulse: loading the demo job failed: {exc}", file=sys.stderr, flush=True)
        return
    print(f"jobpulse: demo job loaded ({result['events']} events): {url}/jobs/{result['job']}", flush=True)


def cmd_demo(args: argparse.Namespace) -> int:
    from .demo import load_demo

    result = load_demo(Client(load_credentials(args.url, args.api_key)), job=args.job)
    print(f"loaded {result['events']} events into job {result['job']} of project {result['project']}")
    return 0


def cmd_keys(args: argparse.Namespace) -> int:
    client = Client(load_credentials(args.url, args.api_key))
    if args.action == "create":
        projects = args.project or ["*"]
        answer = client.request(
            "POST", "/jp/v1/keys", json={"name": args.name, "projects": projects, "role": args.role}
        )
        key = answer["key"]
        print(f"created key {key['key_id']} ({key['role']} on {', '.join(key['projects'])})")
        print(answer["token"])
    elif args.action == "list":
        for key in client.request("GET", "/jp/v1/keys")["keys"]:
            state = "revoked" if key["revoked"] else "active"
            print(f"{key['key_id']}  {key['role']:<6} {state:<8} {','.join(key['projects']):<30} {key['name']}")
    else:
        client.request("DELETE", f"/jp/v1/keys/{args.key_id}")
        print(f"revoked key {args.key_id}")
    return 0


def cmd_login(args: argparse.Namespace) -> int:
    client = Client(load_credentials(args.url, args.api_key))
    print(client.request("POST", "/jp/v1/login-links")["url"])
    return 0


def cmd_sync(args: argparse.Namespace) -> int:
    from .sdk import spool, sync

    root = args.spool_dir or spool.default_root()
    jobs = set(args.job) if args.job else None
    if args.list:
        return _list_spool(sync.survey(root, jobs), root)
    creds = load_credentials(args.url, args.api_key)
    report = sync.sync(root, creds.url, creds.api_key, jobs=jobs, any_url=args.any_url)
    if report.jobs:
        print(
            f"sent {report.sent_requests} request(s) ({report.sent_events} event(s)) of "
            f"{len(report.jobs)} job(s) to {creds.url.rstrip('/')}"
        )
    elif not (report.left or report.live or report.unreadable):
        print(f"nothing spooled in {root}")
    for reason, events in report.refusals.items():
        print(f"jobpulse sync: the server refused {events} event(s): {reason}", file=sys.stderr)
    for url, count in report.other_url.items():
        print(
            f"jobpulse sync: left {count} request(s) recorded for {url or 'an unknown server'} "
            "(--url names that server; --any-url sends them here)",
            file=sys.stderr,
        )
    for directory in report.live:
        print(f"jobpulse sync: left {directory}: a running process writes it and sends it itself", file=sys.stderr)
    if report.unreadable:
        print(f"jobpulse sync: {report.unreadable} file(s) under {root} are not spooled requests", file=sys.stderr)
    if report.stopped:
        print(
            f"jobpulse sync: stopped: {report.stopped}; {report.left} request(s) are still in {root}",
            file=sys.stderr,
        )
        return 1
    return 1 if report.dropped_events or report.other_url else 0


def _list_spool(found: list, root: Path) -> int:  # list[sync.SpoolDir]
    if not found:
        print(f"nothing spooled in {root}")
        return 0
    rows = [("JOB", "WORKER", "REQUESTS", "EVENTS", "BYTES", "OLDEST (UTC)", "SERVER")]
    for d in found:
        oldest = time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime(d.oldest)) if d.oldest else "-"
        servers = ", ".join(sorted(u or "?" for u in d.urls)) or "-"
        state = " (being written by a running process)" if d.live else ""
        rows.append((d.job, d.worker, str(d.requests), str(d.events), str(d.bytes), oldest, servers + state))
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]) - 1)]
    for r in rows:
        print("  ".join(c.ljust(w) for c, w in zip(r, widths, strict=False)) + "  " + r[-1])
    return 0


def _client_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("--url", help="server URL (default: JOBPULSE_URL, then the credentials file)")
    p.add_argument("--api-key", help="API key (default: JOBPULSE_API_KEY, then the credentials file)")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="jobpulse", description="Telemetry for ML training jobs.")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    _server_parser(sub)
    demo = sub.add_parser("demo", help="load the demo job into a running server")
    demo.add_argument("--job", default="demo-resnet50", help="job id to load it as")
    _client_options(demo)
    demo.set_defaults(func=cmd_demo)
    keys = sub.add_parser("keys", help="create, list or revoke API keys (needs an admin key)")
    keys_sub = keys.add_subparsers(dest="action", required=True)
    create = keys_sub.add_parser("create", help="create a key; prints its token once")
    create.add_argument("--name", default="", help="what the key is for")
    create.add_argument("--project", action="append", help="a project the key sees (repeat); default: all")
    create.add_argument("--role", choices=("read", "write", "admin"), default="read")
    _client_options(create)
    _client_options(keys_sub.add_parser("list", help="list keys"))
    revoke = keys_sub.add_parser("revoke", help="revoke a key")
    revoke.add_argument("key_id")
    _client_options(revoke)
    keys.set_defaults(func=cmd_keys)
    login = sub.add_parser("login", help=f"print a one-time web UI login link (uses {credentials_path()})")
    _client_options(login)
    login.set_defaults(func=cmd_login)
    sync = sub.add_parser(
        "sync",
        help="send the requests kept in the spool while the server could not be reached",
        description="Send what the SDK, `jobpulse run` and `jobpulse agent` kept in the spool while the server "
        "could not be reached, oldest first, removing each request once the server has it. Directories "
        "a running process writes are left to it. Exits 1 when something could not be sent.",
    )
    sync.add_argument(
        "--spool-dir", type=Path, help="the spool (default: JOBPULSE_SPOOL_DIR, else ~/.cache/jobpulse/spool)"
    )
    sync.add_argument("--job", action="append", help="only this job (repeat for more)")
    sync.add_argument("--list", action="store_true", help="list what is waiting, send nothing")
    sync.add_argument("--any-url", action="store_true", help="also send requests recorded for another server URL")
    _client_options(sync)
    sync.set_defaults(func=cmd_sync)
    try:
        from .agent.commands import register
    except ImportError:
        pass
    else:
        register(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        return int(args.func(args) or 0)
    except ApiError as exc:
        print(f"jobpulse {args.command}: {exc}", file=sys.stderr)
        return 1
    except (JobpulseError, ValueError) as exc:
        print(f"jobpulse {args.command}: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 130
