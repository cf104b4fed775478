"""Rewrites a `.keras` file of keras_transformer 0.1 in today's layout.

    python -m keras_transformer.upgrade OLD.keras NEW.keras

Until 0.2 the attention's projections were `Dense` layers with kernels
`(d_model, heads * depth)`; since, they are Keras's own `EinsumDense`,
`(d_model, heads, depth)`. `keras.saving.load_model` reads the weights of
a file of that time into today's layout by itself; what it cannot read is
the optimizer's state that `model.save` keeps beside them (Adam's moments
have the kernels' shapes, and the optimizer is Keras's). This command
loads the model, reads the optimizer's variables into today's shapes, and
saves both: the new file loads with `keras.saving.load_model` and resumes
training where the old one stopped. (`load_model(OLD, compile=False)`
loads the model alone, without the optimizer.)
"""

import argparse
import io
import json
import os
import sys
import zipfile

from keras_transformer.layers._projection import in_shape

WEIGHTS = "model.weights.h5"


def upgrade(path, new_path):
    """Writes the `.keras` file at `path` (keras_transformer 0.1's layout)
    to `new_path` in today's, the optimizer's state included; returns
    `new_path`.

    Raises:
        FileExistsError: `new_path` exists.
        ValueError: `path` is not a `.keras` file whose optimizer state
            fits the model.

    Example:

    >>> upgrade("runs/old/model.keras", "runs/old/model_0.2.keras")
    """
    import h5py
    import keras

    if os.path.exists(new_path):
        raise FileExistsError(f"Not overwriting {new_path}: remove it first, or name another file.")
    with zipfile.ZipFile(path) as archive:
        config = json.loads(archive.read("config.json"))
        weights = archive.read(WEIGHTS) if WEIGHTS in archive.namelist() else None
    model = keras.saving.load_model(path, compile=False)
    if config.get("compile_config") and weights is not None:
        model.compile_from_config(config["compile_config"])
        with h5py.File(io.BytesIO(weights), "r") as stored:
            values = stored.get("optimizer/vars", {})
            variables = model.optimizer.variables
            if len(values) != len(variables):
                raise ValueError(
                    f"The optimizer of {path} has {len(values)} variables, the model's "
                    f"{len(variables)}: the file is not of this model."
                )
            for index, variable in enumerate(variables):
                variable.assign(in_shape(values[str(index)][()], tuple(variable.shape)))
    model.save(new_path)
    return new_path


def main(argv=None):
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("old", help="the .keras file of keras_transformer 0.1")
    parser.add_argument("new", help="where to write it in today's layout (must not exist)")
    args = parser.parse_args(argv)
    try:
        upgrade(args.old, args.new)
    except (FileExistsError, ValueError, OSError, KeyError) as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    print(f"wrote {args.new}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
