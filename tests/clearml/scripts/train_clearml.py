"""A small training script that uses the ClearML SDK's reporting surface (run against a jobpulse server).

Reads CLEARML_* from the environment; writes the task id and what it reported to the JSON file named by
JOBPULSE_CLEARML_RESULT.
"""

import json
import logging
import os
import sys
import time

import numpy as np

from clearml import Task

task = Task.init(
    project_name=os.environ.get("TRAIN_PROJECT", "clearml compat/e2e"),
    task_name=os.environ.get("TRAIN_TASK", "sdk training run"),
    auto_resource_monitoring=dict(
        first_report_sec=1.0,
        report_frequency_sec=1.0,
        sample_frequency_per_sec=4.0,
        wait_for_first_iteration_to_start_sec=1.0,
        max_wait_for_first_iteration_to_start_sec=1.0,
    ),
    auto_connect_frameworks=False,
)
logger = task.get_logger()
print("hello from print")
logging.basicConfig(level=logging.INFO, stream=sys.stdout)
logging.getLogger("train").info("hello from logging.info")
logging.getLogger("train").warning("hello from logging.warning")
params = task.connect({"lr": 0.01, "epochs": 3})

for it in range(20):
    logger.report_scalar(title="loss", series="train", value=1.0 / (it + 1), iteration=it)
    logger.report_scalar(title="loss", series="val", value=-1.5 / (it + 1), iteration=it)
logger.report_single_value(name="accuracy", value=0.93)
logger.report_text("some free text via report_text")
logger.report_plotly(
    title="plotly",
    series="fig",
    iteration=0,
    figure={"data": [{"type": "scatter", "x": [1, 2, 3], "y": [3, 1, 2]}], "layout": {}},
)
logger.report_scatter2d(
    title="scatter",
    series="pts",
    iteration=1,
    scatter=np.array([[0, 1], [1, 4], [2, 9]]),
    xaxis="x",
    yaxis="y",
    mode="lines+markers",
)
image = (np.random.RandomState(0).rand(32, 32, 3) * 255).astype(np.uint8)
logger.report_image(title="image", series="rand", iteration=2, image=image)
for i in range(5):
    print(f"progress line {i}")
time.sleep(float(os.environ.get("TRAIN_SLEEP", "4")))  # let the resource monitor report
print("done, closing")
task_id = task.id
task.close()
with open(os.environ["JOBPULSE_CLEARML_RESULT"], "w") as out:
    json.dump({"task_id": task_id, "params": params}, out)
