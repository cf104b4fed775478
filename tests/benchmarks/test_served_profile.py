"""benchmarks/served_profile.py: op types from the executor's trace, their
kinds, and the table."""

import os
import sys

import pytest
from tensorflow.core.framework import step_stats_pb2

BENCHMARKS = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(__file__))), "benchmarks")
sys.path.insert(0, BENCHMARKS)

import served_profile as profile  # noqa: E402

pytestmark = pytest.mark.tensorflow_only  # the session loader is TensorFlow's


def node(name, label):
    return step_stats_pb2.NodeExecStats(node_name=name, timeline_label=label)


def test_op_types_come_from_the_label_without_onednn_prefixes():
    assert profile.op_type(node("dense/MatMul", "dense/MatMul = _MklMatMul(x, w)")) == "MatMul"
    assert profile.op_type(node("a", "a = _FusedMatMul(x, w, b)")) == "MatMul"
    assert profile.op_type(node("f", "f = _MklFusedMatMul(x, w, b)")) == "MatMul"
    assert profile.op_type(node("s", "s = SelectV2(c, u, b)")) == "SelectV2"
    assert profile.op_type(node("while/Merge", "")) == "while/Merge"  # no label: the name


@pytest.mark.parametrize(
    "op, kind",
    [
        ("MatMul", "matmul"),
        ("BatchMatMulV2", "matmul"),
        ("SelectV2", "select"),
        ("TensorStridedSliceUpdate", "cache write"),
        ("BatchMatMulV3", "matmul"),
        ("GatherV2", "gather (reorder)"),
        ("NextIteration", "loop control"),
        ("Identity", "loop control"),
        ("TopKV2", "top-k, softmax"),
        ("AddV2", "elementwise"),
        ("ConcatV2", "shape"),
        ("SentencepieceOp", "other"),
    ],
)
def test_each_op_type_has_one_kind(op, kind):
    assert profile.kind_of(op) == kind


def test_table_shares_are_of_the_whole_call():
    groups = {"matmul": [80, 3000], "cache write": [40, 1000]}
    lines = profile.table(groups, 40, "kind", total=8000).splitlines()
    assert lines[2] == "| matmul | 80 | 2.0 | 3.0 | 37.5% |"
    assert lines[3] == "| cache write | 40 | 1.0 | 1.0 | 12.5% |"


@pytest.mark.large  # saves and loads a SavedModel
def test_one_traced_call_accounts_for_every_kind_it_runs(monkeypatch, capsys):
    micro = dict(vocab=50, d_model=16, layers=1, heads=2, d_ff=32)
    monkeypatch.setattr(profile, "CONFIGS", {"micro": micro})
    kinds, median = profile.main(["--config", "micro", "--task", "beam4_single", "--calls", "1"])
    assert median > 0
    # Every decoding step runs the decoder's matmuls, writes the cache and
    # reorders it: at least once per step each.
    steps = profile.DECODE_SHAPES["beam4_single"]["steps"]
    for kind in ("matmul", "cache write", "gather (reorder)", "loop control"):
        assert kinds[kind][0] >= steps, kind
    assert "| kind | executions per call |" in capsys.readouterr().out
