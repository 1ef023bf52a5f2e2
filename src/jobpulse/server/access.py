"""The single access check: who is calling (API key or UI session) and may they do this.

Every API family, native or compatible, finds the credential where its clients put it and
then calls ``Access.check``. The rules:

- no credential, or an unknown or revoked one: 401 (``Unauthorized``);
- a job that does not exist or lies outside the key's projects: 404 (``NotFound``);
- a key that sees the project or job but lacks the role: 403 (``Forbidden``).

A UI session lives in the store (``store/sessions.py``): the cookie names it, and signing out or revoking the
key ends it for every replica. A request that changes something on the strength of the cookie must come from
this server's own pages (``origin.py``); requests that carry an API key are not concerned.
"""

from __future__ import annotations

import math
import secrets
import time

from starlette.requests import Request

from ..errors import BadRequest, Forbidden, NotFound, Unauthorized
from ..settings import Settings
from ..store import ApiKey, Job, Store
from .origin import SAFE_METHODS, cross_site_reason
from .signing import Signer

SESSION_COOKIE = "jobpulse_session"
ADMIN_KEY_STATE = "first_admin_key_id"


class Access:
    def __init__(self, store: Store, settings: Settings, signer: Signer) -> None:
        self._store = store
        self._settings = settings
        self._signer = signer
        # token -> (key, until when to trust it)
        self._cache: dict[str, tuple[ApiKey, float]] = {}
        # UI session id -> (its key, until when to trust it, the store's count of ended sessions when looked up)
        self._sessions: dict[str, tuple[ApiKey, float, int]] = {}
        # job -> (project, whether it has started, until when to trust that), filled by reads and by ingest
        self._jobs: dict[str, tuple[str, bool, float]] = {}
        # job -> worker -> until when to trust that it is stored, filled by ingest
        self._workers: dict[str, dict[str, float]] = {}

    # -- who -----------------------------------------------------------------------------------------

    def authenticate(self, token: str | None) -> ApiKey:
        if not token:
            raise Unauthorized("an API key is required")
        now = time.monotonic()
        cached = self._cache.get(token)
        if cached and cached[1] > now:
            return cached[0]
        key = self._store.keys.verify(token)
        if key is None:
            self._cache.pop(token, None)
            raise Unauthorized("the API key is not valid or has been revoked")
        if len(self._cache) > 10_000:
            self._cache.clear()
        self._cache[token] = (key, now + self._trusted_for())
        return key

    def _trusted_for(self) -> float:
        """How long a key or a job looked up is trusted. Where the store sees every write, every revocation and
        every change of a job passes through this process, which forgets what it changes, so what it looked up
        stays true; over a shared ClickHouse server another replica may change it: ``key_cache_seconds``."""
        return math.inf if self._store.changes.sees_every_write else self._settings.key_cache_seconds

    def remembered_key(self, request: Request) -> ApiKey | None:
        """The caller's API key if this replica remembers it, without any lookup (None: ask ``native_key``)."""
        cached = self._cache.get(_native_token(request) or "")
        return cached[0] if cached and cached[1] > time.monotonic() else None

    def forget(self, key_id: str) -> None:
        """Drop a revoked key, and the sessions opened with it, from this replica's memory at once."""
        # list() copies each memory at once: another thread may add to it meanwhile
        for token in [t for t, (k, _) in list(self._cache.items()) if k.key_id == key_id]:
            self._cache.pop(token, None)
        for session_id in [s for s, (k, _, _) in list(self._sessions.items()) if k.key_id == key_id]:
            self._sessions.pop(session_id, None)

    def native_key(self, request: Request) -> ApiKey:
        """The caller of a native route: ``Authorization: Bearer``, ``X-API-Key``, or a UI session cookie; a
        request that changes something on the strength of the cookie must come from this server's pages."""
        token = _native_token(request)
        if token:
            return self.authenticate(token)
        cookie = request.cookies.get(SESSION_COOKIE)
        if cookie:
            if request.method not in SAFE_METHODS:
                self.require_same_origin(request)
            return self.session_key(cookie)
        raise Unauthorized("an API key is required: send 'Authorization: Bearer <key>'")

    # -- may they ------------------------------------------------------------------------------------

    def check(self, key: ApiKey, role: str, *, project: str | None = None, job: str | None = None) -> Job | None:
        """Raise unless ``key`` may act with ``role`` on ``project`` or ``job``; answers the job."""
        found = None
        if job is not None:
            found = self._store.jobs.get(job)
            if found is None or not key.allows_project(found.project):
                raise NotFound(f"job {job!r} does not exist", field="job")
            project = found.project
        if project is not None and not key.allows_project(project):
            raise Forbidden(f"this API key has no access to project {project!r}", field="project")
        if not key.can(role):
            raise Forbidden(f"this API key is '{key.role}'; this needs '{role}'")
        return found

    def require(self, key: ApiKey, job: str, role: str = "read") -> None:
        """Like ``job`` for routes that need only the permission, not the job's current description:
        the job's project is remembered (``remember_job``), so a read costs no lookup of the job."""
        if self.require_remembered(key, job, role):
            return
        found = self._store.jobs.get(job)
        if found is None:
            self._jobs.pop(job, None)
            raise NotFound(f"job {job!r} does not exist", field="job")
        self.remember_job(job, found.project, started=found.status != "created")
        self._permit(key, job, found.project, role)

    def require_remembered(self, key: ApiKey, job: str, role: str = "read") -> bool:
        """``require`` without any lookup, for an answer on the event loop: True once it passed (it raises as
        ``require`` does), False when this replica does not remember the job (call ``require`` in a thread)."""
        remembered = self._remembered(job)
        if remembered is None:
            return False
        self._permit(key, job, remembered[0], role)
        return True

    def _permit(self, key: ApiKey, job: str, project: str, role: str) -> None:
        if not key.allows_project(project):
            raise NotFound(f"job {job!r} does not exist", field="job")
        if not key.can(role):
            raise Forbidden(f"this API key is '{key.role}'; this needs '{role}'")

    # -- jobs this replica has seen --------------------------------------------------------------------

    def remember_job(self, job: str, project: str, *, started: bool) -> None:
        """Note that ``job`` exists in ``project`` (and whether it has left the status 'created'); ingest notes
        the jobs it writes, so a read that follows needs no lookup. The note is trusted as long as a key
        (``_trusted_for``): over a shared ClickHouse server a job deleted through another replica may read as
        empty for ``key_cache_seconds`` instead of 404."""
        if len(self._jobs) > 100_000:
            self._jobs.clear()
        self._jobs[job] = (project, started, time.monotonic() + self._trusted_for())

    def remembered_projects(self, jobs: list[str]) -> dict[str, str]:
        """The project of each of ``jobs`` this replica remembers as existing (``remember_job``)."""
        return {job: remembered[0] for job in jobs if (remembered := self._remembered(job)) is not None}

    def started_job(self, job: str) -> str | None:
        """The project of ``job`` if this replica remembers it as existing and started, else None."""
        remembered = self._remembered(job)
        return remembered[0] if remembered is not None and remembered[1] else None

    def _remembered(self, job: str) -> tuple[str, bool, float] | None:
        """What this replica remembers of ``job`` (project, started, trusted until), while it is trusted."""
        remembered = self._jobs.get(job)
        return remembered if remembered is not None and remembered[2] > time.monotonic() else None

    def forget_job(self, job: str) -> None:
        """Drop a changed or deleted job from this replica's memory at once."""
        self._jobs.pop(job, None)
        self._workers.pop(job, None)

    def unknown_workers(self, pairs: set[tuple[str, str]]) -> set[tuple[str, str]]:
        """The (job, worker) ``pairs`` this replica does not remember as stored: every ingest request names its
        workers, and only those it has not seen need a lookup."""
        now = time.monotonic()
        return {(job, worker) for job, worker in pairs if self._workers.get(job, {}).get(worker, 0.0) <= now}

    def remember_workers(self, pairs: set[tuple[str, str]]) -> None:
        """Note that the workers of ``pairs`` are stored, trusted as long as a key (``_trusted_for``): over a
        shared ClickHouse server, a job deleted and written again through another replica gets its workers
        registered again within ``key_cache_seconds``."""
        if len(self._workers) > 100_000:
            self._workers.clear()
        until = time.monotonic() + self._trusted_for()
        for job, worker in pairs:
            self._workers.setdefault(job, {})[worker] = until

    def job(self, key: ApiKey, job: str, role: str = "read") -> Job:
        found = self.check(key, role, job=job)
        assert found is not None
        return found

    def job_of_project(self, key: ApiKey, project: str, job: str, role: str = "read") -> Job | None:
        """``job`` when ``key`` may ``role`` on ``project`` and the job is one of its jobs, else None
        (the APIs that name a job by project and id answer both cases as a missing job)."""
        self.check(key, role, project=project)
        try:
            found = self.job(key, job, role)
        except NotFound:
            return None
        return found if found.project == project else None

    # -- UI sessions -----------------------------------------------------------------------------------

    def login_url(self, key_id: str | None = None) -> str | None:
        """A one-time link that opens a UI session for ``key_id`` (default: the first admin key)."""
        key_id = key_id or self._store.state.get(ADMIN_KEY_STATE)
        if key_id is None:
            return None
        token = self._signer.sign("login", {"k": key_id, "n": secrets.token_hex(8)}, ttl_s=24 * 3600)
        return f"{self._settings.url}/login?token={token}"

    def redeem_login(self, token: str) -> str:
        """Trade a one-time login token for a session cookie value."""
        body = self._signer.verify("login", token, field="token")
        used = f"login_used:{body['n']}"
        if self._store.state.get(used) is not None:
            raise Unauthorized("this login link has been used already; run 'jobpulse login' for a new one")
        self._store.state.set(used, "1")
        if self._store.keys.get(body["k"]) is None:
            raise Unauthorized("the key behind this login link has been revoked")
        return self.session_for(body["k"])

    def session_for(self, key_id: str) -> str:
        """Open a session of ``key_id`` in the store; answers the cookie value that names it (signed, so a
        forged one is refused without a lookup)."""
        lifetime = self._settings.session_hours * 3600
        session_id, _ = self._store.sessions.open(key_id, lifetime)
        return self._signer.sign("session", {"s": session_id}, ttl_s=lifetime)

    def session_key(self, cookie: str) -> ApiKey:
        """The key a session cookie acts as; Unauthorized once the session has ended, expired, or lost its key.
        A session looked up is remembered as a key is (``_trusted_for``), and, where the store sees every write,
        only until a session is ended through it."""
        session_id = self._session_id(cookie)
        now, endings = time.monotonic(), self._store.sessions.endings
        cached = self._sessions.get(session_id)
        if cached and cached[1] > now and (cached[2] == endings or not self._store.changes.sees_every_write):
            return cached[0]
        session = self._store.sessions.get(session_id)
        if session is None:
            self._sessions.pop(session_id, None)
            raise Unauthorized("the session has ended (signed out, or its key was revoked) or expired; log in again")
        key = self._store.keys.get(session.key_id)
        if key is None:
            self._sessions.pop(session_id, None)
            raise Unauthorized("the key of this session has been revoked; log in again")
        if len(self._sessions) > 10_000:
            self._sessions.clear()
        lasts = max(0.0, (session.expires - time.time() * 1000) / 1000)
        self._sessions[session_id] = (key, now + min(self._trusted_for(), lasts), endings)
        return key

    def end_session(self, cookie: str) -> None:
        """Log out: end the session ``cookie`` names, in the store (for every replica) and here at once."""
        try:
            session_id = self._session_id(cookie)
        except Unauthorized:
            return  # a forged or expired cookie names no session to end
        self._sessions.pop(session_id, None)
        self._store.sessions.end(session_id)

    def _session_id(self, cookie: str) -> str:
        try:
            body = self._signer.verify("session", cookie, field="session")
        except BadRequest as exc:
            raise Unauthorized("the session has expired or is not valid; log in again") from exc
        session_id = body.get("s")
        if not isinstance(session_id, str) or not session_id:
            raise Unauthorized("the session is not valid; log in again")
        return session_id

    # -- cross-site requests ---------------------------------------------------------------------------

    def require_same_origin(self, request: Request, *, proof_required: bool = True) -> None:
        """Refuse (403) a request a browser was made to send by another site (``origin.cross_site_reason``)."""
        reason = cross_site_reason(request, self._settings.url, proof_required=proof_required)
        if reason is not None:
            raise Forbidden(
                f"refused: {reason}; a browser may change something here only from this server's own pages "
                "(scripts send an API key: 'Authorization: Bearer <key>')",
                code="cross_site_request",
            )


def _native_token(request: Request) -> str | None:
    """The API key a native request carries: ``Authorization: Bearer`` or ``X-API-Key``."""
    scheme, _, value = request.headers.get("authorization", "").partition(" ")
    if scheme.lower() == "bearer" and value:
        return value.strip()
    return request.headers.get("x-api-key", "").strip() or None
