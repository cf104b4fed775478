"""Named configurations of `Transformer`.

`base` and `big` are the paper's (Vaswani et al., 2017, Table 3). With the
paper's shared vocabulary of 37,000 tokens and three-way tied embeddings
they have 63.1M and 214.2M weights against the paper's 65M and 213M; the
variants of Table 3 that only change `N` or `d_ff` differ from base by
exactly the table's differences (to its rounding). The table's two
absolute numbers are not consistent with any single vocabulary size: 65M
implies about 40,700 tokens for base (65M − 44.14M of layers, over
d_model 512), 213M about 35,800 for big (213M − 176.36M, over 1024). Both
straddle "about 37000", so the vocabulary rounding, not the architecture,
accounts for the gap; `tests/models/test_presets.py` pins the numbers.

`small` (d_model 256, 3 + 3 layers) is for corpora of tens of thousands of
sentence pairs, such as Multi30k, on a CPU (examples/README.md has its
results); `tiny` is small enough for unit tests and demos.
"""

from keras_transformer_runtime import validation

PRESETS = {
    "tiny": dict(num_layers=2, d_model=64, num_heads=4, d_ff=128, dropout=0.1, max_length=256),
    "small": dict(num_layers=3, d_model=256, num_heads=4, d_ff=1024, dropout=0.1),
    "base": dict(num_layers=6, d_model=512, num_heads=8, d_ff=2048, dropout=0.1),
    "big": dict(num_layers=6, d_model=1024, num_heads=16, d_ff=4096, dropout=0.3),
}


def preset_arguments(preset, overrides, accepted):
    """The constructor arguments of `preset` with `overrides` applied.

    Raises:
        ValueError: `preset` is not a preset, or an override is not one of
            the `accepted` argument names (the message lists them).
    """
    validation.check_choice(tuple(PRESETS), preset=preset)
    unknown = sorted(set(overrides) - set(accepted))
    if unknown:
        raise ValueError(
            f"Unknown argument(s) for Transformer: {', '.join(unknown)}. "
            f"Accepted: {', '.join(sorted(accepted))}. "
            f"Received: {unknown[0]}={overrides[unknown[0]]!r}"
        )
    return {**PRESETS[preset], **overrides}
