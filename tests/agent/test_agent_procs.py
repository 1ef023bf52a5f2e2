import contextlib
import os
import signal
import subprocess
import sys

from agent_fakes import Recorded

from jobpulse.agent.procs import ProcessTree


def test_recorded_tree_holds_the_root_and_its_descendants(tmp_path):
    rec = Recorded("proc_tree", tmp_path)
    rec.load("t0")
    root = int((rec.src / "root_pid.txt").read_text())
    tree = ProcessTree(root, rec.proc)
    assert sorted(tree.snapshot(0.0)) == [root, root + 1, root + 2]  # sh, python3, sleep
    assert sorted(tree.snapshot(1.0)) == [root, root + 1, root + 2]  # by children files this time


def test_same_time_is_read_once(tmp_path):
    rec = Recorded("proc_tree", tmp_path)
    rec.load("t0")
    tree = ProcessTree(int((rec.src / "root_pid.txt").read_text()), rec.proc)
    first = tree.snapshot(3.0)
    assert tree.snapshot(3.0) is first


def test_a_new_child_is_found_through_the_children_file():
    code = "import subprocess as s, time; p = s.Popen(['sleep', '30']); print(p.pid, flush=True)\ntime.sleep(9)"

    parent = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True)
    try:
        child = int(parent.stdout.readline())
        tree = ProcessTree(parent.pid, rescan_every=3600)
        tree._last_scan = 0.0  # as if a full scan had just run: only children files are followed
        assert set(tree.snapshot(1.0)) == {parent.pid, child}
    finally:
        parent.kill()
        parent.wait()
        parent.stdout.close()
        with contextlib.suppress(ProcessLookupError, NameError):
            os.kill(child, signal.SIGKILL)


def test_a_gone_root_gives_an_empty_tree(tmp_path):
    assert ProcessTree(999999, tmp_path).snapshot(0.0) == {}
