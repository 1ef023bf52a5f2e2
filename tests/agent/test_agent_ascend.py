import subprocess

import pytest
from agent_fakes import DATA

from jobpulse.agent.ascend import (
    AscendCollector,
    parse_npu_info,
    parse_npu_usages,
    select_chips,
    usages_samples,
)

MIB = 1 << 20


def _text(name: str) -> str:
    return (DATA / name).read_text()


def _by_device(samples):
    out: dict[str, dict[str, float]] = {}
    for s in samples:
        out.setdefault(s.device, {})[s.metric] = s.value
    return out


def test_910b_table_has_eight_chips_with_hbm():
    chips = parse_npu_info(_text("npu_smi_info_910b3x8.txt"))
    assert [(c.npu, c.chip) for c in chips] == [(i, 0) for i in range(8)]
    first = chips[0]
    assert (first.name, first.health, first.bus_id) == ("910B3", "OK", "0000:C1:00.0")
    assert (first.power_w, first.temp_c, first.aicore_pct) == (352.1, 49.0, 87.0)
    assert (first.hbm_used_mb, first.hbm_total_mb) == (58211.0, 65536.0)


def test_310p_duo_cards_have_two_chips_each_and_no_hbm():
    chips = parse_npu_info(_text("npu_smi_info_310p3_duo.txt"))
    assert [(c.npu, c.chip, c.logic_id) for c in chips] == [(1, 0, 0), (1, 1, 1), (2, 0, 2), (2, 1, 3)]
    assert chips[0].power_w is None and chips[0].temp_c == 51.0  # power "NA"
    assert chips[1].temp_c is None  # the NPU's readings go on its first chip only
    assert (chips[2].mem_used_mb, chips[2].mem_total_mb, chips[2].hbm_total_mb) == (9377.0, 21527.0, None)


def test_910a_table_with_na_utilization():
    chips = parse_npu_info(_text("npu_smi_info_910a.txt"))
    assert chips[0].hbm_used_mb == 24581.0 and chips[0].aicore_pct == 57.0
    assert chips[1].aicore_pct is None and chips[1].health == "Warning"


def test_samples_from_the_910b_table():
    collector = AscendCollector(lambda argv: _text("npu_smi_info_910b3x8.txt"), env={})
    values = _by_device(collector.collect(0.0))
    assert sorted(values) == [str(i) for i in range(8)]
    assert values["0"] == {
        "npu_util": 87.0,
        "npu_mem_bytes": 58211 * MIB,
        "npu_mem_total_bytes": 65536 * MIB,
        "npu_mem_util": pytest.approx(100 * 58211 / 65536),
        "npu_power_w": 352.1,
        "npu_temp_c": 49.0,
    }


def test_samples_from_the_310p_table_use_ddr():
    collector = AscendCollector(lambda argv: _text("npu_smi_info_310p3_duo.txt"), env={})
    values = _by_device(collector.collect(0.0))
    assert values["2"]["npu_mem_util"] == pytest.approx(100 * 9377 / 21527)
    assert values["2"]["npu_util"] == 45.0


def test_rt_visible_devices_pick_and_renumber_chips():
    chips = parse_npu_info(_text("npu_smi_info_910b3x8.txt"))
    picked = select_chips(chips, {"ASCEND_RT_VISIBLE_DEVICES": "4,6"})
    assert [(label, c.npu) for label, c in picked] == [("0", 4), ("1", 6)]


def test_container_visible_devices_narrow_then_rt_indexes_into_them():
    chips = parse_npu_info(_text("npu_smi_info_910b3x8.txt"))
    env = {"ASCEND_VISIBLE_DEVICES": "4-7", "ASCEND_RT_VISIBLE_DEVICES": "1"}
    assert [(label, c.npu) for label, c in select_chips(chips, env)] == [("0", 5)]


def test_one_command_per_sample():
    calls = []

    def runner(argv):
        calls.append(list(argv))
        return _text("npu_smi_info_910b3x8.txt")

    collector = AscendCollector(runner, env={})
    for t in range(3):
        collector.collect(float(t))
    assert calls == [["npu-smi", "info"]] * 3


def test_failing_command_gives_no_samples():
    def runner(argv):
        raise subprocess.CalledProcessError(255, argv)

    assert AscendCollector(runner, env={}).collect(0.0) == []
    assert AscendCollector(lambda argv: "garbage\n", env={}).collect(0.0) == []


def test_usages_detail_of_one_npu():
    usages = parse_npu_usages(_text("npu_smi_usages_910b3.txt"))
    assert usages["HBM Capacity(MB)"] == 65536 and usages["Aivector Usage Rate(%)"] == 61
    values = {s.metric: s.value for s in usages_samples(usages, "3")}
    assert values == {
        "npu_util": 87.0,
        "npu_aicpu_util": 0.0,
        "npu_ctrlcpu_util": 3.0,
        "npu_vector_util": 61.0,
        "npu_hbm_bw_util": 42.0,
        "npu_ddr_bw_util": 0.0,
        "npu_mem_util": 89.0,
    }


def test_usages_of_an_older_910_use_hbm_rate():
    values = {s.metric: s.value for s in usages_samples(parse_npu_usages(_text("npu_smi_usages_910a.txt")), "0")}
    assert values["npu_mem_util"] == 75.0 and values["npu_util"] == 57.0
