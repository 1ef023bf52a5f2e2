import os
import signal
import sys
import threading
import time

from jobpulse.agent.sampler import build_collectors
from jobpulse.agent.wrap import run_wrapped


class RecordingOutlet:
    def __init__(self):
        self.lines = []
        self.samples = []
        self.statuses = []
        self.jobs = []
        self.instance_types = []
        self.registered = []
        self.closed = False

    def line(self, ts_ms, seq, level, msg):
        self.lines.append((ts_ms, seq, level, msg))

    def system(self, ts_ms, samples):
        self.samples.append((ts_ms, samples))

    def register_job(self, name=None, tags=None, instance_type=None):
        self.jobs.append(name)
        if instance_type is not None:
            self.instance_types.append(instance_type)

    def worker_status(self, status, exit_code=None, host=None, fields=None):
        self.statuses.append((status, exit_code))
        if fields is not None:
            self.registered.append(fields)

    def close(self, timeout=10.0):
        self.closed = True


def _outlet():
    return RecordingOutlet()


def _py(code: str) -> list[str]:
    return [sys.executable, "-c", code]


def test_exit_code_and_failed_status_are_passed_on():
    outlet = _outlet()
    result = run_wrapped(_py("import sys; print('bye'); sys.exit(3)"), outlet, sample=False, echo=False)
    assert result.exit_code == 3 and result.status == "failed"
    assert outlet.statuses == [("running", None), ("failed", 3)]
    assert outlet.jobs == [None] and outlet.closed


def test_success_marks_the_worker_completed():
    outlet = _outlet()
    assert run_wrapped(_py("pass"), outlet, sample=False, echo=False).exit_code == 0
    assert outlet.statuses[-1] == ("completed", 0)


def test_lines_keep_their_order_with_increasing_seq():
    outlet = _outlet()
    code = "import sys\nfor i in range(500): print(f'line {i}')\nsys.stderr.write('oops\\n')"
    run_wrapped(_py(code), outlet, sample=False, echo=False)
    out = [m for _, _, _, m in outlet.lines if m.startswith("line ")]
    assert out == [f"line {i}" for i in range(500)]
    assert "oops" in [m for _, _, _, m in outlet.lines]
    seqs = [s for _, s, _, _ in outlet.lines]
    assert seqs == sorted(seqs) and len(set(seqs)) == len(seqs)
    assert {level for _, _, level, m in outlet.lines if m != "oops"} == {"info"}
    assert [level for _, _, level, m in outlet.lines if m == "oops"] == ["warning"]  # stderr stating no level


def test_progress_bar_rewrites_become_one_line():
    outlet = _outlet()
    code = "import sys\nfor i in range(5): sys.stdout.write(f'\\r{i*25}%'); sys.stdout.flush()\nprint()"
    run_wrapped(_py(code), outlet, sample=False, echo=False)
    assert [m for _, _, _, m in outlet.lines] == ["100%"]


def test_output_is_echoed_as_it_comes(capfd):
    run_wrapped(_py("print('hello out'); import sys; print('hello err', file=sys.stderr)"), _outlet(), sample=False)
    captured = capfd.readouterr()
    assert "hello out" in captured.out and "hello err" in captured.err


MARKING = """
from jobpulse.sdk.passthrough import marked_fd, write_marked
assert marked_fd(1) and marked_fd(2)
print("launcher line", flush=True)
write_marked(1, b"rank line\\n")
write_marked(2, b"rank warning\\n")
"""


def test_what_a_rank_marked_is_echoed_but_left_out_of_the_nodes_log(capfd):
    outlet = _outlet()
    assert run_wrapped(_py(MARKING), outlet, sample=False).exit_code == 0
    assert [m for _, _, _, m in outlet.lines] == ["launcher line"]
    captured = capfd.readouterr()
    assert (captured.out, captured.err) == ("launcher line\nrank line\n", "rank warning\n")


def test_the_node_worker_is_registered_with_its_fields():
    outlet = _outlet()
    run_wrapped(_py("pass"), outlet, sample=False, echo=False, worker_fields={"kind": "node"})
    assert outlet.registered == [{"kind": "node"}] and outlet.statuses == [("running", None), ("completed", 0)]


def test_unknown_command_exits_127():
    outlet = _outlet()
    result = run_wrapped(["/nonexistent/command"], outlet, sample=False, echo=False)
    assert result.exit_code == 127 and outlet.statuses[-1] == ("failed", 127)


def test_sigterm_is_passed_to_the_command():
    outlet = _outlet()
    code = "import time; print('ready', flush=True); time.sleep(30)"

    def terminate_when_ready():
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline and not any(m == "ready" for *_, m in outlet.lines):
            time.sleep(0.01)
        os.kill(os.getpid(), signal.SIGTERM)

    threading.Thread(target=terminate_when_ready, daemon=True).start()
    before = signal.getsignal(signal.SIGTERM)
    started = time.monotonic()
    result = run_wrapped(_py(code), outlet, sample=False, echo=False)
    assert time.monotonic() - started < 15
    assert result.exit_code == 128 + signal.SIGTERM and result.status == "stopped"
    assert outlet.statuses[-1] == ("stopped", 143)
    assert signal.getsignal(signal.SIGTERM) is before


def test_the_command_process_tree_is_sampled():
    outlet = _outlet()
    code = "import time\nend = time.time() + 0.6\nwhile time.time() < end: pass"

    def collectors(pid):
        return build_collectors(pid=pid, scope="process", use_nvml=False, use_npu=False)

    run_wrapped(_py(code), outlet, echo=False, interval=0.1, collectors_factory=collectors)
    metrics = {s.metric for _, samples in outlet.samples for s in samples}
    assert {"cpu_cores", "mem_bytes", "agent_cpu_seconds"} <= metrics
    busiest = max(s.value for _, samples in outlet.samples for s in samples if s.metric == "cpu_cores")
    assert busiest > 0.2


def test_the_agents_own_cpu_never_counts_the_commands():
    from jobpulse.agent.selfstats import SelfCollector

    class SlowSelf(SelfCollector):
        """Its second sample is read 2 s into the tick: the command (1 s) ends during it."""

        calls = 0

        def collect(self, now):
            self.calls += 1
            if self.calls == 2:
                time.sleep(2.0)
            return super().collect(now)

    outlet = _outlet()
    burn = "import time\nend = time.process_time() + 1.0\nwhile time.process_time() < end: pass"
    run_wrapped(_py(burn), outlet, echo=False, interval=0.05, collectors_factory=lambda pid: [SlowSelf()])
    spent = [s.value for _, samples in outlet.samples for s in samples if s.metric == "agent_cpu_seconds"]
    assert len(spent) == 2 and spent[1] - spent[0] < 0.5  # the command alone burned 1 s
