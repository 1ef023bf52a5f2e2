"""Rank, world size, node and job id from the launcher's environment."""

from __future__ import annotations

import re
import socket

import pytest

from jobpulse.sdk.env import default_job, default_project, detect_placement, node_name, sanitize_id

HOST_NODE = f"node-{sanitize_id(socket.gethostname(), 123)}"


@pytest.mark.parametrize(
    ("env", "expected"),
    [
        ({}, (0, 0, 1, "")),
        ({"RANK": "3", "LOCAL_RANK": "1", "WORLD_SIZE": "8"}, (3, 1, 8, "torchrun")),
        ({"SLURM_PROCID": "5", "SLURM_LOCALID": "1", "SLURM_NTASKS": "16"}, (5, 1, 16, "slurm")),
        (
            {"OMPI_COMM_WORLD_RANK": "2", "OMPI_COMM_WORLD_LOCAL_RANK": "0", "OMPI_COMM_WORLD_SIZE": "4"},
            (2, 0, 4, "openmpi"),
        ),
        ({"PMI_RANK": "7", "MPI_LOCALRANKID": "3", "PMI_SIZE": "8"}, (7, 3, 8, "pmi")),
        ({"PMIX_RANK": "1", "PMIX_LOCAL_RANK": "1", "PMIX_SIZE": "2"}, (1, 1, 2, "pmix")),
        ({"MV2_COMM_WORLD_RANK": "4", "MV2_COMM_WORLD_SIZE": "6"}, (4, 4, 6, "mvapich")),
    ],
)
def test_launcher_variables_give_rank_local_rank_and_world_size(env, expected):
    p = detect_placement(env)
    assert (p.rank, p.local_rank, p.world_size, p.launcher) == expected
    assert p.worker == f"worker-{expected[0]}"


def test_torchrun_variables_win_over_slurm_in_the_same_allocation():
    env = {"RANK": "9", "LOCAL_RANK": "1", "WORLD_SIZE": "16", "SLURM_PROCID": "1", "SLURM_NTASKS": "2"}
    p = detect_placement(env)
    assert (p.rank, p.world_size, p.launcher) == (9, 16, "torchrun")


def test_unparsable_rank_falls_through_to_the_next_launcher():
    p = detect_placement({"RANK": "abc", "SLURM_PROCID": "2", "SLURM_NTASKS": "4"})
    assert (p.rank, p.launcher) == (2, "slurm")


def test_world_size_is_never_smaller_than_rank_plus_one():
    assert detect_placement({"RANK": "5"}).world_size == 6


def test_job_id_comes_from_jobpulse_job_then_the_launcher():
    assert default_job({"JOBPULSE_JOB": "mine", "SLURM_JOB_ID": "1"}) == ("mine", True)
    assert default_job({"TORCHELASTIC_RUN_ID": "abc123"}) == ("torchrun-abc123", True)
    assert default_job({"TORCHELASTIC_RUN_ID": "none", "SLURM_JOB_ID": "77", "SLURM_STEP_ID": "0"}) == (
        "slurm-77-0",
        True,
    )


def test_generated_job_id_is_unique_and_not_shared():
    first, shared = default_job({})
    second, _ = default_job({})
    assert not shared and first != second
    assert re.fullmatch(r"run-\d{8}-\d{6}-[0-9a-f]{6}", first)


def test_project_default_and_sanitized_ids():
    assert default_project({}) == "default"
    assert default_project({"JOBPULSE_PROJECT": "vision"}) == "vision"
    assert sanitize_id("a b/c__d") == "a-b-c-d"
    assert len(sanitize_id("x" * 300)) == 64


@pytest.mark.parametrize(
    ("env", "node"),
    [
        ({"RANK": "3", "GROUP_RANK": "1", "NODE_RANK": "5"}, "node-1"),  # torchrun's own word first
        ({"RANK": "3", "NODE_RANK": "2"}, "node-2"),  # Lightning, Kubeflow
        ({"RANK": "3", "PET_NODE_RANK": "4"}, "node-4"),
        ({"OMPI_COMM_WORLD_RANK": "5", "OMPI_COMM_WORLD_NODE_RANK": "2", "SLURM_NODEID": "7"}, "node-2"),
        ({"SLURM_PROCID": "5", "SLURM_NODEID": "3"}, "node-3"),
        ({"RANK": "3", "GROUP_RANK": "1", "JOBPULSE_NODE": "gpu-a"}, "gpu-a"),  # the node wrapper names it
        ({"PMI_RANK": "7"}, HOST_NODE),  # no node rank known: the host's name
    ],
)
def test_a_rank_runs_on_the_node_its_launcher_names(env, node):
    assert detect_placement(env).node == node


def test_a_rank_reports_its_place_with_its_worker():
    env = {"SLURM_PROCID": "5", "SLURM_LOCALID": "1", "SLURM_NTASKS": "8", "SLURM_NODEID": "2"}
    assert detect_placement(env).worker_fields() == {
        "host": socket.gethostname(),
        "kind": "rank",
        "node": "node-2",
        "rank": 5,
        "local_rank": 1,
    }


def test_a_process_no_launcher_started_is_a_lone_process():
    fields = detect_placement({"GROUP_RANK": "0"}).worker_fields()
    assert (fields["kind"], fields["node"], fields["rank"], fields["local_rank"]) == ("process", "", None, None)


def test_a_lone_process_under_the_node_wrapper_is_its_rank_0():
    fields = detect_placement({"JOBPULSE_NODE": "node-3"}).worker_fields()
    assert (fields["kind"], fields["node"], fields["rank"], fields["local_rank"]) == ("rank", "node-3", 0, 0)


def test_the_node_wrapper_names_its_node_from_the_launcher_then_the_command_then_the_host():
    assert node_name({"SLURM_NODEID": "4"}, fallback_rank=1) == "node-4"
    assert node_name({}, fallback_rank=1) == "node-1"
    assert node_name({}) == HOST_NODE


def test_a_bad_node_name_is_an_error_naming_the_variable():
    with pytest.raises(ValueError, match="JOBPULSE_NODE"):
        detect_placement({"RANK": "0", "JOBPULSE_NODE": "a b"})
