"""P_drop from the passes over the training data a run makes.

Dropout guards against over-fitting, and how much a run over-fits depends
on how often it sees each sentence. Under a time budget that is known only
once training runs: the same 30 minutes make 8 passes over Multi30k on one
CPU and 14 to 20 on others, and the best rate differs (the `small`
model: 0.1 at 7-8 passes, 0.2 at 14; benchmarks/results/
the-small-corpus-recipe.md).
`DropoutByPasses` maps the passes to a rate; `train` sets the model's rate
from it (`training.dropout_fitter`). Plain Python, on every backend.
"""

import dataclasses

import numpy as np

from keras_transformer_runtime import validation


@dataclasses.dataclass(frozen=True)
class DropoutByPasses:
    """P_drop as a function of the passes over the training data: linear
    between the `(passes, rate)` points of `rates`, the first rate before
    them and the last one after.

    Attributes:
        updates_per_pass: optimizer updates of one pass over the training
            data (its target tokens over the tokens of an update).
        rates: `(passes, rate)` points, passes increasing, each rate in
            [0, 1). The default is what the `small` model measured on
            Multi30k (4,000 pieces, 1,024 tokens an update): 0.1 ahead at
            7 and 8 passes, 0.2 at 14 to 15; so 0.1 up to 9 passes, 0.2
            from 14, linear between.

    Example:

    >>> plan = DropoutByPasses(updates_per_pass=500)
    >>> plan.rate(4000), plan.rate(5750), plan.rate(10_000)
    (0.1, 0.15, 0.2)
    """

    updates_per_pass: float
    rates: tuple = ((9.0, 0.1), (14.0, 0.2))

    def __post_init__(self):
        number = isinstance(self.updates_per_pass, (int, float))
        if isinstance(self.updates_per_pass, bool) or not number or not self.updates_per_pass > 0:
            raise ValueError(
                "`updates_per_pass` must be a positive number. "
                f"Received: updates_per_pass={self.updates_per_pass!r}"
            )
        try:
            rates = tuple((float(passes), float(rate)) for passes, rate in self.rates)
        except (TypeError, ValueError):
            rates = ()
        passes = [p for p, _ in rates]
        increasing = all(a < b for a, b in zip(passes, passes[1:], strict=False))
        if not rates or passes[0] < 0 or not increasing:
            raise ValueError(
                "`rates` must be (passes, rate) pairs, passes >= 0 and increasing, e.g. "
                f"((10, 0.1), (16, 0.2)). Received: rates={self.rates!r}"
            )
        validation.check_rate(**{f"rates[{i}]": rate for i, (_, rate) in enumerate(rates)})
        object.__setattr__(self, "rates", rates)

    def passes(self, updates):
        """The passes over the training data `updates` updates make."""
        return updates / self.updates_per_pass

    def rate(self, updates):
        """The dropout rate of a run of `updates` updates."""
        passes = [p for p, _ in self.rates]
        rates = [r for _, r in self.rates]
        return round(float(np.interp(self.passes(updates), passes, rates)), 4)
