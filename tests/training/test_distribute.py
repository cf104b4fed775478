"""Training under strategies and across process deaths, in fresh processes
(logical devices and TF_CONFIG must be set before TensorFlow starts)."""

import json
import os
import signal
import subprocess
import sys
import time

import numpy as np
import pytest

from tests.conftest import free_port

# TensorFlow by design; every test starts Python processes.
pytestmark = [pytest.mark.tensorflow_only, pytest.mark.large]

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))


def run(args, env=None, **kwargs):
    return subprocess.Popen(
        [sys.executable, *args],
        env={**os.environ, "TF_CPP_MIN_LOG_LEVEL": "3", **(env or {})},
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        **kwargs,
    )


def finish(process, timeout=300):
    output, _ = process.communicate(timeout=timeout)
    assert process.returncode == 0, output[-3000:]
    return output


def weights(path):
    data = np.load(path)
    return [
        data[k]
        for k in sorted((k for k in data.files if k.startswith("w")), key=lambda k: int(k[1:]))
    ]


def test_mirrored_on_two_devices_equals_one_device(tmp_path):
    worker = os.path.join(HERE, "distributed_worker.py")
    for mode in ("one_device", "mirrored"):
        finish(run([worker, mode, str(tmp_path / f"{mode}.npz"), "2"]))
    one, two = np.load(tmp_path / "one_device.npz"), np.load(tmp_path / "mirrored.npz")
    np.testing.assert_allclose(two["loss"], one["loss"], rtol=1e-6)
    # The evaluator translates with the mirrored weights as with one copy.
    assert len(two["val_bleu"]) == 1
    np.testing.assert_allclose(two["val_bleu"], one["val_bleu"], atol=1e-6)
    for a, b in zip(
        weights(tmp_path / "one_device.npz"), weights(tmp_path / "mirrored.npz"), strict=True
    ):
        np.testing.assert_allclose(b, a, atol=1e-6)
    print(
        f"one device: {one['seconds']:.2f}s, two logical devices: {two['seconds']:.2f}s for 2 steps"
    )


def test_two_workers_end_with_identical_weights(tmp_path):
    cluster = {"worker": [f"localhost:{free_port()}", f"localhost:{free_port()}"]}
    worker = os.path.join(HERE, "distributed_worker.py")
    processes = [
        run(
            [worker, "multiworker", str(tmp_path / f"worker{i}.npz"), "3"],
            env={
                "TF_CONFIG": json.dumps(
                    {"cluster": cluster, "task": {"type": "worker", "index": i}}
                )
            },
        )
        for i in range(2)
    ]
    for process in processes:
        finish(process)
    first, second = weights(tmp_path / "worker0.npz"), weights(tmp_path / "worker1.npz")
    for a, b in zip(first, second, strict=True):
        np.testing.assert_array_equal(a, b)
    initial = np.load(tmp_path / "worker0.npz")
    assert np.isfinite(initial["loss"]).all()
    # Both workers took part: the chief kept its checkpoints, worker 1 its own.
    assert os.path.exists(tmp_path / "run" / "checkpoints" / "checkpoint")
    # Only the chief translated, at each of the 3 checkpoints; the other
    # worker received the same scores, and no scratch files are left.
    chief, other = (np.load(tmp_path / f"worker{i}.npz") for i in range(2))
    assert (int(chief["translate_calls"]), int(other["translate_calls"])) == (3, 0)
    np.testing.assert_array_equal(other["val_bleu"], chief["val_bleu"])
    assert len(chief["val_bleu"]) == 3
    with open(tmp_path / "run" / "evaluations.json") as f:
        assert [e["step"] for e in json.load(f)] == [1, 2, 3]
    assert os.path.exists(tmp_path / "run" / "best" / "scores.json")
    assert not os.path.exists(tmp_path / "run" / "worker-1-best")


def read_steps(model_dir):
    with open(os.path.join(model_dir, "steps.log")) as f:
        return [int(line) for line in f if line.strip()]


def test_sigkill_midway_then_resume(tmp_path):
    model_dir = str(tmp_path / "run")
    worker = os.path.join(HERE, "resume_worker.py")
    train_steps, interval = 60, 10
    first = run([worker, model_dir, str(train_steps), str(interval)])
    deadline = time.time() + 240
    # Kill it midway between two checkpoints (after step 25, past ckpt-20).
    log = os.path.join(model_dir, "steps.log")
    while not (os.path.exists(log) and max(read_steps(model_dir), default=0) >= 25):
        assert first.poll() is None, first.communicate()[0][-3000:]
        assert time.time() < deadline, "training did not reach step 25 in time"
        time.sleep(0.02)
    first.send_signal(signal.SIGKILL)
    first.communicate()  # reaps it and closes its output pipe
    assert first.returncode == -signal.SIGKILL
    killed_at = read_steps(model_dir)[-1]
    assert killed_at < train_steps
    assert not os.path.exists(os.path.join(model_dir, "result.json"))

    finish(run([worker, model_dir, str(train_steps), str(interval)]))
    with open(os.path.join(model_dir, "result.json")) as f:
        result = json.load(f)
    steps = read_steps(model_dir)
    second_run = steps[steps.index(killed_at) + 1 :] if killed_at in steps else steps
    resumed_from = result["initial_step"]
    assert result["final_step"] == train_steps
    assert resumed_from % interval == 0 and resumed_from >= 20
    assert second_run[0] == resumed_from + 1 and second_run[-1] == train_steps
    repeated = killed_at - resumed_from
    assert 0 <= repeated <= interval
    print(f"killed at step {killed_at}, resumed from {resumed_from}, repeated {repeated} steps")
