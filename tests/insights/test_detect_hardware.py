"""Hardware: rising error counters, throttling, GPU and host memory near full."""

from __future__ import annotations

from synth import at, constant, evaluate, healthy, kinds, piecewise


def signals(findings: list[dict]) -> list[tuple[str, str, str, str]]:
    return sorted((f["signal"], f["severity"], f["worker"], f["device"]) for f in kinds(findings, "hardware"))


def test_rising_uncorrected_ecc_errors_are_critical(client):
    builder = healthy("ecc", (0, 30))
    builder.system("worker-1", "gpu_ecc_uncorrected", "0", (0, 30), piecewise(0.0, (12, 30, 2.0)), every_s=30)
    builder.system("worker-0", "gpu_ecc_uncorrected", "0", (0, 30), constant(3.0), every_s=30)  # steady: old errors
    builder.send(client)
    findings = evaluate(client, "ecc", 29.5)["findings"]
    assert signals(findings) == [("ecc_uncorrected", "critical", "worker-1", "0")]
    found = kinds(findings, "hardware")[0]
    assert found["started"] == at(12) and found["ended"] == at(13) and found["evidence"]["increase"] == 2.0


def test_an_xid_error_names_its_code(client):
    builder = healthy("xid", (0, 20))
    builder.system("worker-0", "gpu_xid_errors", "1", (0, 20), piecewise(0.0, (10, 20, 1.0)), every_s=30)
    builder.system("worker-0", "gpu_xid", "1", (10, 10.5), constant(79.0), every_s=30)
    builder.send(client)
    found = kinds(evaluate(client, "xid", 19.5)["findings"], "hardware")
    assert [(f["signal"], f["evidence"]["last_code"]) for f in found] == [("xid", 79)]


def test_sustained_thermal_throttling_is_found_and_a_blip_is_not(client):
    builder = healthy("hot", (0, 30))
    builder.system("worker-0", "gpu_throttle_thermal", "0", (0, 30), piecewise(0.0, (10, 16, 1.0)), every_s=30)
    builder.system("worker-1", "gpu_throttle_power", "1", (0, 30), piecewise(0.0, (10, 10.5, 1.0)), every_s=30)
    builder.send(client)
    assert signals(evaluate(client, "hot", 29.5)["findings"]) == [("thermal_throttle", "warning", "worker-0", "0")]


def test_gpu_memory_and_host_memory_near_full(client):
    builder = healthy("full", (0, 30))
    builder.events = [e for e in builder.events if e.get("metric") not in ("gpu_mem_util", "mem_util")]
    builder.system("worker-0", "gpu_mem_util", "1", (0, 30), piecewise(60.0, (10, 30, 97.0)), every_s=30)
    builder.system("worker-1", "mem_util", "", (0, 30), piecewise(50.0, (20, 30, 98.0)), every_s=30)
    builder.system("worker-0", "mem_util", "", (0, 30), piecewise(50.0, (20, 21, 98.0)), every_s=30)
    builder.send(client)
    assert signals(evaluate(client, "full", 29.5)["findings"]) == [
        ("gpu_memory", "warning", "worker-0", "1"),
        ("host_memory", "warning", "worker-1", ""),
    ]
