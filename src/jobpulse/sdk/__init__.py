"""The jobpulse SDK: report scalars, plots, images and console output of a training job.

Modules, from the caller down:

- ``session`` (``init``, ``log``, ``finish``) and ``run`` (the ``Run`` and its report calls); ``checks`` (the
  arguments' rules and ``RefusedError``); ``env`` (rank, node and worker from the launcher); the framework hooks
  ``lightning`` and ``transformers``.
- ``console`` (stdout/stderr/logging capture), ``levels`` (a line's log level), ``passthrough`` (marked output
  under ``jobpulse run``), ``seq`` (log line sequence numbers), ``problems`` (what is said once on stderr).
- ``sender`` (the background thread), with ``batchsize`` (how large a batch grows) and ``answers`` (what a
  server's answer means: sent, kept, retried, halved); ``wire`` (records to requests), ``values`` (numbers,
  steps, plots), ``arrow`` (scalars as Arrow streams), ``split`` (halving a request found too large), ``media``
  (images), ``transport`` (HTTP).
- ``spool`` (the local directory of undelivered requests), ``replay`` and ``sync`` (sending what it holds).
"""
