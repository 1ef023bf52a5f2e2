"""The jobpulse SDK: report scalars, plots, images and console output of a training job.

Modules: ``run`` (the ``Run`` and its report calls), ``sender`` (the background thread), ``spool`` (the
local directory of undelivered requests), ``wire`` (encoding), ``transport`` (HTTP),
``console`` (stdout/stderr/logging capture), ``seq`` (log line sequence numbers),
``env`` (rank and worker from the launcher), ``media`` (images), ``replay`` (resending
spooled requests), ``session`` (``init``, ``log``, ``finish``), and the framework hooks
``lightning`` and ``transformers``.
"""
