"""The HTML of the UI: one page shell, the login page and the error page."""

from __future__ import annotations

from collections.abc import Sequence
from html import escape
from typing import Any

import orjson

_ICON = (
    "data:image/svg+xml,%3Csvg xmlns='http://www.w3.org/2000/svg' viewBox='0 0 32 32'%3E"
    "%3Crect width='32' height='32' rx='7' fill='%232563eb'/%3E%3Cpath d='M5 17h6l3-8 4 14 3-6h6' "
    "fill='none' stroke='white' stroke-width='2.6' stroke-linecap='round' stroke-linejoin='round'/%3E%3C/svg%3E"
)

_LOGO = (
    '<a class="brand" href="/"><svg viewBox="0 0 32 32" aria-hidden="true"><rect width="32" height="32" '
    'rx="7"/><path d="M5 17h6l3-8 4 14 3-6h6"/></svg><span>jobpulse</span></a>'
)


def _head(title: str, static: str, extra: str = "") -> str:
    """The head of every page; ``head.js`` (the theme, the first requests) runs last in it, before any paint."""
    return (
        f'<!doctype html><html lang="en"><head><meta charset="utf-8">'
        f'<meta name="viewport" content="width=device-width, initial-scale=1">'
        f'<title>{escape(title)} · jobpulse</title><link rel="icon" href="{_ICON}">'
        f'<link rel="stylesheet" href="{static}/style.css">{extra}<script src="{static}/head.js"></script></head>'
    )


def _topbar(active: str, signed_in: bool, admin: bool = False) -> str:
    def link(href: str, label: str, name: str) -> str:
        current = ' aria-current="page"' if name == active else ""
        return f'<a href="{href}"{current}>{label}</a>'

    right = (
        '<button class="icon-btn" id="theme-toggle" type="button" title="Switch light or dark theme" '
        'aria-label="Switch theme"><span class="theme-icon"></span></button>'
    )
    if signed_in:
        right += (
            '<form method="post" action="/jp/v1/session/logout" class="logout">'
            '<button class="btn btn-quiet" type="submit">Sign out</button></form>'
        )
    nav = link("/", "Jobs", "jobs") + link("/compare", "Compare", "compare") if signed_in else ""
    if signed_in and admin:
        nav += link("/keys", "Keys", "keys")
    return (
        f'<header class="topbar"><div class="topbar-inner">{_LOGO}<nav class="mainnav">{nav}</nav>'
        f'<div class="topbar-right">{right}</div></div></header>'
    )


def _json_script(element_id: str, data: Any) -> str:
    """``data`` as a JSON data block (not run) that no value can close early: ``<``, ``>``, ``&`` escaped."""
    text = orjson.dumps(data).decode().replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")
    return f'<script id="{element_id}" type="application/json">{text}</script>'


CHART_BUCKETS = 600  # buckets of a chart request; the pages read it from the boot data


def shell(
    *,
    title: str,
    page: str,
    static: str,
    boot: dict[str, Any],
    plotly: str | None,
    modules: Sequence[str] = (),
    styles: Sequence[str] = (),
    prefetch: Sequence[str] = (),
    charts_of: str | None = None,
    by_hash: dict[str, list[str]] | None = None,
    admin: bool = False,
) -> str:
    """A page whose content the ``page`` module draws from the API.

    ``plotly`` is the URL of Plotly.js, which the page loads only to show a plot the job reported; ``styles`` are
    stylesheets besides the UI's own; ``prefetch`` names API paths to request at once; ``charts_of`` (a job's
    ``/scalars`` path, which must be among them) also requests the first charts of that job; ``by_hash`` adds paths
    for a URL fragment; ``admin`` adds the keys page to the header.
    """
    extra = "".join(f'<link rel="stylesheet" href="{static}/{name}">' for name in styles)
    extra += "".join(f'<link rel="modulepreload" href="{static}/{name}">' for name in [f"{page}.js", *modules])
    if prefetch:
        plan = {"paths": list(prefetch), "byHash": by_hash or {}, "catalog": charts_of, "buckets": CHART_BUCKETS}
        extra += _json_script("prefetch", plan)
    active = page if page in ("compare", "keys") else "jobs"
    boot = {**boot, "page": page, "plotly": plotly, "buckets": CHART_BUCKETS}
    return (
        f'{_head(title, static, extra)}<body data-page="{page}">{_topbar(active, True, admin)}'
        f'<main id="app" class="page page-{page}" aria-busy="true"></main>{_json_script("boot", boot)}'
        f'<script type="module" src="{static}/{page}.js"></script></body></html>'
    )


def unbuilt_page(*, title: str, static: str, missing: Sequence[str], command: str, admin: bool = False) -> str:
    """A page that cannot run because files of the UI were not built into the package: what to run."""
    files = ", ".join(missing)
    return (
        f"{_head(title, static)}<body>{_topbar('jobs', True, admin)}"
        '<main class="page error-page"><div class="card empty-state"><div class="status-code">503</div>'
        "<h1>The charts of this page are not built</h1>"
        f'<p class="error-message">The package lacks {escape(files)}: the UI\'s chart library, which is built from '
        "npm when the package is set up.</p>"
        f"<p>Build it with <code>{escape(command)}</code> (it downloads it from the npm registry) and reload this "
        "page.</p>"
        '<p><a class="btn" href="/">Back to all jobs</a></p></div></main></body></html>'
    )


def login_page(*, static: str, next_url: str, message: str = "") -> str:
    """The sign-in page shown to a browser without a session."""
    note = (
        f'<p class="form-error" role="alert">{escape(message)}</p>'
        if message
        else '<p class="form-error" role="alert" hidden></p>'
    )
    return (
        f'{_head("Sign in", static)}<body class="login-body">{_topbar("", False)}'
        '<main class="login"><div class="card login-card">'
        "<h1>Sign in to jobpulse</h1>"
        '<p class="muted">Open the one-time link printed by <code>jobpulse login</code> on a machine that '
        "holds your credentials, or paste an API key.</p>"
        '<form id="login-form" method="post" action="/jp/v1/session">'
        '<label for="api_key">API key</label>'
        '<input id="api_key" name="api_key" type="password" autocomplete="current-password" '
        'placeholder="jp_…" required autofocus>'
        f'<input type="hidden" name="next" value="{escape(next_url)}">{note}'
        '<button class="btn btn-primary" type="submit">Sign in</button></form></div></main>'
        f'<script type="module" src="{static}/login.js"></script></body></html>'
    )


_TITLES = {
    400: "That request is not valid",
    401: "Sign-in needed",
    403: "No access",
    404: "Not found",
    405: "Not allowed",
    409: "Conflict",
    413: "Too large",
    500: "Something went wrong",
    503: "Storage unavailable",
}


def error_page(*, static: str, status: int, message: str, signed_in: bool = True) -> str:
    """A plain page saying what went wrong; never a stack trace."""
    title = _TITLES.get(status, "Something went wrong")
    if status >= 500:
        hint = "The server could not answer this page. Try again in a moment; the server log has the details."
    elif status == 404:
        hint = "It may have been deleted, or it belongs to a project your key cannot see."
    else:
        hint = ""
    hint_html = f'<p class="muted">{escape(hint)}</p>' if hint else ""
    return (
        f"{_head(title, static)}<body>{_topbar('', signed_in)}"
        f'<main class="page error-page"><div class="card empty-state"><div class="status-code">{status}</div>'
        f'<h1>{escape(title)}</h1><p class="error-message">{escape(message)}</p>{hint_html}'
        '<p><a class="btn" href="/">Back to all jobs</a></p></div></main></body></html>'
    )
