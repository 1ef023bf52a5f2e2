"""``jobpulse keys``: create, list or revoke API keys (needs an admin key)."""

from __future__ import annotations

import argparse

from ..client import Client
from ..credentials import load_credentials
from .options import client_options


def register(sub: argparse._SubParsersAction) -> None:
    """Add the ``keys`` command and its actions."""
    keys = sub.add_parser(
        "keys",
        help="create, list or revoke API keys (needs an admin key)",
        description="Create, list or revoke the server's API keys. Needs an admin key.",
    )
    keys_sub = keys.add_subparsers(dest="action", required=True, metavar="ACTION")
    create = keys_sub.add_parser(
        "create", help="create a key; prints its token once", description="Create a key; its token is printed once."
    )
    create.add_argument("--name", default="", help="what the key is for")
    create.add_argument("--project", action="append", help="a project the key sees (repeat); default: all")
    create.add_argument("--role", choices=("read", "write", "admin"), default="read", help="default: read")
    create.add_argument(
        "--pair",
        action="store_true",
        help="an access key pair (an access key id and a secret) for the vendors' SDKs, which sign requests with "
        "it, instead of a token; the secret is printed once",
    )
    client_options(create)
    client_options(keys_sub.add_parser("list", help="list keys", description="List the keys, revoked ones too."))
    revoke = keys_sub.add_parser("revoke", help="revoke a key", description="Revoke a key: it stops working at once.")
    revoke.add_argument("key_id", help="the key's id (the part of its token after 'jp_', as 'keys list' shows)")
    client_options(revoke)
    keys.set_defaults(func=cmd_keys)


def cmd_keys(args: argparse.Namespace) -> int:
    client = Client(load_credentials(args.url, args.api_key))
    if args.action == "create":
        projects = args.project or ["*"]
        body = {"name": args.name, "projects": projects, "role": args.role, "pair": args.pair}
        answer = client.request("POST", "/jp/v1/keys", json=body)
        key = answer["key"]
        kind = "key pair" if args.pair else "key"
        print(f"created {kind} {key['key_id']} ({key['role']} on {', '.join(key['projects'])})")
        if args.pair:
            print(f"access key id:     {answer['access_key_id']}")
            print(f"access key secret: {answer['access_key_secret']}")
        else:
            print(answer["token"])
    elif args.action == "list":
        for key in client.request("GET", "/jp/v1/keys")["keys"]:
            state = "revoked" if key["revoked"] else "active"
            kind = key.get("kind", "token")
            print(
                f"{key['key_id']:<20}  {kind:<5} {key['role']:<6} {state:<8} {','.join(key['projects']):<30} "
                f"{key['name']}"
            )
    else:
        client.request("DELETE", f"/jp/v1/keys/{args.key_id}")
        print(f"revoked key {args.key_id}")
    return 0
