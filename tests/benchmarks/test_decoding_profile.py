"""benchmarks/decoding_profile.py: HLO parsing and the kinds of work."""

import collections
import os
import sys

import pytest

BENCHMARKS = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(__file__))), "benchmarks")
sys.path.insert(0, BENCHMARKS)

import decoding_profile as profile  # noqa: E402

pytestmark = pytest.mark.tensorflow_only  # the profiler and XLA:CPU are TensorFlow's

# A cut-down optimized module of a beam-4 search: 2 sentences × 4 beams
# = 8 rows, 2 heads of depth 4, d_model 8, vocabulary 100, cache of 5.
HLO = """\
HloModule a_inference_run

%fused_computation (param_0: f32[8,2,5,4]) -> f32[8,2,5,4] {
  %param_0 = f32[8,2,5,4]{3,2,1,0} parameter(0)
  ROOT %gather.1 = f32[8,2,5,4]{3,2,1,0} gather(%param_0, %param_0), offset_dims={1,2,3}
}

%body (p: (s32[], f32[8,2,5,4])) -> (s32[], f32[8,2,5,4]) {
  %p = (s32[], f32[8,2,5,4]{3,2,1,0}) parameter(0)
  %cache = f32[8,2,5,4]{3,2,1,0} get-tuple-element(%p), index=1
  %bitcast_select_fusion = f32[8,2,5,4]{3,2,1,0} fusion(%cache), kind=kLoop, calls=%f
  %copy.3 = f32[8,2,5,4]{3,2,1,0} copy(%bitcast_select_fusion)
  %x = f32[8,8]{1,0} parameter(1)
  %w = f32[8,8]{1,0} parameter(2)
  %MatMul.1 = f32[8,8]{1,0} dot(%x, %w), lhs_contracting_dims={1}, rhs_contracting_dims={0}
  %dot.2 = f32[8,2,5]{2,1,0} dot(%x, %bitcast_select_fusion), lhs_batch_dims={0,1}
  %e = f32[100,8]{1,0} parameter(3)
  %MatMul.9 = f32[8,100]{1,0} dot(%MatMul.1, %e), lhs_contracting_dims={1}, rhs_contracting_dims={1}
  %wrapped_reduce = f32[2,4]{1,0} fusion(%MatMul.9), kind=kLoop, calls=%r
  %add_fusion = f32[8,8]{1,0} fusion(%MatMul.1, %x), kind=kLoop, calls=%a
  ROOT %t = (s32[], f32[8,2,5,4]{3,2,1,0}) tuple(%i, %copy.3)
}

ENTRY %main (source: f32[64,8]) -> f32[2,4] {
  %source = f32[64,8]{1,0} parameter(0)
  %MatMul.7 = f32[64,8]{1,0} dot(%source, %source), lhs_contracting_dims={1}
  %while = (s32[], f32[8,2,5,4]{3,2,1,0}) while(%init), condition=%cond, body=%body
  ROOT %out = f32[2,4]{1,0} get-tuple-element(%while), index=1
}
"""
SIZES = dict(rows=8, heads=2, depth=4, vocab=100)


def test_parse_hlo_reads_shapes_operands_and_where_each_instruction_runs():
    instructions = profile.parse_hlo(HLO)
    assert instructions["MatMul.9"].dims == (8, 100)
    assert instructions["MatMul.9"].operands == ("MatMul.1", "e")
    assert instructions["dot.2"].batched and not instructions["MatMul.1"].batched
    assert instructions["MatMul.7"].in_entry and not instructions["MatMul.1"].in_entry
    assert not instructions["gather.1"].in_entry  # a fused computation's body
    assert instructions["t"].dims == ()  # a tuple


def test_each_instruction_gets_the_kind_its_shapes_say():
    instructions = profile.parse_hlo(HLO)
    kinds = {
        name: profile.classify(instructions[name], instructions, **SIZES)
        for name in (
            "MatMul.7",
            "MatMul.9",
            "MatMul.1",
            "dot.2",
            "bitcast_select_fusion",
            "copy.3",
            "wrapped_reduce",
            "add_fusion",
            "while",
        )
    }
    assert kinds == {
        "MatMul.7": "encoder",
        "MatMul.9": "output projection",
        "MatMul.1": "projections, feed-forward",
        "dot.2": "attention products",
        "bitcast_select_fusion": "cache, reorder and write",
        "copy.3": "cache, loop copies",
        "wrapped_reduce": "logits passes",  # reads the (rows, vocab) logits
        "add_fusion": "other",
        "while": None,  # its body's thunks carry the time
    }


def test_times_add_up_by_kind_and_names_outside_the_module_are_left_out():
    instructions = profile.parse_hlo(HLO)
    times = collections.Counter(
        {"MatMul.9": 3.0, "MatMul.1": 1.0, "dot.2": 0.5, "while": 9.0, "ThunkExecutor": 7.0}
    )
    kinds = profile.by_kind(times, instructions, **SIZES)
    assert kinds["output projection"] == 3.0
    assert kinds["projections, feed-forward"] == 1.0
    assert kinds["attention products"] == 0.5
    assert sum(kinds.values()) == 4.5
    text = profile.table(kinds)
    assert "| output projection | 3.0 | 66.7% |" in text
    assert "| all thunks | 4.5 | 100% |" in text


def test_costliest_lists_the_instructions_with_the_most_time_first():
    instructions = profile.parse_hlo(HLO)
    times = {"MatMul.1": 1.0, "while": 9.0, "MatMul.9": 3.0, "dot.2": 0.5, "ThunkExecutor": 7.0}
    assert profile.costliest(times, instructions, 2, **SIZES) == [
        (3.0, "output projection", "MatMul.9", "dot", (8, 100)),
        (1.0, "projections, feed-forward", "MatMul.1", "dot", (8, 8)),
    ]
