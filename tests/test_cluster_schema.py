"""The schema's cluster form (``--cluster``), generated from the one schema description.

No ClickHouse cluster runs here: every statement the cluster form has is parsed by the engine itself (``EXPLAIN
AST``, which needs no cluster), and its shape is checked. The contract suite runs against a real cluster when
JOBPULSE_TEST_CLICKHOUSE_URL and JOBPULSE_TEST_CLICKHOUSE_CLUSTER name one (docs/deploy.md).
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from jobpulse.errors import StoreUnavailable
from jobpulse.settings import load_settings
from jobpulse.store import open_store, schema
from jobpulse.store.cluster_schema import ClusterSchema, UnknownStatement, delete_on_cluster
from jobpulse.store.engine import EmbeddedEngine
from jobpulse.store.migration_records import BOOKKEEPING
from jobpulse.store.statements import is_idempotent

DB, CLUSTER = "jp", "fleet"


def cluster_form() -> tuple[ClusterSchema, list[tuple[str, list[str]]]]:
    """Each statement of the migrations' tables and of every step, with its cluster form, in order."""
    form = ClusterSchema(DB, CLUSTER)
    texts = [text.format(db=DB) for text in BOOKKEEPING]
    texts += [text.format(db=DB) for step in schema.MIGRATIONS for text in step]
    return form, [(text, form.statements(text)) for text in texts]


def test_every_statement_of_the_cluster_form_is_parsed_by_the_engine(embedded_engine: EmbeddedEngine) -> None:
    form, pairs = cluster_form()
    # what a migrator runs to finish an interrupted rebuild, and to set the raw samples' TTL
    recovery = [
        *form.statements(f"TRUNCATE TABLE {DB}.system"),
        *form.statements(f"DROP TABLE IF EXISTS {DB}.system_1m_v4"),
        *form.statements(f"RENAME TABLE {DB}.system TO {DB}.system_old"),
        f"ALTER TABLE {DB}.system_local ON CLUSTER {CLUSTER} MODIFY TTL toDateTime(ts) + INTERVAL 7 DAY",
        f"ALTER TABLE {DB}.system_local ON CLUSTER {CLUSTER} REMOVE TTL",
        f"SYSTEM SYNC REPLICA {DB}.schema_lease",
        f"DROP TABLE IF EXISTS {DB}.system_local ON CLUSTER {CLUSTER}",  # what an interrupted first creation left
        f"DROP DATABASE IF EXISTS {DB} ON CLUSTER {CLUSTER} SYNC",  # the contract suite's databases, on a cluster
    ]
    statements = [sql for _, sqls in pairs for sql in sqls] + recovery
    assert len(statements) > 100
    for sql in statements:
        embedded_engine.query(f"EXPLAIN AST {sql}")  # raises on a statement the engine cannot parse


def test_every_ddl_statement_runs_on_the_whole_cluster() -> None:
    _, pairs = cluster_form()
    for _, sqls in pairs:
        for sql in sqls:
            assert sql.startswith("INSERT") or f" ON CLUSTER {CLUSTER}" in sql, sql


def test_a_table_with_a_job_column_is_replicated_per_shard_and_sharded_by_job() -> None:
    form = ClusterSchema(DB, CLUSTER)
    sqls = form.statements(schema.MIGRATIONS[0][0].format(db=DB))  # jobs
    assert len(sqls) == 2
    assert sqls[0].startswith(f"CREATE TABLE IF NOT EXISTS {DB}.jobs_local ON CLUSTER {CLUSTER} (")
    assert "ENGINE = ReplicatedReplacingMergeTree('/clickhouse/tables/{uuid}/{shard}', '{replica}', version)" in sqls[0]
    assert sqls[0].endswith("ORDER BY job")
    assert sqls[1] == (
        f"CREATE TABLE IF NOT EXISTS {DB}.jobs ON CLUSTER {CLUSTER} AS {DB}.jobs_local "
        f"ENGINE = Distributed({CLUSTER}, {DB}, jobs_local, cityHash64(job))"
    )


def test_a_table_without_a_job_column_is_replicated_on_every_node() -> None:
    form = ClusterSchema(DB, CLUSTER)
    text = next(t for t in schema.MIGRATIONS[0] if ".api_keys (" in t).format(db=DB)
    (sql,) = form.statements(text)
    assert sql.startswith(f"CREATE TABLE IF NOT EXISTS {DB}.api_keys ON CLUSTER {CLUSTER} (")
    assert "ReplicatedReplacingMergeTree('/clickhouse/tables/{uuid}/all', '{replica}', version)" in sql
    assert form.physical("api_keys") == "api_keys"


def test_a_materialized_view_reads_and_writes_the_local_tables() -> None:
    form, pairs = cluster_form()
    views = [sql for _, sqls in pairs for sql in sqls if sql.startswith("CREATE MATERIALIZED VIEW")]
    assert views
    for sql in views:
        target, select = sql.split(" AS SELECT ", 1)
        assert target.endswith("_local"), sql
        assert all(name.endswith("_local") for name in re.findall(r"\bjp\.(\w+)", select)), sql


def test_an_alter_of_a_sharded_table_changes_the_local_tables_and_the_distributed_columns() -> None:
    form, _ = cluster_form()
    sqls = form.statements(f"ALTER TABLE {DB}.system MODIFY COLUMN value Float64 CODEC(Gorilla, ZSTD(1))")
    assert sqls == [
        f"ALTER TABLE {DB}.system_local ON CLUSTER {CLUSTER} MODIFY COLUMN value Float64 CODEC(Gorilla, ZSTD(1))",
        f"ALTER TABLE {DB}.system ON CLUSTER {CLUSTER} MODIFY COLUMN value Float64",
    ]


def test_a_rebuild_swaps_the_local_tables_and_makes_the_distributed_tables_again() -> None:
    form, _ = cluster_form()
    form.statements(f"CREATE TABLE {DB}.system_new AS {DB}.system")
    sqls = form.statements(f"RENAME TABLE {DB}.system TO {DB}.system_old, {DB}.system_new TO {DB}.system")
    assert sqls[0] == (
        f"RENAME TABLE {DB}.system_local TO {DB}.system_old_local, {DB}.system_new_local TO {DB}.system_local "
        f"ON CLUSTER {CLUSTER}"
    )
    assert f"DROP TABLE IF EXISTS {DB}.system_new ON CLUSTER {CLUSTER}" in sqls
    made = [sql for sql in sqls if sql.startswith("CREATE TABLE")]
    assert [sql.split(" ON CLUSTER")[0] for sql in made] == [
        f"CREATE TABLE {DB}.system_old",
        f"CREATE TABLE {DB}.system",
    ]
    assert form.sharded("system") and form.sharded("system_old") and not form.sharded("system_new")


def test_a_rebuild_fills_each_shard_from_its_own_rows() -> None:
    form, pairs = cluster_form()
    fills = [sqls[0] for text, sqls in pairs if text.startswith("INSERT INTO")]
    assert fills and all(sql.endswith("SETTINGS parallel_distributed_insert_select = 2") for sql in fills)


def test_a_delete_runs_on_the_local_tables_of_every_node(embedded_engine: EmbeddedEngine) -> None:
    sharded = frozenset({"logs", "log_fields", "scalars"})
    by_job = delete_on_cluster(f"DELETE FROM {DB}.scalars WHERE job = {{job:String}}", CLUSTER, sharded)
    assert by_job == f"DELETE FROM {DB}.scalars_local ON CLUSTER {CLUSTER} WHERE job = {{job:String}}"
    fields = delete_on_cluster(
        f"DELETE FROM {DB}.log_fields WHERE (ts, worker, seq) IN (SELECT ts, worker, seq FROM {DB}.logs "
        "WHERE job = {job:String}) AND job = {job:String}",
        CLUSTER,
        sharded,
    )
    assert fields.startswith(f"DELETE FROM {DB}.log_fields_local ON CLUSTER {CLUSTER} WHERE")
    assert f"FROM {DB}.logs_local WHERE" in fields
    unsharded = delete_on_cluster(f"DELETE FROM {DB}.sessions WHERE key_id = 'k'", CLUSTER, sharded)
    assert unsharded == f"DELETE FROM {DB}.sessions ON CLUSTER {CLUSTER} WHERE key_id = 'k'"
    for sql in (by_job, fields, unsharded):
        embedded_engine.query(f"EXPLAIN AST {sql}", {"job": "j"})


@pytest.mark.parametrize(
    "text",
    [
        f"OPTIMIZE TABLE {DB}.system FINAL",
        f"CREATE TABLE {DB}.t (job String) ENGINE = Log",
        f"CREATE TABLE {DB}.t (job String) ENGINE = ReplicatedMergeTree ORDER BY job",
        f"DROP TABLE {DB}.never_created",
        f"ALTER TABLE {DB}.system DELETE WHERE job = 'x'",
        f"INSERT INTO {DB}.never_created SELECT * FROM {DB}.system",
        "CREATE TABLE other.t (job String) ENGINE = MergeTree ORDER BY job",
    ],
)
def test_a_statement_of_an_unknown_shape_is_refused(text: str) -> None:
    form, _ = cluster_form()
    with pytest.raises(UnknownStatement):
        form.statements(text)


@pytest.mark.parametrize(
    ("text", "idempotent"),
    [
        (f"CREATE TABLE IF NOT EXISTS {DB}.t (job String) ENGINE = MergeTree ORDER BY job", True),
        (f"CREATE TABLE {DB}.t_v2 AS {DB}.t", False),
        (f"DROP VIEW IF EXISTS {DB}.t_mv", True),
        (f"DROP TABLE {DB}.t_v1", False),
        (f"INSERT INTO {DB}.t_v2 SELECT * FROM {DB}.t", False),
        (f"RENAME TABLE {DB}.t TO {DB}.t_v1, {DB}.t_v2 TO {DB}.t", False),
        (f"ALTER TABLE {DB}.t MODIFY COLUMN ts DateTime64(3) CODEC(DoubleDelta, ZSTD(1))", True),
        (f"ALTER TABLE {DB}.t ADD COLUMN IF NOT EXISTS kind String, MODIFY TTL toDateTime(ts) + INTERVAL 1 DAY", True),
        (f"ALTER TABLE {DB}.t ADD COLUMN kind String", False),
        (f"OPTIMIZE TABLE {DB}.t FINAL", False),
    ],
)
def test_a_statement_is_idempotent_only_when_running_it_twice_does_what_once_does(text: str, idempotent: bool) -> None:
    assert is_idempotent(text) is idempotent


def test_a_cluster_name_that_is_not_an_identifier_is_refused() -> None:
    with pytest.raises(ValueError, match="--cluster"):
        load_settings({"cluster": "fleet; DROP"}, environ={})
    with pytest.raises(ValueError, match="JOBPULSE_CLUSTER"):
        load_settings(environ={"JOBPULSE_CLUSTER": "a-b"})
    assert load_settings({"cluster": "fleet_2"}, environ={}).cluster == "fleet_2"


def test_cluster_mode_needs_a_clickhouse_server(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="--cluster needs a ClickHouse server"):
        open_store("embedded", tmp_path, cluster=CLUSTER)


# A server without the embedded engine: chdb and pandas cannot be imported, as in a `jobpulse[cluster]` install.
WITHOUT_CHDB = """
import sys
class NotInstalled:
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in ("chdb", "pandas"):
            raise ModuleNotFoundError(f"No module named {name!r}", name=name)
sys.meta_path.insert(0, NotInstalled())
from jobpulse.cli import main
sys.exit(main(sys.argv[1:]))
"""


@pytest.mark.e2e
def test_a_server_without_chdb_says_the_embedded_store_needs_it(tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-c", WITHOUT_CHDB, "server", "--data-dir", str(tmp_path), "--no-write-credentials"],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "JOBPULSE_STORE": "embedded"},
    )
    assert done.returncode == 2
    assert "the embedded store needs chdb" in done.stderr and "--store clickhouse://" in done.stderr


# The store and the app over the HTTP transport, in a process where chdb and pandas cannot be imported.
OVER_HTTP_WITHOUT_CHDB = """
import sys
class NotInstalled:
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in ("chdb", "pandas"):
            raise ModuleNotFoundError(f"No module named {name!r}", name=name)
sys.meta_path.insert(0, NotInstalled())
from pathlib import Path
from starlette.testclient import TestClient
from jobpulse.server import create_app
from jobpulse.settings import Settings
from jobpulse.store import open_store
store = open_store(sys.argv[1], Path(sys.argv[2]))
with TestClient(create_app(store, Settings(data_dir=Path(sys.argv[2]), write_credentials=False))) as client:
    print(client.get("/readyz").status_code)
loaded = sorted(name for name in sys.modules if name.split(".")[0] in ("chdb", "pandas"))
print(loaded)
"""


@pytest.mark.e2e
def test_the_clickhouse_store_path_imports_neither_chdb_nor_pandas(clickhouse_url: str, tmp_path: Path) -> None:
    url = clickhouse_url.rstrip("/") + "/nochdb_check"
    done = subprocess.run(
        [sys.executable, "-c", OVER_HTTP_WITHOUT_CHDB, url, str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=180,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.split("\n")[:2] == ["200", "[]"]


def test_an_embedded_engine_without_chdb_names_what_to_install(monkeypatch: pytest.MonkeyPatch, tmp_path) -> None:  # noqa: ANN001
    monkeypatch.setitem(sys.modules, "chdb", None)
    with pytest.raises(StoreUnavailable, match=r"jobpulse\[server\]"):
        EmbeddedEngine(str(tmp_path / "clickhouse"))


# The deployment of deploy/ (not started here: no container runtime on the test machines). Its files must parse and
# agree with each other and with the cluster form above.
DEPLOY = Path(__file__).resolve().parents[1] / "deploy"


@pytest.fixture
def yaml() -> Any:
    return pytest.importorskip("yaml", reason="PyYAML reads the deployment's files")


def test_the_compose_file_runs_two_shards_of_two_replicas_and_two_jobpulse_replicas_on_the_cluster(yaml: Any) -> None:
    compose = yaml.safe_load((DEPLOY / "compose.yaml").read_text())
    services = compose["services"]
    nodes = {name: s for name, s in services.items() if name.startswith("clickhouse-")}
    assert sorted(
        (s["environment"]["CLICKHOUSE_SHARD"], s["environment"]["CLICKHOUSE_REPLICA"]) for s in nodes.values()
    ) == [
        ("1", "clickhouse-s1r1"),
        ("1", "clickhouse-s1r2"),
        ("2", "clickhouse-s2r1"),
        ("2", "clickhouse-s2r2"),
    ]
    replicas = {name: s for name, s in services.items() if name.startswith("jobpulse-")}
    assert len(replicas) == 2
    for replica in replicas.values():
        assert replica["environment"]["JOBPULSE_CLUSTER"] == "jobpulse"
        assert replica["environment"]["JOBPULSE_STORE"].startswith("clickhouse://jobpulse:")
    assert {"keeper-1", "keeper-2", "keeper-3", "load-balancer"} <= set(services)


def test_the_clickhouse_configuration_names_every_node_of_the_compose_file() -> None:
    import xml.etree.ElementTree as ET

    cluster = ET.parse(DEPLOY / "clickhouse" / "cluster.xml").getroot().find("remote_servers/jobpulse")
    shards = [[r.findtext("host") for r in shard.findall("replica")] for shard in cluster.findall("shard")]
    assert shards == [["clickhouse-s1r1", "clickhouse-s1r2"], ["clickhouse-s2r1", "clickhouse-s2r2"]]
    ET.parse(DEPLOY / "clickhouse" / "keeper.xml")
    ET.parse(DEPLOY / "clickhouse" / "users.xml")
    balancer = (DEPLOY / "haproxy.cfg").read_text()
    assert "option httpchk GET /readyz" in balancer
    assert "server jobpulse-1 jobpulse-1:8642" in balancer and "server jobpulse-2 jobpulse-2:8642" in balancer


def test_the_kubernetes_manifests_parse_and_run_jobpulse_on_the_cluster(yaml: Any) -> None:
    documents = [
        doc for path in sorted((DEPLOY / "k8s").glob("*.yaml")) for doc in yaml.safe_load_all(path.read_text())
    ]
    kinds = {doc["kind"]: doc for doc in documents}
    assert {"ClickHouseInstallation", "ClickHouseKeeperInstallation", "Deployment", "Service", "Ingress"} <= set(kinds)
    layout = kinds["ClickHouseInstallation"]["spec"]["configuration"]["clusters"][0]
    assert layout["name"] == "jobpulse" and layout["layout"] == {"shardsCount": 2, "replicasCount": 2}
    container = kinds["Deployment"]["spec"]["template"]["spec"]["containers"][0]
    env = {item["name"]: item.get("value") for item in container["env"]}
    assert env["JOBPULSE_CLUSTER"] == "jobpulse"
    assert container["readinessProbe"]["httpGet"]["path"] == "/readyz"
