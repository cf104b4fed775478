"""Ours against keras-hub, PyTorch and CTranslate2 on identical work.

    pip install -e ".[bench]"
    python benchmarks/compare.py --config tiny      # or small, base
    python benchmarks/compare.py --config tiny --only ours keras_hub --json out.json

The work is the same for every implementation: a post-norm Transformer
with ReLU feed-forward layers, sinusoidal positions, dropout 0.1 and one
embedding shared by the source, the target and the output projection.

* training: one step on 128 sentences of 32 source and 32 target tokens
  (4,096 target tokens), Adam, label smoothing 0.1; fp32 and
  `mixed_bfloat16` (PyTorch: bf16 autocast). Ours is compiled by
  `training.compile_for_training`, as `training.train` does.
* decoding: 64 sentences of 32 source tokens, exactly 40 decoding steps
  each (EOS is forbidden until the last step, so every implementation does
  the same work), greedy and beam 4; ours under XLA (`ours`) and, without
  XLA as the SavedModel for TF Serving holds it, through TF Serving's
  session loader (`served`) and `tf.saved_model.load` (`served_load`).

Every measurement runs in a fresh Python subprocess. A measurement runs
`--warmup` untimed steps (tracing, compilation), then `--steps` timed ones,
and reports the median. The fp32 and bf16 matmul ceilings are measured at
the start and at the end; "% ceiling" uses their mean. Peak memory is the
worker process's peak resident set size. Peers that are not installed are
skipped and listed. Also reported: the bf16 sanity check (the loss after
200 steps of a copy task, bf16 against fp32) and the memory growth of our
decoder over `--memory_calls` calls. The code is in `benchmarks/comparison/`;
the method and the results are in `benchmarks/README.md`.
"""

from comparison.driver import main

if __name__ == "__main__":
    main(__doc__)
