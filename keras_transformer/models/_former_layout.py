"""A `.keras` file of keras_transformer 0.1 whose optimizer state Keras
cannot read (see `keras_transformer.upgrade`): refused with the way out."""

from keras_transformer.layers._projection import merges_axes


def refuse_former_optimizer_state(model, store):
    """Raises a `ValueError` naming `python -m keras_transformer.upgrade`
    when the weights `store` being loaded into `model` holds its
    optimizer's variables in the flat layout of 0.1 (Keras's optimizer
    would refuse them with a shape error that names no way out); does
    nothing otherwise."""
    if not model.compiled or not model.optimizer.variables:
        return  # loaded with compile=False, or no optimizer state to read
    stored = store.get("optimizer")
    keys = set(stored.keys())
    for index, variable in enumerate(model.optimizer.variables):
        value = stored[str(index)] if str(index) in keys else None
        if value is not None and merges_axes(value.shape, variable.shape):
            raise ValueError(
                "This file was written by keras_transformer 0.1: its optimizer state has the "
                "attention kernels' former shapes, `(d_model, heads * depth)`, which Keras's "
                "optimizer cannot read. Rewrite it once with `python -m keras_transformer.upgrade "
                "OLD.keras NEW.keras` (keeps the optimizer state), or load the model alone with "
                f"`keras.saving.load_model(path, compile=False)`. Received: {variable.path} "
                f"stored with shape {tuple(value.shape)}"
            )
