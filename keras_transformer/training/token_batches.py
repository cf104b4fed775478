"""`TokenBatches`: training batches with the facts `train` needs about
them, and how a run reads them from what it is given."""

import dataclasses

import tensorflow as tf


@dataclasses.dataclass(frozen=True)
class TokenBatches:
    """Training batches (`make_batches`) and what is known of them.

    Attributes:
        dataset: the `tf.data.Dataset` of `((source, target_in),
            target_out)` batches (pass it to `fit` or `evaluate`).
        shapes: the `BatchShapes` the batches are padded to
            (`static_shapes=True`), or `None`: each padded to its longest.
        tokenizer: the `Tokenizer` that made them, or `None`; `train`
            records it with the run (`Translator.from_run`).
        mixing_weights: the `{target_lang: probability}` the corpora were
            mixed with (`mix_corpora`), or `None`.
        counter: a function of no arguments that counts the pairs kept and
            left out (`PairCounts`, one pass over the pairs), or `None`.

    Your own `tf.data` pipeline can carry a tokenizer the same way:

    >>> train(model, TokenBatches(my_dataset, tokenizer=tokenizer), "runs/mine", settings)

    Example:

    >>> batches = make_batches(pairs, tokenizer, batch_tokens=4096)
    >>> (source, target_in), target_out = next(iter(batches.dataset))
    >>> print(batches.pair_counts())
    29,000 pairs: 28,950 kept, 50 dropped (a side over max_length=256) ...
    """

    dataset: tf.data.Dataset
    shapes: object = None
    tokenizer: object = None
    mixing_weights: dict | None = None
    counter: object = dataclasses.field(default=None, repr=False, compare=False)

    def __post_init__(self):
        if not isinstance(self.dataset, tf.data.Dataset):
            raise ValueError(
                "`dataset` must be a tf.data.Dataset of ((source, target_in), target_out) "
                f"batches. Received: dataset={self.dataset!r}"
            )

    def pair_counts(self):
        """The pairs kept and left out by the pipeline (`PairCounts`), or
        `None` when it cannot tell (batches not from `make_batches`)."""
        return None if self.counter is None else self.counter()


class TrainingInput:
    """What `train` is given as batches, read once: a `TokenBatches`, a
    `tf.data.Dataset`, or a function `input_context -> TokenBatches` (or
    dataset), called once per input pipeline (under a multi-replica
    strategy, through `distribute_datasets_from_function`).

    Attributes:
        dataset: the batches repeated forever, distributed over the
            replicas for a function.
        facts: the `TokenBatches` read (of the first input pipeline), or
            `None` for a plain dataset.
    """

    def __init__(self, batches, strategy):
        self.facts = None
        if isinstance(batches, (TokenBatches, tf.data.Dataset)):
            self.dataset = self._read(batches).repeat()
        elif not callable(batches):
            raise ValueError(
                "`batches` must be a TokenBatches (`make_batches`), a tf.data.Dataset, or a "
                f"function of a tf.distribute.InputContext returning one. Received: {batches!r}"
            )
        elif strategy.num_replicas_in_sync > 1:
            self.dataset = strategy.distribute_datasets_from_function(
                lambda context: self._read(batches(context)).repeat()
            )
        else:
            self.dataset = self._read(batches(tf.distribute.InputContext())).repeat()

    def _read(self, batches):
        """The dataset of `batches`, keeping its facts (the first seen)."""
        if isinstance(batches, TokenBatches):
            if self.facts is None:
                self.facts = batches
            return batches.dataset
        if isinstance(batches, tf.data.Dataset):
            return batches
        raise ValueError(
            "The batches function must return a TokenBatches (`make_batches`) or a "
            f"tf.data.Dataset. Received: {batches!r}"
        )

    @property
    def shapes(self):
        """The `BatchShapes` of the batches, or `None`."""
        return None if self.facts is None else self.facts.shapes

    @property
    def tokenizer(self):
        """The tokenizer of the batches, or `None`."""
        return None if self.facts is None else self.facts.tokenizer

    def no_batch_message(self):
        """Why the batches gave `train` nothing, with the pipeline's pair
        counts when known."""
        counts = None if self.facts is None else self.facts.pair_counts()
        reason = f": {counts}" if counts else ""
        return (
            "The training data produced no batch, so nothing was trained" + reason + ". Check "
            "the input files, and that max_length fits the sentences."
        )
