"""The fixed batch shapes of a training run compiled by XLA.

XLA compiles a training step for each input shape it meets (about 40 s
for the base model on a GPU), and batches padded to their own longest
sentence come in hundreds of shapes. `make_batches(static_shapes=True)`
pads every batch to one of a few `BatchShapes`: both sides of a pair to
the length of its bucket (the first of `lengths` that holds the pair's
longer side), `batch_sizes` sentences per batch. The lengths are fitted to
the corpus's own length histogram: among all sets of at most `max_shapes`
lengths, the one that wastes the fewest positions.
"""

import dataclasses

import numpy as np

from keras_transformer_runtime import validation


@dataclasses.dataclass(frozen=True)
class BatchShapes:
    """The shapes `make_batches(static_shapes=True)` pads batches to.

    A pair goes to the first bucket whose length holds its longer side
    (source with EOS, target with BOS); its batch is `(batch_size, length)`
    on both sides, `batch_size = batch_tokens // length`, so every batch
    fills the token budget with real tokens and padding.

    Attributes:
        lengths: the buckets' lengths, ascending; the last is `max_length`.
        batch_sizes: sentences per batch of each bucket (per replica).
        pairs: how many pairs the lengths were fitted on.
        source_padding: the share of source positions that are padding,
            over those pairs (a part-filled last batch's empty rows aside).
        target_padding: the same of the target positions.
        target_tokens_per_batch: real target tokens in an average batch.
        sample: how those pairs were drawn from the corpus (`""`: given).

    Example:

    >>> shapes = BatchShapes.fit([5, 9, 12], [6, 9, 14], batch_tokens=64, max_length=32)
    >>> shapes.lengths, shapes.batch_sizes
    ((6, 9, 14, 32), (10, 7, 4, 2))
    """

    lengths: tuple
    batch_sizes: tuple
    pairs: int
    source_padding: float
    target_padding: float
    target_tokens_per_batch: float
    sample: str = ""

    @classmethod
    def fit(
        cls, source_lengths, target_lengths, batch_tokens, max_length, max_shapes=24, sample=""
    ):
        """The at most `max_shapes` bucket lengths that pad the given pairs
        least, and their batch sizes under `batch_tokens`.

        The cost of a pair is its bucket's length (what it takes of a
        batch's budget, on each side), so the lengths minimize the summed
        lengths of the pairs' buckets: the real tokens per batch are then
        as many as any `max_shapes` shapes allow. Found exactly, by dynamic
        programming over the pairs' distinct lengths (optimal bucket edges
        fall on them); `max_length` is always the last, for the pairs
        longer than any seen.

        Args:
            source_lengths: each pair's source length, EOS included.
            target_lengths: each pair's target length, BOS included.
            batch_tokens: the token budget of a batch (per replica).
            max_length: the longest sequence a batch may hold.
            max_shapes: the most shapes (buckets) to use.

        Returns:
            A `BatchShapes`.
        """
        validation.check_positive_int(
            batch_tokens=batch_tokens, max_length=max_length, max_shapes=max_shapes
        )
        source = np.asarray(source_lengths, np.int64).reshape(-1)
        target = np.asarray(target_lengths, np.int64).reshape(-1)
        if source.shape != target.shape:
            raise ValueError(
                "`source_lengths` and `target_lengths` must have one length per pair. "
                f"Received: {source.size} source and {target.size} target lengths"
            )
        longer = np.maximum(source, target)
        if longer.size and (longer.min() < 1 or longer.max() > max_length):
            raise ValueError(
                f"Every length must be in [1, max_length={max_length}]. Received: lengths from "
                f"{longer.min()} to {longer.max()}"
            )
        lengths = _fewest_padded_lengths(longer, max_length, max_shapes)
        batch_sizes = tuple(max(1, batch_tokens // length) for length in lengths)
        return cls.measure(lengths, batch_sizes, source, target, sample)

    @classmethod
    def measure(cls, lengths, batch_sizes, source_lengths, target_lengths, sample=""):
        """`BatchShapes` of the given `lengths` and `batch_sizes`, with its
        padding measured on the given pairs."""
        lengths, batch_sizes = tuple(int(n) for n in lengths), tuple(int(n) for n in batch_sizes)
        source = np.asarray(source_lengths, np.int64).reshape(-1)
        target = np.asarray(target_lengths, np.int64).reshape(-1)
        bucket = np.searchsorted(lengths, np.maximum(source, target), side="left")
        positions = np.asarray(lengths, np.float64)[bucket].sum()
        batches = (1.0 / np.asarray(batch_sizes, np.float64)[bucket]).sum()
        return cls(
            lengths=lengths,
            batch_sizes=batch_sizes,
            pairs=int(source.size),
            source_padding=float(1 - source.sum() / positions) if source.size else 0.0,
            target_padding=float(1 - target.sum() / positions) if source.size else 0.0,
            target_tokens_per_batch=float(target.sum() / batches) if source.size else 0.0,
            sample=sample,
        )

    @property
    def shapes(self):
        """`(batch_size, length)` of each bucket."""
        return list(zip(self.batch_sizes, self.lengths, strict=True))

    def to_json(self):
        """The attributes as a JSON-ready dict (`run.json` records it)."""
        return dataclasses.asdict(self) | {
            "lengths": list(self.lengths),
            "batch_sizes": list(self.batch_sizes),
        }

    def __str__(self):
        return (
            f"{len(self.lengths)} batch shapes, lengths {', '.join(map(str, self.lengths))}; "
            f"padding {100 * self.source_padding:.1f}% of source and "
            f"{100 * self.target_padding:.1f}% of target positions, "
            f"{self.target_tokens_per_batch:,.0f} real target tokens per batch "
            f"(measured on {self.pairs:,} pairs" + (f": {self.sample})" if self.sample else ")")
        )


def _fewest_padded_lengths(longer, max_length, max_shapes):
    """At most `max_shapes` lengths, the last `max_length`, minimizing the
    sum over `longer` of the first length `>= longer`."""
    values, counts = np.unique(longer, return_counts=True)
    if not values.size or values[-1] != max_length:
        values = np.append(values, max_length)
        counts = np.append(counts, 0)
    covered = np.cumsum(counts).astype(np.float64)  # pairs up to each value
    edges = values.astype(np.float64)
    # cost[k][j]: the least cost of the pairs up to values[j] in k + 1 buckets,
    # the last ending at values[j]; choice[k][j]: the previous bucket's end.
    cost = covered * edges
    choices = []
    best, best_buckets = cost[-1], 0
    for buckets in range(1, min(max_shapes, values.size)):
        # The next bucket ends at j and starts after i < j:
        # cost[i] + (covered[j] - covered[i]) * edges[j].
        total = cost[:, None] + (covered[None, :] - covered[:, None]) * edges[None, :]
        total[np.tril_indices(values.size)] = np.inf  # i must be below j
        choice = np.argmin(total, axis=0)
        cost = total[choice, np.arange(values.size)]
        choices.append(choice)
        if cost[-1] < best:
            best, best_buckets = cost[-1], buckets
    lengths, j = [], values.size - 1
    for buckets in range(best_buckets, 0, -1):
        lengths.append(int(values[j]))
        j = choices[buckets - 1][j]
    lengths.append(int(values[j]))
    return tuple(sorted(lengths))
