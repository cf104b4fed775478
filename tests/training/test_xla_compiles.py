"""A training step compiled by XLA is compiled once per batch shape, and
static shapes bound them: counted from XLA's own module dumps."""

import json
import subprocess
import sys

import pytest

pytestmark = [pytest.mark.tensorflow_only, pytest.mark.large]  # starts a Python process


def test_the_step_compiles_once_per_static_shape(tmp_path):
    output = subprocess.run(
        [sys.executable, "-m", "tests.training.compile_count", str(tmp_path), "static", "3", "60"],
        check=True,
        capture_output=True,
        text=True,
    ).stdout
    counted = json.loads(output.strip().splitlines()[-1])
    # 60 batches of a long-tailed corpus reach every one of the 3 buckets,
    # and XLA compiled the step once for each: no more.
    assert counted == {"shapes": 3, "compiles": 3}
