"""--dropout_by_passes of `wmt_ende.py`: P_drop from the passes over the
training data the run makes (`training.DropoutByPasses`), e.g. 0.1 on a
CPU whose 30 minutes make 8 passes over Multi30k, 0.2 on one that makes
14 or more."""

from keras_transformer import training


def dropout_points(config):
    """`config.dropout_by_passes` as `((passes, rate), ...)`; `None` for
    none.

    Raises:
        ValueError: not PASSES:RATE points.

    >>> dropout_points(parse_config(["--dropout_by_passes", "9:0.1,14:0.2"]))
    ((9.0, 0.1), (14.0, 0.2))
    """
    text = config.dropout_by_passes
    if text is None or text.strip().lower() == "none":
        return None
    try:
        return tuple(
            (float(passes), float(rate))
            for passes, rate in (point.split(":") for point in text.split(","))
        )
    except ValueError:
        raise ValueError(f"{text!r} is not PASSES:RATE points, e.g. 9:0.1,14:0.2") from None


def dropout_by_passes(config, train_pairs, tokenizer, micro_batches):
    """The `DropoutByPasses` of --dropout_by_passes (None without), over
    the target tokens of a pass over `train_pairs` and the
    `micro_batches` of --batch_tokens of an update."""
    points = dropout_points(config)
    if points is None:
        return None
    tokens = training.target_tokens_per_pass(train_pairs, tokenizer, config.max_length)
    plan = training.DropoutByPasses(tokens / (config.batch_tokens * micro_batches), points)
    print(
        f"dropout: by the passes over {tokens:,} target tokens ({plan.updates_per_pass:.0f} "
        f"updates each), {config.dropout_by_passes}"
    )
    return plan
