"""benchmarks/comparison: its FLOP count, its workload and its table."""

import importlib.util
import os
import re
import subprocess
import sys

import numpy as np
import pytest

from keras_transformer import Transformer

BENCHMARKS = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(__file__))), "benchmarks")
sys.path.insert(0, BENCHMARKS)

from comparison import driver  # noqa: E402
from comparison import flops  # noqa: E402
from comparison import ours  # noqa: E402
from comparison import report  # noqa: E402
from comparison import served  # noqa: E402
from comparison import workload  # noqa: E402

pytestmark = pytest.mark.tensorflow_only  # TensorFlow by design


@pytest.mark.parametrize("name", ["tiny", "base"])
def test_flop_count_uses_the_model_weights(name):
    cfg = workload.CONFIGS[name]
    model = Transformer(
        vocab_size=cfg["vocab"],
        num_layers=cfg["layers"],
        d_model=cfg["d_model"],
        num_heads=cfg["heads"],
        d_ff=cfg["d_ff"],
    )
    kernels = {"encoder": 0, "decoder": 0}
    for variable in model.weights:
        if variable.path.endswith("kernel"):
            kernels[variable.path.split("/")[1]] += int(np.prod(variable.shape))
    encoder, decoder, logits = flops.matmul_weights(cfg)
    assert (encoder, decoder) == (kernels["encoder"], kernels["decoder"])
    assert logits == model.source_embedding.embeddings.shape[0] * cfg["d_model"]
    # Dense work dominates: 6 FLOPs per weight and token, plus attention.
    tokens = workload.TRAIN_BATCH * workload.TARGET_LEN
    dense = 6 * (encoder + decoder + logits) * tokens
    assert dense < flops.train_flops(cfg) < 1.1 * dense


def test_train_flops_are_the_kernels_and_attention_products_counted_one_by_one():
    model = Transformer.from_preset("tiny", vocab_size=300, max_length=32)
    batch, source_length, target_length = 3, 7, 5
    model((np.ones((batch, source_length), "int32"), np.ones((batch, target_length), "int32")))
    forward = 0
    for weight in model.weights:  # each projection: rows x its kernel's size
        path = weight.path
        if not path.endswith("kernel"):
            continue
        of_source = "encoder" in path or re.search(r"cross_attention/(key|value)/", path)
        rows = batch * (source_length if of_source else target_length)
        forward += 2 * rows * int(np.prod(weight.shape))
    d = model.d_model
    for length in [source_length] * model.num_layers:  # encoder self-attention
        forward += 2 * 2 * batch * length * length * d
    for _ in range(model.num_layers):  # decoder self- and cross-attention
        forward += 2 * 2 * batch * target_length * (target_length + source_length) * d
    forward += 2 * batch * target_length * d * model.target_vocab_size  # the logits
    cfg = dict(d_model=d, d_ff=model.d_ff, layers=model.num_layers, vocab=model.target_vocab_size)
    assert flops.train_flops(cfg, batch, source_length, target_length) == 3 * forward


@pytest.mark.parametrize("task", ["beam4", "beam4_single"])
def test_decoding_worker_generates_exactly_the_forced_length(task):
    cfg = dict(vocab=50, d_model=16, layers=1, heads=2, d_ff=32)
    shape = workload.DECODE_SHAPES[task]
    spec = dict(cfg=cfg, decode=shape, precision="fp32", warmup=1, steps=1)
    result = ours.worker_decode(dict(spec, ids=workload.special_ids()))
    assert result["out_shape"] == [shape["batch"], 1, shape["steps"]]
    assert result["tokens"] == shape["batch"] * shape["steps"]


@pytest.mark.large  # traces and saves a SavedModel
@pytest.mark.parametrize("worker", [served.worker_session, served.worker_load])
def test_served_search_is_the_same_search_as_ours(worker):
    """The served rows run the `ours` search without XLA, saved and
    loaded: the same forced length, and the same tokens as the unsaved
    function."""
    cfg = dict(vocab=50, d_model=16, layers=1, heads=2, d_ff=32)
    shape = workload.DECODE_SHAPES["beam4_single"]
    spec = dict(cfg=cfg, decode=shape, precision="fp32", warmup=1, steps=1)
    result = worker(dict(spec, ids=workload.special_ids()))
    assert result["out_shape"] == [shape["batch"], 1, shape["steps"]]
    assert result["tokens"] == shape["batch"] * shape["steps"]


@pytest.mark.large  # traces and saves a SavedModel
def test_the_session_loader_runs_the_saved_search_like_the_function(tmp_path):
    ids = workload.special_ids()
    cfg = dict(vocab=50, d_model=16, layers=1, heads=2, d_ff=32)
    model = ours.build_model(cfg, "fp32", dropout=0.0)
    run = ours.searcher(model, 2, 6, ids, jit=False)
    served.save_search(model, run, str(tmp_path))
    source = workload.decode_sources(cfg, ids, (3, 5))
    output = served.SessionSignature(str(tmp_path))(source=source)["output_0"]
    np.testing.assert_array_equal(output, run(source).numpy())
    assert output.shape == (3, 1, 6)


def test_decode_flops_scale_with_the_shape():
    cfg = workload.CONFIGS["tiny"]
    batch = flops.decode_flops(cfg, workload.DECODE_SHAPES["beam4"])
    greedy = flops.decode_flops(cfg, workload.DECODE_SHAPES["greedy"])
    single = flops.decode_flops(cfg, workload.DECODE_SHAPES["beam4_single"])
    assert 3 * greedy < batch < 4 * greedy  # the encoder runs once per sentence
    # One sentence of 20 tokens and 20 steps against 64 of 32 tokens and 40
    # steps: at most the encoder's share (20 / 2,048 tokens), at least half
    # the decoder's (20 / 2,560 steps; attention over shorter keys is less).
    assert 0.5 * 20 / (64 * 40) < single / batch < 20 / (64 * 32)


def _row(task, impl, precision, tokens_per_s):
    row = dict(task=task, impl=impl, precision=precision, tokens_per_s=tokens_per_s)
    return {**row, "gflops": 100.0, "peak_rss_mib": 1.0, "median_s": 0.05}


def _table(rows, **changes):
    """The report's table of `rows` on the tiny config, 5 steps after 2
    warm-up, nothing skipped and no ceilings unless `changes` say so."""
    config = dict(workload.CONFIGS["tiny"], name="tiny")
    base = dict(config=config, steps=5, warmup=2, skipped=[], ceilings={}, rows=rows)
    return report.format_report({**base, **changes})


def test_table_gives_ratios_against_each_peer_and_checks_targets():
    table = _table(
        [
            _row("train", "ours", "fp32", 1200.0),
            _row("train", "keras_hub", "fp32", 1000.0),
            _row("greedy", "ours", "fp32", 1000.0),
            _row("greedy", "keras_hub", "fp32", 1000.0),
        ],
        skipped=["ctranslate2"],
        ceilings={"fp32_start": {"gflops": 200.0}, "fp32_end": {"gflops": 200.0}},
    )
    assert (
        "| train | keras_hub | fp32 |  | 1,000 | 50.0 | 50% | 1 | 1.20x (target 1.15x: met) |"
        in table
    )
    assert (
        "| greedy | keras_hub | fp32 |  | 1,000 | 50.0 | 50% | 1 | 1.00x (target 1.2x: missed) |"
        in table
    )
    assert "not installed, skipped: ctranslate2" in table
    assert "rows/s against greedy" not in table  # no beam rows


def test_table_gives_beam_rows_against_greedy_rows():
    """Beam search's rows per second (4 per output token) over greedy's,
    per implementation, from the tokens/s of the two rows."""
    table = _table(
        [
            _row("greedy", "ours", "fp32", 1000.0),
            _row("beam4", "ours", "fp32", 350.0),
            _row("greedy", "ctranslate2", "fp32", 800.0),
            _row("beam4", "ctranslate2", "fp32", 400.0),
            _row("beam4", "ctranslate2", "int8", 500.0),
        ]
    )
    assert (
        "beam 4 decoder rows/s against greedy rows/s, same implementation: "
        "ours fp32 1.40x (target 1.5x: missed), ctranslate2 fp32 2.00x" in table
    )
    assert "int8" not in table.split("rows/s against greedy")[1]  # no greedy int8 row


def test_table_gives_the_served_rows_against_ctranslate2():
    table = _table(
        [
            _row("beam4", "ours", "fp32", 1000.0),
            _row("beam4", "served", "fp32", 250.0),
            _row("beam4", "served_load", "fp32", 200.0),
            _row("beam4", "ctranslate2", "fp32", 500.0),
            _row("beam4_single", "served", "fp32", 300.0),
            _row("beam4_single", "ctranslate2", "fp32", 250.0),
        ]
    )
    assert "| beam4 | served | fp32 |  | 250 | 50.0 |  | 1 | 4.00x |" in table  # ours / served
    assert (
        "served SavedModel against CTranslate2 float32, same run: "
        "beam4 served 0.50x (target 1.0x: missed), beam4 served_load 0.40x, "
        "beam4_single served 1.20x (target 1.0x: met)" in table
    )


def test_rounds_merge_by_the_median_of_their_medians():
    """Three rounds of one decoding row, one slow and one failed: the row
    takes the median of the successful rounds' medians, not of all calls."""
    cfg = workload.CONFIGS["tiny"]
    spec = dict(decode=workload.DECODE_SHAPES["beam4"])
    tokens = workload.DECODE_BATCH * workload.DECODE_STEPS

    def measured(times, rss):
        row = dict(task="beam4", impl="ours", precision="fp32", times=times, tokens=tokens)
        row["peak_rss_mib"] = rss
        driver._set_speed(row, cfg, spec, float(np.median(times)))
        return row

    rounds = [
        measured([1.0, 1.0, 1.0, 0.6, 0.6], 10.0),
        {"task": "beam4", "impl": "ours", "precision": "fp32", "error": "timed out"},
        measured([2.0, 2.0, 2.0, 0.6, 0.6], 12.0),
        measured([0.5, 0.5, 0.5, 0.5, 0.5], 11.0),
    ]
    row = driver.merge_rounds(cfg, spec, rounds)
    assert row["round_medians_s"] == [1.0, 2.0, 0.5]
    # Not the median of all 15 calls (0.6), nor the mean of the medians.
    assert row["median_s"] == 1.0
    assert row["tokens_per_s"] == tokens / 1.0
    assert row["gflops"] == flops.decode_flops(cfg, spec["decode"]) / 1.0 / 1e9
    assert row["peak_rss_mib"] == 12.0 and len(row["times"]) == 15
    assert driver.merge_rounds(cfg, spec, rounds[1:2]) == rounds[1]  # all failed
    assert driver.merge_rounds(cfg, spec, rounds[:1]) == rounds[0]

    table = _table([row], rounds=4)
    assert "every row measured in 4 rounds" in table
    assert "| beam4 | ours | fp32 |  | 2,560 | 1,000.0 (500–2,000) |" in table


def test_each_peer_runs_at_every_setting_and_keeps_its_fastest(monkeypatch):
    """CTranslate2 over its (inter, intra) grid and batch sizes, PyTorch and
    keras-hub over their thread counts, ours at its defaults; the fastest
    setting is kept, printed beside its number, with every setting's time."""
    monkeypatch.setattr(os, "cpu_count", lambda: 2)
    grid = driver.peer_settings("ctranslate2", "beam4")
    assert {(s["inter"], s["threads"]) for s in grid} == {(1, 1), (1, 2), (2, 1)}
    assert {s["max_batch_size"] for s in grid} == {16, 32, 64}
    assert {s["max_batch_size"] for s in driver.peer_settings("ctranslate2", "beam4_single")} == {1}
    assert driver.peer_settings("torch", "train") == [{"threads": 1}, {"threads": 2}]
    assert driver.peer_settings("ours", "beam4") is None
    medians = {(2, 1, 32): 0.5}  # the fastest; every other setting takes 1 s

    def run(spec, timeout):
        median = medians.get((spec["inter"], spec["threads"], spec["max_batch_size"]), 1.0)
        return {"times": [median] * 5, "tokens": 2560, "peak_rss_mib": 1.0}

    monkeypatch.setattr(driver, "run_subprocess", run)
    best = driver._fastest({}, grid, timeout=10)
    assert best["setting"] == {"inter": 2, "threads": 1, "max_batch_size": 32}
    assert len(best["by_setting"]) == 9
    row = dict(task="beam4", impl="ctranslate2", precision="fp32", **best)
    driver._set_speed(
        row, workload.CONFIGS["tiny"], dict(decode=workload.DECODE_SHAPES["beam4"]), 0.5
    )
    table = _table([row])
    assert "| beam4 | ctranslate2 | fp32 | inter 2 x intra 1, batches of 32 | 5,120 |" in table
    # Below the table, every setting's median: the kept one and the others.
    assert (
        "beam4 ctranslate2 fp32, median ms by setting: inter 1 x intra 1, batches of 16 " in table
    )
    assert "inter 2 x intra 1, batches of 32 500.0;" in table


def test_missing_peer_is_reported_as_not_installed(monkeypatch):
    monkeypatch.setitem(driver.PEER_MODULES, "torch", "no_such_module_for_sure")
    assert not driver.installed("torch")
    expected = importlib.util.find_spec("keras_hub") is not None
    assert driver.installed("keras_hub") == expected


def test_bf16_rows_only_where_bf16_is_native(monkeypatch):
    monkeypatch.setattr(driver, "_native_bf16", lambda: False)
    precisions, note = driver.measured_precisions("auto")
    assert precisions == ("fp32",) and "no native bf16" in note
    assert driver.measured_precisions("yes") == (("fp32", "bf16"), None)
    monkeypatch.setattr(driver, "_native_bf16", lambda: True)
    assert driver.measured_precisions("auto") == (("fp32", "bf16"), None)
    assert driver.measured_precisions("no")[0] == ("fp32",)
    table = _table([], bf16_skipped=note)
    assert table.endswith(note)


def test_plan_runs_each_implementation_in_order_with_the_special_ids():
    tasks = ["train", "greedy", "beam4"]
    options = dict(config="tiny", warmup=1, steps=5, only=["ours", "torch"], tasks=tasks)
    args = type("Args", (), options)
    labels = [label for label, _ in driver.plan(args)]
    assert labels == [
        ("train", "ours", "fp32"),
        ("train", "ours", "bf16"),
        ("greedy", "ours", "fp32"),
        ("beam4", "ours", "fp32"),
        ("train", "torch", "fp32"),
        ("train", "torch", "bf16"),
    ]
    assert all(
        spec["ids"]["eos"] == 3 and spec["ids"]["first"] == 4 for _, spec in driver.plan(args)
    )
    args.tasks = ["train"]
    assert [label for label, _ in driver.plan(args)] == [
        ("train", "ours", "fp32"),
        ("train", "ours", "bf16"),
        ("train", "torch", "fp32"),
        ("train", "torch", "bf16"),
    ]


@pytest.mark.large  # starts a Python process
def test_entry_point_loads_the_package():
    script = os.path.join(BENCHMARKS, "compare.py")
    result = subprocess.run([sys.executable, script, "--help"], capture_output=True, text=True)
    assert result.returncode == 0, result.stderr[-3000:]
    implementations = "ours,served,served_load,keras_hub,torch,ctranslate2,ctranslate2_converted"
    assert f"--only {{{implementations}}}" in " ".join(result.stdout.split())
