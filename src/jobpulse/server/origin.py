"""Cross-site requests: whether a browser request comes from this server's own pages, and safe redirect targets.

A browser attaches the session cookie to requests that other sites make it send (a form posted from another
port of the same host or a sibling subdomain, which ``SameSite=Lax`` lets through). It also says where a request
comes from: ``Sec-Fetch-Site`` (``same-origin``; ``none`` when the user typed the address), and ``Origin`` on
every POST, PUT, PATCH and DELETE. A request that changes something on the strength of the cookie must carry
that proof: ``Sec-Fetch-Site`` decides where present (current browsers); else ``Origin`` must be the server's
own. The server's own origin is the one the request reached (scheme, ``Host``) or its configured
public URL (``public_url``, for a server behind a proxy that rewrites the host or ends TLS).
"""

from __future__ import annotations

from urllib.parse import urlsplit

from starlette.requests import Request

SAFE_METHODS = frozenset({"GET", "HEAD", "OPTIONS"})
_SAME_SITE_VALUES = frozenset({"same-origin", "none"})
_DEFAULT_PORTS = {"http": 80, "https": 443}

Origin = tuple[str, str, int]


def parse_origin(url: str) -> Origin | None:
    """(scheme, host, port) of an origin or URL, ports filled in; None when it names none."""
    try:
        parts = urlsplit(url.strip())
        port = parts.port
    except ValueError:
        return None
    scheme = parts.scheme.lower()
    if scheme not in _DEFAULT_PORTS or not parts.hostname:
        return None
    return scheme, parts.hostname.lower(), port or _DEFAULT_PORTS[scheme]


def own_origins(request: Request, public_url: str) -> set[Origin]:
    """The origins under which ``request`` may have reached this server."""
    found = {parse_origin(public_url)}
    host = request.headers.get("host")
    if host:
        found.add(parse_origin(f"{request.url.scheme}://{host}"))
    return {origin for origin in found if origin is not None}


def cross_site_reason(request: Request, public_url: str, *, proof_required: bool = True) -> str | None:
    """Why ``request`` is not known to come from this server's own pages; None when it is.

    ``proof_required``: a request that carries neither ``Origin`` nor ``Sec-Fetch-Site`` is refused too (it is
    not from a current browser's page of this server); without it only a request shown to come from elsewhere
    is refused (a sign-in, which carries no cookie to abuse, may come from a script).
    """
    site = request.headers.get("sec-fetch-site")
    if site is not None:
        # set by the browser alone, and unchanged by proxies: it decides where present
        if site.strip().lower() in _SAME_SITE_VALUES:
            return None
        return f"it was sent by another site (Sec-Fetch-Site: {site[:40]})"
    origin = request.headers.get("origin")
    if origin is not None:
        parsed = parse_origin(origin) if origin.strip() != "null" else None
        if parsed is None or parsed not in own_origins(request, public_url):
            return f"it was sent from another origin (Origin: {origin[:200]})"
        return None
    if proof_required:
        return "it carries neither an Origin nor a Sec-Fetch-Site header to show it comes from this server's pages"
    return None


def local_target(value: object) -> str:
    """``value`` when it is a path on this server (``/jobs/x?y``), else ``/``: never another site, nor ``//host``,
    ``/\\host``, a scheme, or characters a browser drops from a URL (tabs, line breaks)."""
    if not isinstance(value, str) or not value.startswith("/") or len(value) > 2048:
        return "/"
    if value[1:2] in ("/", "\\") or "\\" in value or any(ord(c) < 0x20 or ord(c) == 0x7F for c in value):
        return "/"
    parts = urlsplit(value)
    if parts.scheme or parts.netloc:
        return "/"
    return value
