import pytest
from agent_fakes import Recorded

from jobpulse.agent.network import NetworkCollector, parse_net_dev


def test_recorded_net_dev_parses_every_interface(tmp_path):
    rec = Recorded("host_v1", tmp_path)
    rec.load("t0")
    counters = parse_net_dev((rec.proc / "self/net/dev").read_text())
    assert set(counters) == {"lo", "ifb0", "ifb1", "eth0"}
    assert counters["eth0"] == (794454016, 918519)


def test_rates_from_two_recorded_readings_exclude_loopback(tmp_path):
    rec = Recorded("host_v1", tmp_path)
    rec.load("t0")
    net = NetworkCollector(rec.proc)
    assert net.collect(0.0) == []  # no rate from one reading
    rec.load("t1")
    values = {s.metric: s.value for s in net.collect(rec.interval)}
    assert values["net_rx_Bps"] == pytest.approx((799655452 - 794454016) / 1.000496)
    assert values["net_tx_Bps"] == pytest.approx((928208 - 918519) / 1.000496)


def _dev(rows):
    head = (
        "Inter-|   Receive                                                |  Transmit\n"
        " face |bytes    packets errs drop fifo frame compressed multicast|"
        "bytes    packets errs drop fifo colls carrier compressed\n"
    )
    return head + "".join(f"{n}: {rx} 0 0 0 0 0 0 0 {tx} 0 0 0 0 0 0 0\n" for n, rx, tx in rows)


def test_an_interface_reset_does_not_spoil_the_others(tmp_path):
    dev = tmp_path / "self/net/dev"
    dev.parent.mkdir(parents=True)
    net = NetworkCollector(tmp_path)
    dev.write_text(_dev([("eth0", 1000, 100), ("ib0", 50_000, 70_000)]))
    net.collect(0.0)
    dev.write_text(_dev([("eth0", 3000, 300), ("ib0", 10, 20)]))  # ib0 re-created
    values = {s.metric: s.value for s in net.collect(2.0)}
    assert values == {"net_rx_Bps": 1000.0, "net_tx_Bps": 100.0}


def test_unreadable_file_gives_nothing(tmp_path):
    assert NetworkCollector(tmp_path).collect(0.0) == []
