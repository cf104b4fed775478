"""benchmarks/training_profile.py: the kinds of ops, the table, and one
run end to end."""

import os
import subprocess
import sys

import pytest

BENCHMARKS = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(__file__))), "benchmarks")
sys.path.insert(0, BENCHMARKS)

import training_profile as profile  # noqa: E402

pytestmark = pytest.mark.tensorflow_only  # the profiler's trace is TensorFlow's

MODEL = "StatefulPartitionedCall/transformer_1/"


@pytest.mark.parametrize(
    "name, op_type, kind",
    [
        # Op names as a float32 trace of the small preset records them.
        (MODEL + "encoder_1/layer_0_1/feed_forward_1/inner_1/Relu", "_FusedMatMul", "matmuls"),
        (
            "StatefulPartitionedCall/gradient_tape/transformer_1/decoder_1/layer_0_1/"
            "cross_attention_1/MatMul/MatMul",
            "MatMul",
            "matmuls",
        ),
        (MODEL + "decoder_1/layer_2_1/self_attention_1/BatchMatMulV3", "BatchMatMulV3", "matmuls"),
        (MODEL + "decoder_1/layer_0_1/cross_attention_1/Softmax", "Softmax", "attention"),
        (MODEL + "decoder_1/layer_1_1/feed_forward_norm_1/mul_2", "Mul", "norms"),
        (MODEL + "encoder_1/layer_0_1/self_attention_norm_1/mul", "Mul", "norms"),
        (
            MODEL + "encoder_1/layer_0_1/self_attention_dropout_1/stateless_dropout/"
            "stateless_random_uniform/StatelessRandomUniformV2",
            "StatelessRandomUniformV2",
            "dropout",
        ),
        ("StatefulPartitionedCall/Softmax", "Softmax", "loss and metrics"),
        (
            "StatefulPartitionedCall/compile_loss/label_smoothed_cross_entropy",
            "Max",
            "loss and metrics",
        ),
        ("StatefulPartitionedCall/adam/Sqrt_1", "Sqrt", "optimizer"),
        ("StatefulPartitionedCall/adam/AssignAddVariableOp", "AssignAddVariableOp", "optimizer"),
        ("iterator/IteratorGetNext", "IteratorGetNext", "input"),
        (MODEL + "shared_embedding_1/GatherV2", "GatherV2", "other model ops"),
    ],
)
def test_each_op_is_put_in_its_kind(name, op_type, kind):
    assert profile.kind_of(name, op_type) == kind


def test_the_table_prints_each_kind_and_the_share_of_the_ceiling():
    row = {
        "precision": "none",
        "compute_dtype": "float32",
        "step_ms": 500.0,
        "tokens_per_second": 2048.0,
        "matmul_gflop": 40.0,
        "gflops": 80.0,
        "ceiling_gflops": 100.0,
        "kinds_ms": {"matmuls": 300.0, "norms": 100.0},
    }
    text = profile.table([row])
    assert "| matmuls | 300.0 (75%) |" in text and "| dropout | 0.0 (0%) |" in text
    assert "| none (float32) | 500.0 | 2,048 | 40.0 | 80.0 | 100.0 | 80% |" in text


@pytest.mark.large  # starts Python processes that train
def test_profiles_a_step_end_to_end(tmp_path):
    finished = subprocess.run(
        [sys.executable, os.path.join(BENCHMARKS, "training_profile.py"), "--precisions", "none",
         "--warmup", "1", "--steps", "2", "--profile_steps", "1", "--batch_tokens", "256",
         "--vocab_size", "500"],
        capture_output=True, text=True, timeout=600,
    )  # fmt: skip
    assert finished.returncode == 0, finished.stderr[-3000:]
    lines = {line.split(" | ")[0]: line for line in finished.stdout.splitlines()}
    matmuls = float(lines["| matmuls"].split("(")[1].split("%")[0])
    assert matmuls > 20  # a training step is mostly matmuls
    assert "| none (float32) |" in finished.stdout
