"""What RESULTS.md shows: its columns (the systems), and its rows (each figure, its unit, whether higher is better,
and the key each system's worker reports it under). ``report.py`` renders them."""

from __future__ import annotations

# column id -> (system, figure-key suffix added to a row's peer key, heading)
COLUMNS: list[tuple[str, str, str]] = [
    ("jobpulse", "jobpulse", "jobpulse"),
    ("mlflow", "mlflow", "MLflow"),
    ("aim_local", "aim", "Aim (local repo)"),
    ("aim_server", "aim", "Aim (aim server)"),
    ("tensorboard", "tensorboard", "TensorBoard"),
    ("victoriametrics", "victoriametrics", "VictoriaMetrics"),
    ("clearml", "clearml", "ClearML (offline)"),
    ("wandb", "wandb", "W&B (offline)"),
]

W1 = {
    "mlflow": "w1.ingest",
    "aim_local": "w1.ingest.local",
    "aim_server": "w1.ingest.remote",
    "tensorboard": "w1.ingest",
}
W6 = {
    "mlflow": "w6.log_call",
    "aim_local": "w6.log_call.local",
    "aim_server": "w6.log_call.remote",
    "tensorboard": "w6.log_call",
    "clearml": "w6.log_call",
    "wandb": "w6.log_call",
}

# label, unit, higher is better, jobpulse key, {column: key}
ROWS: list[tuple[str, str, bool, str, dict[str, str]]] = [
    ("1. scalar ingest, HTTP columnar", "points/s", True, "w1.ingest.columnar", W1),
    ("1. scalar ingest, HTTP Arrow", "points/s", True, "w1.ingest.arrow", W1),
    (
        "1. scalar ingest, HTTP JSON lines (bodies written before the clock, as a file is posted)",
        "points/s",
        True,
        "w1.ingest.jsonl",
        W1,
    ),
    (
        "1. scalar ingest, HTTP JSON lines written in the loop by Python (orjson per point)",
        "points/s",
        True,
        "w1.ingest.jsonl_python",
        W1,
    ),
    ("1. scalar ingest, SDK end to end", "points/s", True, "w1.ingest.sdk", W1),
    (
        "2. read one metric's full history",
        "s",
        False,
        "w2.read_full",
        {"mlflow": "w2.read_full", "aim_local": "w2.read_full", "tensorboard": "w2.read_full"},
    ),
    (
        "2. ~1,000-point chart of it, first request (computed)",
        "s",
        False,
        "w2.chart_first",
        {"mlflow": "w2.chart", "aim_local": "w2.chart", "tensorboard": "w2.chart"},
    ),
    (
        "2. ~1,000-point chart of it, asked again (jobpulse: from its memory of recent answers)",
        "s",
        False,
        "w2.chart",
        {"mlflow": "w2.chart", "aim_local": "w2.chart", "tensorboard": "w2.chart"},
    ),
    (
        "2. 1,000-point chart of the big series (jobpulse), first request, vs peers' chart above",
        "s",
        False,
        "w2.chart_big_first",
        {"mlflow": "w2.chart", "aim_local": "w2.chart", "tensorboard": "w2.chart"},
    ),
    (
        "2. 1,000-point chart of the big series (jobpulse), asked again, vs peers' chart above",
        "s",
        False,
        "w2.chart_big",
        {"mlflow": "w2.chart", "aim_local": "w2.chart", "tensorboard": "w2.chart"},
    ),
    (
        "2. loading the big series / the peers' read-back series",
        "points/s",
        True,
        "w2.ingest_big",
        {"mlflow": "w2.load", "aim_local": "w2.load", "tensorboard": "w2.load"},
    ),
    (
        "3. ingest of 200 runs x 5 metrics",
        "points/s",
        True,
        "w3.ingest",
        {"mlflow": "w3.ingest", "aim_local": "w3.ingest", "tensorboard": "w3.ingest"},
    ),
    (
        "3. latest value of every metric of all 200 runs",
        "s",
        False,
        "w3.latest",
        {"mlflow": "w3.latest", "aim_local": "w3.latest", "tensorboard": "w3.latest"},
    ),
    (
        "4. system metrics ingest (64 GPUs x 10 metrics x 1 h at 1 s)",
        "samples/s",
        True,
        "w4.ingest",
        {"victoriametrics": "w4.ingest"},
    ),
    (
        "4. per-GPU 1-minute series over the hour, first request (computed; VictoriaMetrics: nocache=1)",
        "s",
        False,
        "w4.query_first",
        {"victoriametrics": "w4.query_first"},
    ),
    (
        "4. the same, asked again (jobpulse: from its memory; VictoriaMetrics: from its rollup result cache)",
        "s",
        False,
        "w4.query",
        {"victoriametrics": "w4.query"},
    ),
    ("5. log ingest (8 workers)", "lines/s", True, "w5.ingest", {}),
    ("5. last 1,000 lines of one worker", "s", False, "w5.tail", {}),
    ("5. search across all workers (1,000 newest matches)", "s", False, "w5.search", {}),
    ("6. SDK cost of one log() of 5 scalars, sender running", "us/call", False, "w6.log_call", W6),
    (
        "7. server memory at rest (PSS)",
        "bytes",
        False,
        "w7.mem_rest",
        {"mlflow": "w7.mem_rest", "aim_server": "w7.mem_rest", "victoriametrics": "w7.mem_rest"},
    ),
    (
        "7. server memory peak during workload 1 (VictoriaMetrics: workload 4)",
        "bytes",
        False,
        "w7.mem_peak_w1",
        {"mlflow": "w7.mem_peak_w1", "aim_server": "w7.mem_peak_w1", "victoriametrics": "w7.mem_peak_w4"},
    ),
    (
        "7. disk bytes per million scalar points",
        "bytes",
        False,
        "w7.disk_per_million",
        {"mlflow": "w7.disk_per_million", "aim_local": "w7.disk_per_million", "tensorboard": "w7.disk_per_million"},
    ),
    (
        "7. install size (package and its dependencies)",
        "bytes",
        False,
        "w7.install_server",
        {
            "mlflow": "w7.install_server",
            "aim_local": "w7.install_server",
            "tensorboard": "w7.install_server",
            "victoriametrics": "w7.install_server",
            "clearml": "w7.install_server",
            "wandb": "w7.install_server",
        },
    ),
    ("7. install size, jobpulse's SDK and agent alone (the base package)", "bytes", False, "w7.install_sdk", {}),
]
