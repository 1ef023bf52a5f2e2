"""The ClickHouse schema and its versioned upgrades.

Every table is ordered so that the reads the APIs make are range scans of one job.
``migrate`` applies, in order, the steps newer than the version recorded in
``schema_version``; a step never loses data: a table whose layout changes is rebuilt from
what it holds (or from the rows it summarises) before the old one goes.
"""

from __future__ import annotations

from .engine import Engine
from .migrations import apply_steps
from .rollup_sql import LATEST_SELECT, STEP2_LEVELS, STEP4_LEVELS, STEP16_LEVELS, by_worker, rollup_select


def _sql(text: str) -> str:
    """A query built here, as a migration statement: braces doubled, ``{db}`` kept for ``format``."""
    return text.replace("{", "{{").replace("}", "}}").replace("{{db}}", "{db}")


# The columns of a series' summary row (``scalars_latest``), after its key.
_LATEST_COLUMNS = """            last SimpleAggregateFunction(max, Tuple(Int64, DateTime64(6), Float64)),
            first_iter SimpleAggregateFunction(min, Int64),
            last_iter SimpleAggregateFunction(max, Int64),
            first_ts SimpleAggregateFunction(min, DateTime64(3)),
            last_ts SimpleAggregateFunction(max, DateTime64(3)),
            min_value SimpleAggregateFunction(min, Nullable(Float64)),
            max_value SimpleAggregateFunction(max, Nullable(Float64)),
            points SimpleAggregateFunction(sum, UInt64)
"""


# The columns of a chart rollup block (``scalars_rollup``), after its key.
_ROLLUP_COLUMNS = """            sum SimpleAggregateFunction(sum, Float64), n SimpleAggregateFunction(sum, Int64),
            count SimpleAggregateFunction(sum, Int64),
            min SimpleAggregateFunction(min, Nullable(Float64)), max SimpleAggregateFunction(max, Nullable(Float64)),
            last SimpleAggregateFunction(max, Tuple(Int64, DateTime64(6), Float64)),
            first_x SimpleAggregateFunction(min, Int64), last_x SimpleAggregateFunction(max, Int64),
            first_iter SimpleAggregateFunction(min, Int64), last_iter SimpleAggregateFunction(max, Int64)
"""


def _system_rollup_columns(period: str) -> str:
    return f"""job String, worker LowCardinality(String), metric LowCardinality(String),
            device LowCardinality(String), {period},
            sum SimpleAggregateFunction(sum, Float64), count SimpleAggregateFunction(sum, UInt64),
            min SimpleAggregateFunction(min, Float64), max SimpleAggregateFunction(max, Float64),
            last SimpleAggregateFunction(max, Tuple(DateTime64(3), Float64))"""


def _system_rollup_view(table: str, period: str) -> str:
    name = period.split(" AS ")[1]
    return f"""CREATE MATERIALIZED VIEW IF NOT EXISTS {{db}}.{table}_mv TO {{db}}.{table} AS
            SELECT job, worker, metric, device, {period}, sum(value) AS sum, count() AS count,
                   min(value) AS min, max(value) AS max, (max(ts), argMax(value, ts)) AS last
            FROM {{db}}.system GROUP BY job, worker, metric, device, {name}"""


# Each step is a list of statements; ``{db}`` is the database name. Append new steps, never edit old ones.
MIGRATIONS: list[list[str]] = [
    [
        """CREATE TABLE IF NOT EXISTS {db}.jobs (
            job String, project String, name String, status LowCardinality(String),
            created DateTime64(3), started Nullable(DateTime64(3)), ended Nullable(DateTime64(3)),
            updated DateTime64(3), tags Array(String), config String, instance_type String,
            error_message String, leader String, locked UInt8, deleted UInt8, version UInt64
        ) ENGINE = ReplacingMergeTree(version) ORDER BY job""",
        """CREATE TABLE IF NOT EXISTS {db}.workers (
            job String, worker String, status LowCardinality(String), host String,
            exit_code Nullable(Int32), started Nullable(DateTime64(3)), ended Nullable(DateTime64(3)),
            updated DateTime64(3), deleted UInt8, version UInt64
        ) ENGINE = ReplacingMergeTree(version) ORDER BY (job, worker)""",
        """CREATE TABLE IF NOT EXISTS {db}.scalars (
            job String, metric String, variant String, iter Int64, ts DateTime64(3), value Float64,
            worker LowCardinality(String), model_event UInt8, inserted DateTime64(6) DEFAULT now64(6)
        ) ENGINE = ReplacingMergeTree(inserted) ORDER BY (job, metric, variant, iter)""",
        """CREATE TABLE IF NOT EXISTS {db}.scalars_latest (
            job String, metric String, variant String,
            last AggregateFunction(argMax, Float64, Tuple(Int64, DateTime64(6))),
            first_iter SimpleAggregateFunction(min, Int64),
            last_iter SimpleAggregateFunction(max, Int64),
            first_ts SimpleAggregateFunction(min, DateTime64(3)),
            last_ts SimpleAggregateFunction(max, DateTime64(3)),
            min_value SimpleAggregateFunction(min, Nullable(Float64)),
            max_value SimpleAggregateFunction(max, Nullable(Float64)),
            points SimpleAggregateFunction(sum, UInt64)
        ) ENGINE = AggregatingMergeTree ORDER BY (job, metric, variant)""",
        """CREATE MATERIALIZED VIEW IF NOT EXISTS {db}.scalars_latest_mv TO {db}.scalars_latest AS
            SELECT job, metric, variant, argMaxState(value, (iter, inserted)) AS last,
                   min(iter) AS first_iter, max(iter) AS last_iter, min(ts) AS first_ts, max(ts) AS last_ts,
                   minIfOrNull(value, isFinite(value)) AS min_value,
                   maxIfOrNull(value, isFinite(value)) AS max_value,
                   count() AS points
            FROM {db}.scalars GROUP BY job, metric, variant""",
        """CREATE TABLE IF NOT EXISTS {db}.events (
            job String, kind LowCardinality(String), metric String, variant String, iter Int64,
            key String, ts DateTime64(3), worker LowCardinality(String), url String, payload String,
            model_event UInt8, inserted DateTime64(6) DEFAULT now64(6)
        ) ENGINE = ReplacingMergeTree(inserted) ORDER BY (job, kind, metric, variant, iter, key)""",
        """CREATE TABLE IF NOT EXISTS {db}.logs (
            job String, ts DateTime64(3), worker LowCardinality(String), seq UInt64,
            level LowCardinality(String), msg String,
            INDEX msg_ngrams lower(msg) TYPE ngrambf_v1(3, 65536, 2, 0) GRANULARITY 1
        ) ENGINE = ReplacingMergeTree ORDER BY (job, ts, worker, seq)""",
        """CREATE TABLE IF NOT EXISTS {db}.log_sizes (
            job String, worker LowCardinality(String),
            bytes SimpleAggregateFunction(sum, UInt64), lines SimpleAggregateFunction(sum, UInt64)
        ) ENGINE = AggregatingMergeTree ORDER BY (job, worker)""",
        """CREATE MATERIALIZED VIEW IF NOT EXISTS {db}.log_sizes_mv TO {db}.log_sizes AS
            SELECT job, worker, sum(length(msg) + 1) AS bytes, count() AS lines
            FROM {db}.logs GROUP BY job, worker""",
        """CREATE TABLE IF NOT EXISTS {db}.system (
            job String, worker LowCardinality(String), metric LowCardinality(String),
            device LowCardinality(String), ts DateTime64(3), value Float64
        ) ENGINE = ReplacingMergeTree ORDER BY (job, worker, metric, device, ts)""",
        """CREATE TABLE IF NOT EXISTS {db}.system_1m (
            job String, worker LowCardinality(String), metric LowCardinality(String),
            device LowCardinality(String), minute DateTime,
            sum SimpleAggregateFunction(sum, Float64), count SimpleAggregateFunction(sum, UInt64),
            min SimpleAggregateFunction(min, Float64), max SimpleAggregateFunction(max, Float64),
            last AggregateFunction(argMax, Float64, DateTime64(3))
        ) ENGINE = AggregatingMergeTree ORDER BY (job, worker, metric, device, minute)""",
        """CREATE MATERIALIZED VIEW IF NOT EXISTS {db}.system_1m_mv TO {db}.system_1m AS
            SELECT job, worker, metric, device, toStartOfMinute(ts) AS minute,
                   sum(value) AS sum, count() AS count, min(value) AS min, max(value) AS max,
                   argMaxState(value, ts) AS last
            FROM {db}.system GROUP BY job, worker, metric, device, minute""",
        """CREATE TABLE IF NOT EXISTS {db}.api_keys (
            key_id String, secret_hash String, name String, projects Array(String),
            role LowCardinality(String), created DateTime64(3), revoked Nullable(DateTime64(3)),
            version UInt64
        ) ENGINE = ReplacingMergeTree(version) ORDER BY key_id""",
        """CREATE TABLE IF NOT EXISTS {db}.server_state (
            name String, value String, version UInt64
        ) ENGINE = ReplacingMergeTree(version) ORDER BY name""",
    ],
    [
        # Charts read blocks of this rollup, so their cost follows the number of buckets, not the history.
        """CREATE TABLE IF NOT EXISTS {db}.scalars_rollup (
            job String, metric String, variant String, axis UInt8, level UInt8, block Int64,
            sum SimpleAggregateFunction(sum, Float64), n SimpleAggregateFunction(sum, Int64),
            count SimpleAggregateFunction(sum, Int64),
            min SimpleAggregateFunction(min, Nullable(Float64)), max SimpleAggregateFunction(max, Nullable(Float64)),
            last AggregateFunction(argMax, Float64, Tuple(Int64, DateTime64(6))),
            first_x SimpleAggregateFunction(min, Int64), last_x SimpleAggregateFunction(max, Int64),
            first_iter SimpleAggregateFunction(min, Int64), last_iter SimpleAggregateFunction(max, Int64)
        ) ENGINE = AggregatingMergeTree ORDER BY (job, metric, variant, axis, level, block)""",
        "CREATE MATERIALIZED VIEW IF NOT EXISTS {db}.scalars_rollup_mv TO {db}.scalars_rollup AS "
        + _sql(rollup_select("{db}.scalars", last="state", levels=STEP2_LEVELS)),
        "INSERT INTO {db}.scalars_rollup "
        + _sql(rollup_select("{db}.scalars FINAL", last="state", levels=STEP2_LEVELS)),
    ],
    [
        # Sorted iterations and timestamps compress to almost nothing as deltas; values as XOR of neighbours.
        # Existing parts take the codecs when they are next merged.
        "ALTER TABLE {db}.scalars MODIFY COLUMN iter Int64 CODEC(Delta, ZSTD(1)), "
        "MODIFY COLUMN ts DateTime64(3) CODEC(DoubleDelta, ZSTD(1)), "
        "MODIFY COLUMN value Float64 CODEC(Gorilla, ZSTD(1))",
        "ALTER TABLE {db}.system MODIFY COLUMN ts DateTime64(3) CODEC(DoubleDelta, ZSTD(1)), "
        "MODIFY COLUMN value Float64 CODEC(Gorilla, ZSTD(1))",
        "ALTER TABLE {db}.logs MODIFY COLUMN ts DateTime64(3) CODEC(DoubleDelta, ZSTD(1)), "
        "MODIFY COLUMN seq UInt64 CODEC(Delta, ZSTD(1)), MODIFY COLUMN msg String CODEC(ZSTD(1))",
    ],
    [
        # The last value of a rollup row becomes a plain maximum of (x, inserted, value) - or (ts, value) -
        # instead of an argMax state of a tuple, which costs several milliseconds to read in every chart and
        # series and most of the views' work on insert.
        # The per-minute rollup is rebuilt from itself (the time of a minute's last sample is not in the old
        # state, so it is taken as the minute's end); the chart rollup is rebuilt from the points.
        "DROP VIEW IF EXISTS {db}.system_1m_mv",
        f"""CREATE TABLE {{db}}.system_1m_v4 ({_system_rollup_columns("minute DateTime")})
        ENGINE = AggregatingMergeTree ORDER BY (job, worker, metric, device, minute)""",
        """INSERT INTO {db}.system_1m_v4
            SELECT job, worker, metric, device, minute, sum(sum), sum(count), min(min), max(max),
                (toDateTime64(minute, 3) + toIntervalMillisecond(59999), argMaxMerge(last))
            FROM {db}.system_1m GROUP BY job, worker, metric, device, minute""",
        "RENAME TABLE {db}.system_1m TO {db}.system_1m_v3, {db}.system_1m_v4 TO {db}.system_1m",
        "DROP TABLE {db}.system_1m_v3",
        _system_rollup_view("system_1m", "toStartOfMinute(ts) AS minute"),
        # Hourly means: a series at whole-hour steps (a week at 1 h) reads 60x fewer rows.
        f"""CREATE TABLE IF NOT EXISTS {{db}}.system_1h ({_system_rollup_columns("hour DateTime")})
        ENGINE = AggregatingMergeTree ORDER BY (job, worker, metric, device, hour)""",
        _system_rollup_view("system_1h", "toStartOfHour(ts) AS hour"),
        """INSERT INTO {db}.system_1h
            SELECT job, worker, metric, device, toStartOfHour(minute) AS hour, sum(sum), sum(count), min(min),
                max(max), max(last)
            FROM {db}.system_1m GROUP BY job, worker, metric, device, hour""",
        "DROP VIEW IF EXISTS {db}.scalars_latest_mv",
        "CREATE TABLE {db}.scalars_latest_v4 (\n            job String, metric String, variant String,\n"
        + _LATEST_COLUMNS
        + "        ) ENGINE = AggregatingMergeTree ORDER BY (job, metric, variant)",
        # a later report of the last iteration (inserted after the upgrade) replaces the value kept here
        """INSERT INTO {db}.scalars_latest_v4
            SELECT job, metric, variant, (max(last_iter), toDateTime64(0, 6), argMaxMerge(last)),
                min(first_iter), max(last_iter), min(first_ts), max(last_ts), min(min_value), max(max_value),
                sum(points)
            FROM {db}.scalars_latest GROUP BY job, metric, variant""",
        "RENAME TABLE {db}.scalars_latest TO {db}.scalars_latest_v3, {db}.scalars_latest_v4 TO {db}.scalars_latest",
        "DROP TABLE {db}.scalars_latest_v3",
        "CREATE MATERIALIZED VIEW IF NOT EXISTS {db}.scalars_latest_mv TO {db}.scalars_latest AS "
        + LATEST_SELECT.format(source="{db}.scalars"),
        "DROP VIEW IF EXISTS {db}.scalars_rollup_mv",
        "DROP TABLE IF EXISTS {db}.scalars_rollup",
        "CREATE TABLE {db}.scalars_rollup (\n"
        "            job String, metric String, variant String, axis UInt8, level UInt8, block Int64,\n"
        + _ROLLUP_COLUMNS
        + "        ) ENGINE = AggregatingMergeTree ORDER BY (job, metric, variant, axis, level, block)",
        "CREATE MATERIALIZED VIEW IF NOT EXISTS {db}.scalars_rollup_mv TO {db}.scalars_rollup AS "
        + _sql(rollup_select("{db}.scalars", levels=STEP4_LEVELS)),
        "INSERT INTO {db}.scalars_rollup " + _sql(rollup_select("{db}.scalars FINAL", levels=STEP4_LEVELS)),
    ],
    [
        # The writer inserts the chart rollup's blocks itself (store/rollup.py): built by the view they
        # cost 50-250 ms per 100,000 points, more the sparser the points are in time.
        "DROP VIEW IF EXISTS {db}.scalars_rollup_mv",
    ],
    [
        # The writer inserts each batch's summary rows itself (store/latest.py): grouped by the view they
        # cost 15-20 ms per 100,000 points.
        "DROP VIEW IF EXISTS {db}.scalars_latest_mv",
    ],
    [
        # Every state a job was written as, for a day: a writer reads what others wrote since it read the job,
        # and merges their changes with its own (store/job_merge.py); rows of ``jobs`` are replaced by merges.
        """CREATE TABLE IF NOT EXISTS {db}.job_writes (
            job String, version UInt64, state String, written DateTime DEFAULT now()
        ) ENGINE = MergeTree ORDER BY (job, version) TTL written + INTERVAL 1 DAY""",
    ],
    [
        # Series' summaries again from their stored points: until the writer left out the points a batch
        # replaces, an iteration reported again (a run resumed from a checkpoint) was counted once more.
        "DROP TABLE IF EXISTS {db}.scalars_latest_v7",
        "DROP TABLE IF EXISTS {db}.scalars_latest_v8",
        "CREATE TABLE {db}.scalars_latest_v8 AS {db}.scalars_latest",
        "INSERT INTO {db}.scalars_latest_v8 " + LATEST_SELECT.format(source="{db}.scalars FINAL"),
        "RENAME TABLE {db}.scalars_latest TO {db}.scalars_latest_v7, {db}.scalars_latest_v8 TO {db}.scalars_latest",
        "DROP TABLE {db}.scalars_latest_v7",
    ],
    [
        # Web UI sessions (store/sessions.py): a hash of each session id, so that logging out or revoking the key
        # ends a session on every replica; a row goes a day after the session expires.
        """CREATE TABLE IF NOT EXISTS {db}.sessions (
            session_hash String, key_id String, created DateTime64(3), expires DateTime64(3),
            ended Nullable(DateTime64(3)), version UInt64
        ) ENGINE = ReplacingMergeTree(version) ORDER BY session_hash TTL toDateTime(expires) + INTERVAL 1 DAY""",
    ],
    [
        # The secrets of access key pairs (store/keys.py), sealed with the server's master key, with the
        # fingerprint of that master key; a pair's other fields are a row of api_keys like any key's.
        """CREATE TABLE IF NOT EXISTS {db}.key_pair_secrets (
            key_id String, sealed_secret String, master_key String, version UInt64
        ) ENGINE = ReplacingMergeTree(version) ORDER BY key_id""",
        # Nonces of signed requests (store/nonces.py), claimed by the first request that shows one; a row goes an
        # hour after the request's date has left the window in which it is accepted.
        """CREATE TABLE IF NOT EXISTS {db}.signature_nonces (
            key_id String, nonce String, claim String, claimed DateTime64(6) DEFAULT now64(6),
            expires DateTime64(3)
        ) ENGINE = MergeTree ORDER BY (key_id, nonce) TTL toDateTime(expires) + INTERVAL 1 HOUR""",
    ],
    [
        # What a log line may carry besides its text (the metric, variant and iteration a ClearML log event names),
        # kept apart from ``logs`` for the few lines that have any; a line is named by its position (ts, worker,
        # seq), and a line sent again replaces its row.
        """CREATE TABLE IF NOT EXISTS {db}.log_fields (
            job String, ts DateTime64(3), worker LowCardinality(String), seq UInt64,
            metric String, variant String, iter Nullable(Int64)
        ) ENGINE = ReplacingMergeTree ORDER BY (job, ts, worker, seq)""",
    ],
    [
        # A scalar's key holds the worker (rank) that reported it: a rank's point never replaces another rank's
        # point of the same iteration, a resend still replaces itself (charts show the leader's series by default,
        # store/scalars.py). The points, their summary rows and their chart rollup move to tables keyed per worker;
        # every stored version of a point is copied (the engine keeps the newest of each new key), the summary and
        # the rollup are rebuilt from them.
        "DROP TABLE IF EXISTS {db}.scalars_by_worker",
        "DROP TABLE IF EXISTS {db}.scalars_unranked",
        "CREATE TABLE {db}.scalars_by_worker AS {db}.scalars "
        "ENGINE = ReplacingMergeTree(inserted) ORDER BY (job, metric, variant, worker, iter)",
        "INSERT INTO {db}.scalars_by_worker SELECT * FROM {db}.scalars",
        "RENAME TABLE {db}.scalars TO {db}.scalars_unranked, {db}.scalars_by_worker TO {db}.scalars",
        "DROP TABLE {db}.scalars_unranked",
        "DROP TABLE IF EXISTS {db}.scalars_latest_by_worker",
        "DROP TABLE IF EXISTS {db}.scalars_latest_unranked",
        "CREATE TABLE {db}.scalars_latest_by_worker (\n"
        "            job String, metric String, variant String, worker LowCardinality(String),\n"
        + _LATEST_COLUMNS
        + "        ) ENGINE = AggregatingMergeTree ORDER BY (job, metric, variant, worker)",
        "INSERT INTO {db}.scalars_latest_by_worker " + by_worker(LATEST_SELECT).format(source="{db}.scalars FINAL"),
        "RENAME TABLE {db}.scalars_latest TO {db}.scalars_latest_unranked, "
        "{db}.scalars_latest_by_worker TO {db}.scalars_latest",
        "DROP TABLE {db}.scalars_latest_unranked",
        "DROP TABLE IF EXISTS {db}.scalars_rollup_by_worker",
        "DROP TABLE IF EXISTS {db}.scalars_rollup_unranked",
        "CREATE TABLE {db}.scalars_rollup_by_worker (\n"
        "            job String, metric String, variant String, worker LowCardinality(String),\n"
        "            axis UInt8, level UInt8, block Int64,\n"
        + _ROLLUP_COLUMNS
        + "        ) ENGINE = AggregatingMergeTree ORDER BY (job, metric, variant, worker, axis, level, block)",
        "INSERT INTO {db}.scalars_rollup_by_worker "
        + _sql(by_worker(rollup_select("{db}.scalars FINAL", levels=STEP4_LEVELS))),
        "RENAME TABLE {db}.scalars_rollup TO {db}.scalars_rollup_unranked, "
        "{db}.scalars_rollup_by_worker TO {db}.scalars_rollup",
        "DROP TABLE {db}.scalars_rollup_unranked",
    ],
    [
        # Insights (store/findings.py, store/insight_config.py): findings of the detectors, a row per finding
        # replaced as it is updated and resolved; claims that make a finding open, and its alerts go out, once
        # whichever replica evaluates; per-project thresholds; webhook destinations and what was sent to them.
        """CREATE TABLE IF NOT EXISTS {db}.insight_findings (
            finding_id String, project String, job String, kind LowCardinality(String), signal String,
            severity LowCardinality(String), worker String, device String, started DateTime64(3),
            ended Nullable(DateTime64(3)), opened DateTime64(3), updated DateTime64(3),
            resolved Nullable(DateTime64(3)), evidence String, version UInt64
        ) ENGINE = ReplacingMergeTree(version) ORDER BY (job, finding_id)""",
        """CREATE TABLE IF NOT EXISTS {db}.insight_claims (
            name String, claim String, claimed DateTime64(6) DEFAULT now64(6)
        ) ENGINE = MergeTree ORDER BY name TTL toDateTime(claimed) + INTERVAL 90 DAY""",
        """CREATE TABLE IF NOT EXISTS {db}.insight_settings (
            project String, thresholds String, version UInt64
        ) ENGINE = ReplacingMergeTree(version) ORDER BY project""",
        """CREATE TABLE IF NOT EXISTS {db}.insight_webhooks (
            project String, webhook_id String, name String, url String, format LowCardinality(String),
            created DateTime64(3), deleted UInt8, version UInt64
        ) ENGINE = ReplacingMergeTree(version) ORDER BY (project, webhook_id)""",
        """CREATE TABLE IF NOT EXISTS {db}.insight_deliveries (
            webhook_id String, finding_id String, event LowCardinality(String), status LowCardinality(String),
            attempts UInt32, error String, at DateTime64(3)
        ) ENGINE = MergeTree ORDER BY (webhook_id, finding_id, event) TTL toDateTime(at) + INTERVAL 30 DAY""",
    ],
    [
        # Where a worker sits in a distributed job (job -> nodes -> ranks): its kind ('node' for the node wrapper
        # `jobpulse run`, 'rank' for a process of a launch, 'process' for a lone one), the node worker it runs on
        # ('' for a node or a lone process), and its global and local rank (NULL where it has none).
        "ALTER TABLE {db}.workers ADD COLUMN IF NOT EXISTS kind LowCardinality(String) DEFAULT 'process', "
        "ADD COLUMN IF NOT EXISTS node String DEFAULT '', ADD COLUMN IF NOT EXISTS rank Nullable(Int32), "
        "ADD COLUMN IF NOT EXISTS local_rank Nullable(Int32)",
    ],
    [
        # Uploaded files (store/files.py): a row per file naming its newest version (a deletion is a row too), and
        # the version's bytes in chunks of 1 MiB; small granules, so that reading one chunk reads little else.
        """CREATE TABLE IF NOT EXISTS {db}.files (
            job String, name String, version UInt64, size UInt64, chunks UInt32, head String,
            uploaded DateTime64(3), deleted UInt8
        ) ENGINE = ReplacingMergeTree(version) ORDER BY (job, name)""",
        """CREATE TABLE IF NOT EXISTS {db}.file_chunks (
            job String, name String, version UInt64, chunk UInt32, data String
        ) ENGINE = MergeTree ORDER BY (job, name, version, chunk)
        SETTINGS index_granularity = 256, index_granularity_bytes = 1048576""",
    ],
    [
        # The chart rollup keeps its levels up to 2**20 iterations and 2**26 ms (rollup_sql.STEP16_LEVELS): the
        # blocks of the coarser ones, which no chart reads any more, go.
        f"DELETE FROM {{db}}.scalars_rollup WHERE (axis = 0 AND level > {STEP16_LEVELS[0][-1]}) "
        f"OR (axis = 1 AND level > {STEP16_LEVELS[1][-1]})",
    ],
    [
        # Claims of insight findings and nonces of signed requests are kept once per name (store/once.py): the
        # engine remembers the deduplication tokens of the last 10,000 inserts of each table.
        "ALTER TABLE {db}.insight_claims MODIFY SETTING non_replicated_deduplication_window = 10000",
        "ALTER TABLE {db}.signature_nonces MODIFY SETTING non_replicated_deduplication_window = 10000",
    ],
    [
        # The chart rollup keeps every other level (rollup_sql.ROLLUP_LEVELS: 2**6, 2**8 ... iterations, 2**12,
        # 2**14 ... ms): the blocks of the odd levels go, and charts read the next finer even level instead.
        "DELETE FROM {db}.scalars_rollup WHERE level % 2 = 1",
    ],
]

SCHEMA_VERSION = len(MIGRATIONS)


def migrate(engine: Engine, db: str, cluster: str | None = None) -> int:
    """Bring database ``db`` to the newest schema, on one server or on ClickHouse cluster ``cluster`` (by default
    the engine's); answers the version it was at before. Several servers may call it at once: each step is applied
    once (migrations.py)."""
    cluster = getattr(engine, "cluster", "") if cluster is None else cluster
    return apply_steps(engine, db, MIGRATIONS, cluster=cluster)


def set_raw_ttl(engine: Engine, db: str, days: int, cluster: str = "") -> None:
    """Keep raw system samples for ``days`` days (0: forever); per-minute rollups stay. On ClickHouse cluster
    ``cluster`` the TTL is that of the samples' local tables, on every node."""
    table = "system_local" if cluster else "system"
    found = engine.query(
        "SELECT engine_full FROM system.tables WHERE database = {db:String} AND name = {table:String}",
        {"db": db, "table": table},
    ).column("engine_full")
    engine_full = found[0].as_py() if len(found) else ""
    on = f"{db}.{table}" + (f" ON CLUSTER {cluster}" if cluster else "")
    wanted = f"INTERVAL {int(days)} DAY"
    if days > 0 and wanted not in engine_full.replace("toIntervalDay(", "INTERVAL ").replace(")", " DAY"):
        engine.command(f"ALTER TABLE {on} MODIFY TTL toDateTime(ts) + INTERVAL {int(days)} DAY")
    elif days <= 0 and " TTL " in engine_full:
        engine.command(f"ALTER TABLE {on} REMOVE TTL")
