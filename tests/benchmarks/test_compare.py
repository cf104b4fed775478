"""benchmarks/compare.py: its FLOP count, its workload and its table."""

import importlib.util
import os

import numpy as np
import pytest

from keras_transformer import Transformer

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
spec = importlib.util.spec_from_file_location(
    "compare", os.path.join(ROOT, "benchmarks", "compare.py")
)
compare = importlib.util.module_from_spec(spec)
spec.loader.exec_module(compare)


@pytest.mark.parametrize("name", ["tiny", "base"])
def test_flop_count_uses_the_model_weights(name):
    cfg = compare.CONFIGS[name]
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
    encoder, decoder, logits = compare.matmul_weights(cfg)
    assert (encoder, decoder) == (kernels["encoder"], kernels["decoder"])
    assert logits == model.source_embedding.embeddings.shape[0] * cfg["d_model"]
    # Dense work dominates: 6 FLOPs per weight and token, plus attention.
    tokens = compare.TRAIN_BATCH * compare.TARGET_LEN
    dense = 6 * (encoder + decoder + logits) * tokens
    assert dense < compare.train_flops(cfg) < 1.1 * dense


def test_decoding_worker_generates_exactly_the_forced_length():
    cfg = dict(vocab=50, d_model=16, layers=1, heads=2, d_ff=32)
    result = compare.worker_ours_decode(
        dict(cfg=cfg, search="beam4", precision="fp32", warmup=1, steps=1)
    )
    assert result["out_shape"] == [compare.DECODE_BATCH, 1, compare.DECODE_STEPS]
    assert result["tokens"] == compare.DECODE_BATCH * compare.DECODE_STEPS


def _row(task, impl, precision, tokens_per_s):
    return dict(
        task=task,
        impl=impl,
        precision=precision,
        tokens_per_s=tokens_per_s,
        gflops=100.0,
        peak_rss_mib=1.0,
    )


def test_table_gives_ratios_against_each_peer_and_checks_targets():
    report = {
        "config": dict(compare.CONFIGS["tiny"], name="tiny"),
        "steps": 5,
        "warmup": 2,
        "skipped": ["ctranslate2"],
        "ceilings": {"fp32_start": {"gflops": 200.0}, "fp32_end": {"gflops": 200.0}},
        "rows": [
            _row("train", "ours", "fp32", 1200.0),
            _row("train", "keras_hub", "fp32", 1000.0),
            _row("greedy", "ours", "fp32", 1000.0),
            _row("greedy", "keras_hub", "fp32", 1000.0),
        ],
    }
    table = compare.format_report(report)
    assert "| train | keras_hub | fp32 | 1,000 | 50% | 1 | 1.20x (target 1.15x: met) |" in table
    assert "| greedy | keras_hub | fp32 | 1,000 | 50% | 1 | 1.00x (target 1.2x: missed) |" in table
    assert "not installed, skipped: ctranslate2" in table


def test_missing_peer_is_reported_as_not_installed(monkeypatch):
    monkeypatch.setitem(compare.PEER_MODULES, "torch", "no_such_module_for_sure")
    assert not compare.installed("torch")
    assert compare.installed("keras_hub") == (importlib.util.find_spec("keras_hub") is not None)
