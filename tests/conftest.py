import dataclasses
import fcntl
import gc
import os

import pytest

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")


def _share_the_cores():
    """Under pytest-xdist, each worker's math libraries get their share
    of the cores (TensorFlow's, XLA's and PyTorch's thread pools would
    each take them all, and the workers would contend for them). The
    variables set here are only defaults: a test that asks for a thread
    count gets it, and a process a test starts inherits them."""
    workers = int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1"))
    if workers < 2:
        return
    share = str(max(1, (os.cpu_count() or 1) // workers))
    os.environ.setdefault("TF_NUM_INTRAOP_THREADS", share)
    os.environ.setdefault("OMP_NUM_THREADS", share)
    if share == "1":
        flags = os.environ.get("XLA_FLAGS", "")
        os.environ["XLA_FLAGS"] = f"{flags} --xla_cpu_multi_thread_eigen=false".strip()


_share_the_cores()
# KERAS_BACKEND selects the backend (TensorFlow unless set); under JAX or
# PyTorch the tests marked `tensorflow_only` are skipped.
BACKEND = os.environ.setdefault("KERAS_BACKEND", "tensorflow")
# Keras (and so TensorFlow) is imported by the fixtures and the test modules
# only: pytest-xdist's controller process needs neither, and TensorFlow's
# absl logs at import would otherwise print after the summary line.


def pytest_addoption(parser):
    parser.addoption(
        "--run_large",
        action="store_true",
        default=False,
        help="also run the tests marked `large` (they train to a result, trace a "
        "SavedModel or start a Python process); `-m large --run_large` runs only them",
    )
    parser.addoption(
        "--record_passed",
        metavar="PATH",
        help="write the node ids of the tests that passed to PATH, one a line",
    )
    parser.addoption(
        "--skip_passed",
        metavar="PATH",
        help="deselect the tests whose node ids PATH lists (`--record_passed` of an "
        "earlier run of this checkout): CI runs tests/runtime in the runtime's own venv "
        "first, and its later rounds run only what did not pass there",
    )


def pytest_report_header(config):
    tier = "fast and large" if config.getoption("--run_large") else "fast (large: --run_large)"
    return f"Keras backend: {BACKEND}; tests: {tier}"


def _deselect(config, items, unwanted):
    kept, dropped = [], []
    for item in items:
        (dropped if unwanted(item) else kept).append(item)
    if dropped:
        config.hook.pytest_deselected(items=dropped)
        items[:] = kept


def pytest_collection_modifyitems(config, items):
    if not config.getoption("--run_large"):  # the fast tier: large tests deselected
        _deselect(config, items, lambda item: item.get_closest_marker("large"))
    if config.getoption("--skip_passed"):
        with open(config.getoption("--skip_passed"), encoding="utf-8") as f:
            passed = set(f.read().splitlines())
        _deselect(config, items, lambda item: item.nodeid in passed)
    skip_backend = pytest.mark.skip(reason=f"TensorFlow only; KERAS_BACKEND={BACKEND}")
    for item in items:
        if item.get_closest_marker("tensorflow_only") and BACKEND != "tensorflow":
            item.add_marker(skip_backend)


class _PassedRecorder:
    """`--record_passed`: the node ids of the tests whose setup, call and
    teardown all passed (under pytest-xdist, the controller sees every
    worker's reports), written when the session ends."""

    def __init__(self, path):
        self.path, self.passed = path, set()

    def pytest_runtest_logreport(self, report):
        if report.when == "call" and report.passed:
            self.passed.add(report.nodeid)
        elif report.failed:  # a teardown's failure comes after its call's pass
            self.passed.discard(report.nodeid)

    def pytest_sessionfinish(self):
        with open(self.path, "w", encoding="utf-8") as f:
            f.writelines(f"{nodeid}\n" for nodeid in sorted(self.passed))


def pytest_configure(config):
    if config.getoption("--record_passed") and "PYTEST_XDIST_WORKER" not in os.environ:
        config.pluginmanager.register(_PassedRecorder(config.getoption("--record_passed")))


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item, nextitem):
    """After each test (its fixtures torn down), collect its garbage and
    freeze what is left: the session's survivors (TensorFlow's modules,
    the session fixtures' models and graphs) are then never walked again
    by the collector's full passes. Without this, those passes walked
    hundreds of thousands of old objects and took a third of a worker's
    time under pytest-xdist, up to 33 s each (82 training and model tests
    under `-n 2`: 361 s, 247 s with it; benchmarks/notes/
    2026-12-01-ci-time-freezing-the-survivors.md)."""
    yield
    gc.collect()
    gc.freeze()


@pytest.fixture(autouse=True)
def _fresh_keras_state():
    """Every test starts seeded and in float32 (where Keras is installed:
    the runtime's tests also run without it)."""
    try:
        import keras
    except ImportError:
        yield
        return
    keras.utils.set_random_seed(1234)
    yield
    keras.mixed_precision.set_global_policy("float32")


@dataclasses.dataclass
class TrainedReverser:
    """A model `training.train` taught to reverse letter sequences."""

    model: object  # keras.Model
    tokenizer: object
    result: object


@pytest.fixture(scope="session")
def letter_reverser(tmp_path_factory):
    """The tiny preset trained for 1,000 updates on 5,000 letter reversals
    with a SentencePiece vocabulary: one run serves the trainer's test that
    the recipe learns, and the translator's tests of exact outputs (large
    tests only)."""
    import keras

    from keras_transformer import Transformer
    from keras_transformer import training
    from keras_transformer.tokenization import SentencePieceTokenizer
    from keras_transformer.tokenization import train_sentencepiece
    from tests.training.helpers import letter_reversal_corpus
    from tests.training.helpers import train_quietly

    def train(directory, tokenizer):
        keras.utils.set_random_seed(0)  # session fixtures run before the autouse seeding
        sources, targets = letter_reversal_corpus(5000, seed=0)
        batches = training.make_batches(
            training.text_pairs_from_lists(sources, targets),
            tokenizer,
            batch_tokens=1024,
            max_length=16,
            seed=0,
            vocab_size=tokenizer.vocab_size,
        )
        model = Transformer.from_preset("tiny", vocab_size=tokenizer.vocab_size, dropout=0.0)
        # The budget schedule decays to zero at the last update: over seven
        # seeds the model then reversed every one of 200 held-out sequences
        # (with the paper's schedule, still high at the end, one seed got 3
        # wrong). Where the run is finished, `train` restores it.
        result = train_quietly(
            directory,
            1000,
            model,
            batches,
            steps_per_checkpoint=1000,
            warmup_steps=200,
            learning_rate_schedule="budget",
        )
        return model, result

    def build(directory):
        sources, targets = letter_reversal_corpus(5000, seed=0)
        tokenizer = train_sentencepiece(sources + targets, 300)
        tokenizer.save(directory / "spm.model")
        return (tokenizer, *train(directory, tokenizer))

    def load(directory):
        tokenizer = SentencePieceTokenizer.from_file(directory / "spm.model")
        return (tokenizer, *train(directory, tokenizer))

    tokenizer, model, result = once_for_all_workers(tmp_path_factory, "reverser", build, load)
    return TrainedReverser(model, tokenizer, result)


@pytest.fixture(scope="session")
def sentencepiece_tokenizer():
    """One SentencePiece tokenizer over letter sequences (280 pieces, its
    256 bytes included), for every test that needs a real tokenizer but no
    particular vocabulary."""
    from keras_transformer.tokenization import train_sentencepiece
    from tests.training.helpers import letter_reversal_corpus

    sources, targets = letter_reversal_corpus(200, seed=0)
    return train_sentencepiece(sources + targets, 280)


@pytest.fixture(scope="session")
def micro_translator(sentencepiece_tokenizer):
    """An untrained `Translator` (a `micro_model`, beam 2, at most 4 tokens
    beyond the source), for the tests that need *a* translator."""
    import keras

    from keras_transformer import Translator
    from tests.micro import micro_model

    keras.utils.set_random_seed(0)  # session fixtures run before the autouse seeding
    model = micro_model(vocab_size=sentencepiece_tokenizer.vocab_size)
    return Translator(model, sentencepiece_tokenizer, beam_size=2, max_extra_length=4)


@pytest.fixture(scope="session")
def exported_translator(micro_translator, tmp_path_factory):
    """`micro_translator` exported once as a SavedModel: `(translator,
    version directory)`. Only large tests use it (tracing every signature
    is the cost); every worker's `micro_translator` has the same weights."""
    from keras_transformer.export import export_saved_model
    from keras_transformer.export import resolve_version_dir

    def build(directory):
        return export_saved_model(micro_translator, directory)

    path = once_for_all_workers(tmp_path_factory, "exported", build, resolve_version_dir)
    return micro_translator, path


def _marian_directory(tmp_path_factory, name, **options):
    pytest.importorskip("transformers", reason="the Marian tests compare with transformers")
    from tests.pretrained.marian_directory import generated_pairs
    from tests.pretrained.marian_directory import write_marian_directory

    def build(directory):
        sources, targets = generated_pairs(400, seed=0)
        write_marian_directory(
            directory, sources, targets, language_codes=(">>deu<<", ">>fra<<"), **options
        )
        return directory

    return once_for_all_workers(tmp_path_factory, name, build, lambda directory: directory)


@pytest.fixture(scope="session")
def marian_directory(tmp_path_factory):
    """The directory of a tiny random Marian model as Hugging Face saves
    it, with its tokenizer files (tied embeddings, swish, two language
    codes): the oracle of the Marian tokenizer and import tests."""
    return _marian_directory(tmp_path_factory, "marian", train_steps=0)


@pytest.fixture(scope="session")
def trained_marian(tmp_path_factory):
    """`marian_directory`'s kind of model, wider and trained a few hundred
    steps, so that its outputs vary as a translator's do: the oracle of
    the search and export tests (large ones only)."""
    return _marian_directory(
        tmp_path_factory, "marian-trained", d_model=32, ffn_dim=64, num_heads=4, train_steps=300
    )


def free_port():
    """A TCP port of the loopback interface that nothing listens on now."""
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def once_for_all_workers(tmp_path_factory, name, build, load):
    """`build(directory)` once per test run, in a directory that
    pytest-xdist's workers share (under a file lock), and `load(directory)`
    in every other worker: the costly session fixtures are built once
    whatever runs where."""
    root = tmp_path_factory.getbasetemp()
    if os.environ.get("PYTEST_XDIST_WORKER"):
        root = root.parent  # the run's, above each worker's own
    directory = root / f"shared-{name}"
    with open(root / f"shared-{name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # released when the file closes
        if (directory / "built").exists():
            return load(directory)
        directory.mkdir(exist_ok=True)
        result = build(directory)
        (directory / "built").write_text("")
        return result


# Each runner's export of the trained letter reverser with beam search
# (beam 3), made where a test first asks for it, once for all workers: the
# runner conformance tests, the LiteRT and ONNX agreement tests, the
# server's tests and the server benchmark's share them (a conversion takes 20-40 s).
EXPORT_FILES = {
    "SavedModelTranslator": "saved_model",
    "CTranslate2Translator": "ct2",
    "LiteRTTranslator": "ende.tflite",
    "ONNXTranslator": "ende.onnx",
}


@pytest.fixture(scope="session")
def reverser_translator(letter_reverser):
    """`Translator` of the trained letter reverser, beam 3."""
    from keras_transformer import Translator

    return Translator(letter_reverser.model, letter_reverser.tokenizer, beam_size=3)


@pytest.fixture(scope="session")
def reverser_export(reverser_translator, tmp_path_factory):
    """`export(runner_name)`: the path of `reverser_translator`'s export
    for that runner (alone in its directory), written once per run."""
    from keras_transformer import export

    writers = {
        "SavedModelTranslator": export.export_saved_model,
        "CTranslate2Translator": export.export_ctranslate2,
        "LiteRTTranslator": export.export_litert,
        "ONNXTranslator": export.export_onnx,
    }

    def path(runner_name):
        def build(directory):
            target = directory / "export" / EXPORT_FILES[runner_name]
            target.parent.mkdir(exist_ok=True)
            return writers[runner_name](reverser_translator, target) or target

        def load(directory):
            return directory / "export" / EXPORT_FILES[runner_name]

        return os.fspath(
            once_for_all_workers(tmp_path_factory, f"reverser-{runner_name}", build, load)
        )

    return path
