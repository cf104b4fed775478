"""How many times XLA compiles the training step of `fit` on `make_batches`:
run as `python -m tests.training.compile_count DUMP_DIR STATIC MAX_SHAPES
STEPS`, it trains a micro model with `jit_compile=True` on a long-tailed
corpus and prints, as JSON, the distinct batch shapes it fed and the
compiles XLA made (a module dump per compile into DUMP_DIR, which
XLA_FLAGS must name before TensorFlow starts: hence a process of its own).
"""

import glob
import json
import os
import sys


def main(dump_directory, static, max_shapes, steps):
    os.environ["XLA_FLAGS"] = (
        f"--xla_dump_to={dump_directory} --xla_dump_hlo_module_re=.*one_step_on_data.*"
    )
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
    import keras

    from keras_transformer import training
    from tests.micro import micro_model
    from tests.training.helpers import number_tokenizer
    from tests.training.test_static_batches import long_tailed_corpus

    keras.utils.set_random_seed(0)
    pairs = training.text_pairs_from_lists(*long_tailed_corpus(600, max_len=40))
    batches = training.make_batches(
        pairs,
        number_tokenizer,
        256,
        max_length=48,
        seed=0,
        repeat=True,
        static_shapes=static,
        max_shapes=max_shapes,
    )
    # The same batches are counted, then trained on.
    fed = batches.dataset.take(steps).cache()
    shapes = {(s.shape, ti.shape) for (s, ti), _ in fed.as_numpy_iterator()}
    model = training.compile_for_training(
        micro_model(vocab_size=50), training.TrainingSettings(jit_compile=True)
    )
    model.fit(fed, epochs=1, verbose=0)
    dumps = glob.glob(os.path.join(dump_directory, "*one_step_on_data*before_optimizations.txt"))
    print(json.dumps({"shapes": len(shapes), "compiles": len(dumps)}))


if __name__ == "__main__":
    directory, static, max_shapes, steps = sys.argv[1:]
    main(directory, static == "static", int(max_shapes), int(steps))
