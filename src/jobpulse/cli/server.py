"""``jobpulse server``, ``jobpulse demo`` and ``jobpulse login``: run a server, fill it, sign in to it."""

from __future__ import annotations

import argparse
import shlex
import sys
import threading
import time
from pathlib import Path

from ..client import ApiError, Client
from ..credentials import Credentials, credentials_path, load_credentials, save_credentials
from ..settings import SETTINGS, load_settings
from .options import client_options


def register(sub: argparse._SubParsersAction) -> None:
    """Add the ``server``, ``demo`` and ``login`` commands."""
    _server_parser(sub)
    demo = sub.add_parser(
        "demo",
        help="load the demo job into a running server",
        description="Load a simulated two-hour training job (4 workers with 8 GPUs each: scalars, system metrics, "
        "logs, a plot and an image; one worker fails) into a running server, through its public API.",
    )
    demo.add_argument("--job", default="demo-resnet50", help="job id to load it as (default: demo-resnet50)")
    client_options(demo)
    demo.set_defaults(func=cmd_demo)
    login = sub.add_parser(
        "login",
        help="print a one-time web UI login link",
        description=f"Print a one-time link that signs a browser in to the web UI (uses {credentials_path()}).",
    )
    client_options(login)
    login.set_defaults(func=cmd_login)


def _server_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "server",
        help="run the jobpulse server",
        description="Run the server. Every option can also be set as JOBPULSE_<NAME>, e.g. JOBPULSE_DATA_DIR.",
    )
    for setting in SETTINGS:
        flag = "--" + setting.name.replace("_", "-")
        text = setting.help
        if "(default:" not in text and setting.default not in (None, ""):
            text = f"{text} (default: {setting.default})"
        kind: dict = {"action": argparse.BooleanOptionalAction} if setting.type is bool else {"type": setting.type}
        if getattr(setting, "choices", ()):
            kind["choices"] = setting.choices
        p.add_argument(flag, dest=setting.name, default=None, help=text, **kind)
    p.add_argument("--demo", action="store_true", help="load the demo job once the server is up")
    p.set_defaults(func=cmd_server)


def bootstrap_admin(store, settings) -> str | None:  # noqa: ANN001 - Store, Settings
    """On first start, create the admin key and write it where the local CLI and SDK look.

    Answers a token that works on this server for local tools, or None if none is at hand.
    """
    from ..server.access import ADMIN_KEY_STATE

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


def bootstrap_master_key(settings) -> None:  # noqa: ANN001 - Settings
    """On first start, create the master key that seals the secrets of access key pairs (docs/security.md);
    a malformed key file stops the server here rather than at the first signed request."""
    from ..server.master_key import MasterKeyError, ensure_key_file

    try:
        created = ensure_key_file(settings.master_key_path)
    except (MasterKeyError, OSError) as exc:
        raise ValueError(f"master key: {exc}") from exc
    if created:
        print(
            f"jobpulse: created the master key that seals access key pair secrets: {settings.master_key_path}",
            flush=True,
        )


def cmd_server(args: argparse.Namespace) -> int:
    import logging

    import uvicorn

    from ..server import create_app
    from ..store import open_store

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
        cluster=settings.cluster,
    )
    if store.previous_version and store.previous_version < store.schema_version:
        print(
            f"jobpulse: upgraded the store schema from version {store.previous_version} to {store.schema_version}",
            flush=True,
        )
    token = bootstrap_admin(store, settings)
    bootstrap_master_key(settings)
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
    from ..demo import load_demo

    if token is None:
        _, token = store.keys.create("demo loader", ["demo"], "write")
    client = Client(Credentials(url=url, api_key=token))
    for _ in range(200):
        try:
            client.request("GET", "/readyz")
            break
        except ApiError:
            time.sleep(0.1)
    try:
        result = load_demo(client)
    except ApiError as exc:
        print(f"jobpulse: loading the demo job failed: {exc}", file=sys.stderr, flush=True)
        return
    found = f"{result['findings']} insight finding{'' if result['findings'] == 1 else 's'}"
    print(f"jobpulse: demo job loaded ({result['events']} events, {found}): {url}/jobs/{result['job']}", flush=True)
    print(training_hint(url, result["project"]), flush=True)


def training_hint(url: str, project: str) -> str:
    """The three lines that point a training script at the server at ``url`` (shell commands, on this machine)."""
    cli = shlex.quote(str(Path(sys.executable).with_name("jobpulse")))
    python = shlex.quote(sys.executable)
    create = f"{cli} keys create --name trainer --project {project} --role write | tail -n 1"
    example = f'import jobpulse; run = jobpulse.init(project="{project}"); run.log({{"train/loss": 0.5}}); run.finish()'
    return "\n".join(
        [
            "jobpulse: point a training script at this server (a write key of the project, then the SDK):",
            f"    export JOBPULSE_URL={shlex.quote(url)}",
            f"    export JOBPULSE_API_KEY=$({create})",
            f"    {python} -c {shlex.quote(example)}",
        ]
    )


def cmd_demo(args: argparse.Namespace) -> int:
    from ..demo import load_demo

    client = Client(load_credentials(args.url, args.api_key))
    result = load_demo(client, job=args.job)
    print(f"loaded {result['events']} events into job {result['job']} of project {result['project']}")
    print(f"insights found {result['findings']}: jobpulse insights {result['job']}")
    print(f"{client.credentials.url}/jobs/{result['job']}")
    return 0


def cmd_login(args: argparse.Namespace) -> int:
    client = Client(load_credentials(args.url, args.api_key))
    print(client.request("POST", "/jp/v1/login-links")["url"])
    return 0
