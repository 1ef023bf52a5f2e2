"""ClearML server compatibility: the events service and what the ``clearml`` SDK needs to run a script.

Point a ClearML client at jobpulse::

    CLEARML_API_HOST=<jobpulse URL>
    CLEARML_WEB_HOST=<jobpulse URL>
    CLEARML_FILES_HOST=<jobpulse URL>/clearml/files
    CLEARML_API_ACCESS_KEY=<key id of a jobpulse API key>
    CLEARML_API_SECRET_KEY=<the jobpulse API token>

and ``Task.init``, ``Logger.report_*``, console capture, the resource monitor and ``task.close()`` report into
jobpulse: a task is a job, its scalars, plots, debug images and console lines are the job's, and the
native API and UI show them. The modules:

- :mod:`.versions` endpoint paths and version negotiation; :mod:`.dispatch` one call from request to answer;
  :mod:`.envelope` the ``{"meta", "data"}`` wrapping and ClearML's error codes; :mod:`.jsontext` reading JSON
  without unbounded recursion; :mod:`.openapi` the endpoints in the server's OpenAPI document;
- :mod:`.auth` credentials and ``auth.login``; :mod:`.mapping` tasks, models, projects as jobs and projects;
- :mod:`.events` and its readers (:mod:`.events_logs`, :mod:`.events_scalars`, :mod:`.events_points`,
  :mod:`.events_media`, :mod:`.events_samples`), :mod:`.ingest` the checking of added events,
  :mod:`.ingest_tables` their rows in the store's tables, :mod:`.known_tasks` what a batch needs of its tasks;
- :mod:`.tasks` (with :mod:`.task_reads`, :mod:`.task_fields`, :mod:`.task_results`), :mod:`.projects`,
  :mod:`.models`, :mod:`.misc` the other services, :mod:`.files` the files server.
"""

from __future__ import annotations

import re

from fastapi import FastAPI, Request

from ...server.app import add_error_shape
from . import auth, events, files, misc, models, openapi, projects, tasks
from .dispatch import Dispatcher
from .envelope import render_shape
from .known_tasks import KnownTasks
from .versions import PATH, SERVICES, Registry

_SERVICE_PATH = re.compile(rf"^/(?:v[^/]+/)?(?:{'|'.join(SERVICES)})\.")


def _ours(request: Request) -> bool:
    path = request.url.path
    return path.startswith(files.PREFIX) or bool(PATH.match(path) and _SERVICE_PATH.match(path))


def install(app: FastAPI) -> None:
    registry = Registry()
    auth.install(app, registry)
    events.install(registry)
    tasks.install(registry)
    projects.install(registry)
    models.install(registry)
    misc.install(registry)
    Dispatcher(registry, auth.authenticate).install(app)
    files.install(app)
    openapi.install(app, registry)
    app.state.clearml_registry = registry
    app.state.clearml_tasks = KnownTasks()
    add_error_shape(app, _ours, render_shape)
