import pytest
from agent_fakes import Recorded

from jobpulse.agent.procs import CLOCK_TICKS, PAGE_SIZE, parse_stat
from jobpulse.agent.selfstats import SelfCollector


def test_recorded_self_stat_gives_cpu_time_rss_and_share_of_a_core(tmp_path):
    rec = Recorded("host_v1", tmp_path)
    rec.load("t0")
    agent = SelfCollector(rec.proc)
    first = {s.metric: s.value for s in agent.collect(0.0)}
    assert first == {"agent_cpu_seconds": 3 / CLOCK_TICKS, "agent_rss_bytes": 3113 * PAGE_SIZE}
    rec.load("t1")
    second = {s.metric: s.value for s in agent.collect(rec.interval)}
    assert second["agent_cpu_seconds"] == 25 / CLOCK_TICKS  # utime 18 + stime 7
    assert second["agent_cpu_util"] == pytest.approx(100 * (22 / CLOCK_TICKS) / rec.interval)


def test_live_process_reads_itself():
    values = {s.metric: s.value for s in SelfCollector().collect(0.0)}
    assert values["agent_rss_bytes"] > 0 and values["agent_cpu_seconds"] > 0


def test_stat_with_spaces_and_parens_in_the_name():
    line = "42 (my (odd) name) S 1 42 42 0 -1 0 0 0 0 0 7 3 2 1 20 0 1 0 500 1000 9 18446744073709551615"
    st = parse_stat(line + " 0" * 30)
    assert (st.pid, st.ppid, st.cpu_ticks, st.starttime, st.rss_pages) == (42, 1, 13, 500, 9)


def test_missing_stat_gives_nothing(tmp_path):
    assert SelfCollector(tmp_path).collect(0.0) == []
