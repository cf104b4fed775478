import dataclasses
import os

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
os.environ.setdefault("KERAS_BACKEND", "tensorflow")

import keras  # noqa: E402
import pytest  # noqa: E402

# KERAS_BACKEND selects the backend (TensorFlow unless set); under JAX or
# PyTorch the tests marked `tensorflow_only` are skipped.
BACKEND = keras.backend.backend()


def pytest_report_header(config):
    return f"Keras backend: {BACKEND}"


def pytest_collection_modifyitems(config, items):
    if BACKEND == "tensorflow":
        return
    skip = pytest.mark.skip(reason=f"TensorFlow only; KERAS_BACKEND={BACKEND}")
    for item in items:
        if item.get_closest_marker("tensorflow_only"):
            item.add_marker(skip)


@pytest.fixture(autouse=True)
def _fresh_keras_state():
    """Every test starts seeded and in float32."""
    keras.utils.set_random_seed(1234)
    yield
    keras.mixed_precision.set_global_policy("float32")


@dataclasses.dataclass
class TrainedReverser:
    """A model `training.train` taught to reverse letter sequences."""

    model: keras.Model
    tokenizer: object
    result: object


@pytest.fixture(scope="session")
def letter_reverser(tmp_path_factory):
    """The tiny preset trained for 1,000 updates on 5,000 letter reversals
    with a SentencePiece vocabulary: one run serves the trainer's test that
    the recipe learns, and the translator's tests of exact outputs."""
    from keras_transformer import Transformer
    from keras_transformer import training
    from keras_transformer.tokenization import train_sentencepiece
    from tests.training.helpers import letter_reversal_corpus
    from tests.training.helpers import train_tiny

    keras.utils.set_random_seed(0)  # session fixtures run before the autouse seeding
    sources, targets = letter_reversal_corpus(5000, seed=0)
    tokenizer = train_sentencepiece(sources + targets, 300)
    batches = training.make_batches(
        training.text_pairs_from_lists(sources, targets),
        tokenizer,
        batch_tokens=1024,
        max_length=16,
        seed=0,
        vocab_size=tokenizer.vocab_size,
    )
    model = Transformer.from_preset("tiny", vocab_size=tokenizer.vocab_size, dropout=0.0)
    model_dir = tmp_path_factory.mktemp("reverser")
    result = train_tiny(
        model_dir, 1000, model, batches, steps_per_checkpoint=1000, warmup_steps=200
    )
    return TrainedReverser(model, tokenizer, result)
