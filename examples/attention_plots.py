"""Attention plots like the paper's Figures 3-5: every head of the last
layer, for one sentence and its translation.

    from attention_plots import plot_attention
    plot_attention(model, tokenizer, "A dog runs.", "Ein Hund läuft.", "runs/base")
"""

import math
import os

import numpy as np

KINDS = {"encoder": "encoder self-attention", "cross": "encoder-decoder attention"}


def plot_attention(model, tokenizer, source, translation, directory):
    """Writes `attention_encoder.png` and `attention_cross.png` into
    `directory` and returns their paths; `[]` without matplotlib."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("attention plots: skipped (pip install matplotlib)")
        return []
    source_ids = tokenizer([source])[0].numpy().tolist() + [tokenizer.eos_id]
    target_ids = [tokenizer.bos_id] + tokenizer.tokenize_target([translation])[0].numpy().tolist()
    scores = model.attention_scores(np.array([source_ids]), np.array([target_ids]))
    source_pieces = [tokenizer.id_to_piece(i) for i in source_ids]
    target_pieces = [tokenizer.id_to_piece(i) for i in target_ids]
    rows = {"encoder": source_pieces, "cross": target_pieces}
    paths = []
    for kind, title in KINDS.items():
        weights = np.asarray(scores[kind][-1][0])  # (heads, rows, columns)
        heads = weights.shape[0]
        columns = min(heads, 4)
        lines = math.ceil(heads / columns)
        fig, axes = plt.subplots(lines, columns, squeeze=False, figsize=(4 * columns, 4 * lines))
        for head, ax in enumerate(axes.flat):
            if head >= heads:
                ax.axis("off")
                continue
            ax.imshow(weights[head], cmap="viridis", vmin=0, vmax=1)
            ax.set_title(f"head {head}")
            ax.set_xticks(range(len(source_pieces)), source_pieces, rotation=90, fontsize=6)
            ax.set_yticks(range(len(rows[kind])), rows[kind], fontsize=6)
        fig.suptitle(f"last layer, {title}")
        fig.tight_layout()
        path = os.path.join(directory, f"attention_{kind}.png")
        fig.savefig(path, dpi=110)
        plt.close(fig)
        paths.append(path)
    return paths
