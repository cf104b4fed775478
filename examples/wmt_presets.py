"""The presets of `wmt_ende.py`: what `--preset` and `--data` change from
`wmt_config.RunConfig`'s defaults (the paper's base run)."""

import os

# What each preset changes from RunConfig's defaults (the paper's base run).
# big: the paper's big model; small: a good translator from a Multi30k-sized
# corpus on a CPU (examples/README.md); tiny: for tests and smoke runs.
# fmt: off
RUN_PRESETS = {
    "base": {},
    "big": dict(model="big", train_steps=300_000, average_last=20),
    "small": dict(model="small", vocab_size=4000, dropout=0.2, norm_first=True, batch_tokens=1024,
                  update_tokens=1024, warmup_steps=800, learning_rate_scale=0.5,
                  train_steps=50_000, steps_per_checkpoint=100, eval_every=200,
                  eval_sentences=500, max_length=128, dropout_by_passes="9:0.1,14:0.2"),
    "tiny": dict(model="tiny", vocab_size=400, batch_tokens=1024, update_tokens=1024,
                 warmup_steps=100, train_steps=40, steps_per_checkpoint=20, average_last=2,
                 max_length=64),
}
# fmt: on

# What each named corpus (`--data`) changes: its run preset, directories and
# budget; RUN_PRESETS[preset] applies first, flags last.
DATA_PRESETS = {
    "multi30k": dict(preset="small", budget_minutes=30.0,
                     model_dir=os.path.join("runs", "multi30k"),
                     export_dir=os.path.join("exports", "multi30k")),
}  # fmt: skip
