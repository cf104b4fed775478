"""Exports that run at once, die half way, replace a version, or meet a
request too large, a model with NaN weights or an XLA-compiled search."""

import json
import os
import pathlib
import socket
import subprocess
import threading

import numpy as np
import pytest
import tensorflow as tf
from tensorflow.core.protobuf import saved_model_pb2

from keras_transformer import Transformer
from keras_transformer import Translator
from keras_transformer.export import export_saved_model
from keras_transformer.export.versions import claimed_version
from keras_transformer_runtime import SavedModelTranslator

pytestmark = pytest.mark.tensorflow_only  # TensorFlow by design

SENTENCES = ["a b c d e", "j i h g f e d c b a"]


@pytest.fixture
def translator(micro_translator):
    return micro_translator


def export(translator, base, **options):
    return export_saved_model(translator, base, warmup_sentences=(), **options)


def test_claims_are_exclusive_even_under_concurrency(tmp_path):
    base = str(tmp_path / "models")
    claimed, release = [], threading.Event()

    def claim():
        with claimed_version(base) as version:
            claimed.append(version)
            release.wait(10)

    threads = [threading.Thread(target=claim) for _ in range(8)]
    for thread in threads:
        thread.start()
    while len(claimed) < 8:
        threading.Event().wait(0.01)
    release.set()
    for thread in threads:
        thread.join()
    assert sorted(claimed) == list(range(1, 9))
    assert os.listdir(base) == []  # claims are released


def test_an_export_never_takes_a_version_another_one_is_writing(translator, tmp_path, quick_writes):
    base = str(tmp_path / "models")
    with claimed_version(base) as other:  # another export is writing version 1
        assert other == 1
        assert os.path.basename(export(translator, base)) == "2"
        with pytest.raises(FileExistsError, match="being exported by another process"):
            export(translator, base, version=1)
    assert sorted(os.listdir(base)) == ["2"]


def dead_pid():
    """The id of a process that has ended (not a Python process: cheap)."""
    process = subprocess.Popen(["true"])
    process.wait()
    return process.pid


def test_leftovers_of_a_killed_export_are_removed(translator, tmp_path, quick_writes):
    base = tmp_path / "models"
    for name in (".tmp-export-3-abc", ".claim-4"):
        (base / name).mkdir(parents=True)
        (base / name / "owner").write_text(f"{socket.gethostname()} {dead_pid()}")
    (base / ".claim-7").mkdir()  # being written right now: no owner yet
    assert os.path.basename(export(translator, base)) == "8"
    assert sorted(os.listdir(base)) == [".claim-7", "8"]


def test_a_failed_overwrite_keeps_the_old_version(translator, tmp_path, monkeypatch, quick_writes):
    base = tmp_path / "models"
    first = export(translator, base)
    before = pathlib.Path(first, "saved_model.pb").read_bytes()
    rename = os.rename

    def fail_the_swap(source, target):
        if ".tmp-export-" in str(source) and str(target) == first:
            raise OSError("disk failure")
        rename(source, target)

    monkeypatch.setattr(os, "rename", fail_the_swap)
    with pytest.raises(OSError, match="disk failure"):
        export(translator, base, version=1, overwrite=True)
    assert quick_writes == [1, 1]  # the second export was written, then not swapped in
    assert pathlib.Path(first, "saved_model.pb").read_bytes() == before
    assert sorted(os.listdir(base)) == ["1"]


@pytest.mark.large  # traces a SavedModel
def test_requests_over_the_limits_are_refused_with_the_limit(translator, tmp_path):
    # The two sentences, each with its EOS, are exactly the token limit.
    tokens = sum(len(ids) + 1 for ids in translator.tokenizer(SENTENCES).to_list())
    path = export(
        translator, tmp_path / "models", max_batch_size=2, max_input_tokens=tokens, max_phrases=2
    )
    serve = tf.saved_model.load(path).signatures["serving_default"]
    assert serve(text=tf.constant(SENTENCES))["translation"].shape == (2,)
    with pytest.raises(tf.errors.InvalidArgumentError, match="max_batch_size=2"):
        serve(text=tf.constant(SENTENCES + ["x"]))
    with pytest.raises(tf.errors.InvalidArgumentError, match=f"max_input_tokens={tokens} "):
        serve(text=tf.constant([" ".join(SENTENCES * 2)]))
    settings = json.loads(pathlib.Path(path, "assets.extra", "keras_transformer.json").read_text())
    assert (settings["max_batch_size"], settings["max_input_tokens"]) == (2, tokens)
    assert settings["max_phrases"] == 2
    assert SavedModelTranslator(path).bulk_batch_size == 2  # its 256 within the limit


def pieces(translator, text):
    return len(translator.tokenizer.tokenize_target(tf.constant([text])).to_list()[0])


@pytest.mark.large  # traces a SavedModel
def test_terminology_phrases_are_counted_whole_and_bounded(translator, tmp_path):
    """Constraint phrases are kept whole by the search, whose step costs
    the square of a phrase's length: a long phrase passed a limit that
    counted it truncated. Now the export refuses a phrase longer than an
    output, more than `max_phrases` per sentence, or more phrase tokens
    than `max_input_tokens`; and the client batches by phrase tokens."""
    from keras_transformer_runtime import SavedModelTranslator

    phrase = "a b c d e f g"
    tokens = 2 * pieces(translator, phrase) - 1  # one phrase fits, two do not
    path = export(translator, tmp_path / "models", max_input_tokens=tokens, max_phrases=2)
    constrained = tf.saved_model.load(path).signatures["translate_with_constraints"]

    def ask(constraints, banned=("",), text=("a b",)):
        return constrained(
            text=tf.constant(list(text)),
            constraints=tf.constant(list(constraints)),
            banned=tf.constant(list(banned)),
        )

    assert ask(["a ||| b"])["translation"].shape == (1,)
    longest = translator.settings.max_output_length - 1
    long_phrase = " ".join(["a"] * (longest + 1))
    assert pieces(translator, long_phrase) > longest
    with pytest.raises(tf.errors.InvalidArgumentError, match=f"{longest} target tokens in one"):
        ask([long_phrase])
    with pytest.raises(tf.errors.InvalidArgumentError, match="max_phrases=2 banned phrases"):
        ask([""], banned=["a ||| b ||| c"])
    with pytest.raises(
        tf.errors.InvalidArgumentError, match=f"max_input_tokens={tokens} constraints"
    ):
        ask([f"{phrase} ||| {phrase}"])

    # Each sentence fits alone; together their phrases would not.
    client = SavedModelTranslator(path)
    found = client.translate_with_constraints(["a b", "c d"], [[phrase], [phrase]], batch_size=64)
    assert len(found) == 2


def test_non_finite_weights_are_not_exported(translator, tmp_path):
    model = Transformer.from_config(translator.model.get_config())
    model.set_weights(translator.model.get_weights())
    model.trainable_weights[0].assign(np.full(model.trainable_weights[0].shape, np.nan))
    with pytest.raises(ValueError, match="NaN or infinite"):
        export(Translator(model, translator.tokenizer), tmp_path / "models")
    assert not os.path.exists(tmp_path / "models" / "1")


def compiled_functions(path):
    """Names of the saved functions marked for XLA, and XLA op types."""
    saved = saved_model_pb2.SavedModel()
    with open(os.path.join(path, "saved_model.pb"), "rb") as f:
        saved.ParseFromString(f.read())
    found = []
    for meta_graph in saved.meta_graphs:
        for function in meta_graph.graph_def.library.function:
            if function.attr["_XlaMustCompile"].b:
                found.append(function.signature.name)
            found += [n.op for n in function.node_def if n.op.startswith("Xla")]
    return found


@pytest.mark.large  # traces a SavedModel
def test_an_xla_translator_is_exported_without_xla(translator, tmp_path):
    xla = Translator(translator.model, translator.tokenizer, translator.settings, jit_compile=True)
    path = export(xla, tmp_path / "models")
    assert compiled_functions(path) == []
    serve = tf.saved_model.load(path).signatures["serving_default"]
    expected = translator.graph.serving_default(tf.constant(SENTENCES))["translation"]
    assert serve(text=tf.constant(SENTENCES))["translation"].numpy().tolist() == (
        expected.numpy().tolist()
    )


def killed_staging(parent, prefix):
    """What a killed export leaves: its marked staging directory, half
    written, of a process that has ended."""
    staging = parent / f"{prefix}killed"
    staging.mkdir(parents=True)
    (staging / "owner").write_text(f"{socket.gethostname()} {dead_pid()}")
    (staging / "half-written").write_bytes(b"\0" * 1000)
    return staging


def test_a_model_file_export_removes_what_a_killed_one_left(translator, tmp_path):
    """LiteRT and ONNX write one model file through a staging directory:
    a later export removes the staging directories of killed ones, and
    leaves a live export's and anything unmarked alone."""
    from keras_transformer.export.exported_search import write_model_file

    path = tmp_path / "model.tflite"
    killed = killed_staging(tmp_path, ".model.tflite.tmp-")
    live = tmp_path / ".model.tflite.tmp-live"
    live.mkdir()
    (live / "owner").write_text(f"{socket.gethostname()} {os.getpid()}")
    unmarked = tmp_path / ".model.tflite.tmp-old-x"  # no owner: not a staging directory
    unmarked.mkdir()
    other = killed_staging(tmp_path, ".other.tflite.tmp-")  # another file's

    write_model_file(
        path, translator, {"runtime": "test"}, lambda f: pathlib.Path(f).write_bytes(b"m")
    )
    assert path.read_bytes() == b"m"
    assert not killed.exists()
    assert live.exists() and unmarked.exists() and other.exists()


def test_a_ctranslate2_export_removes_what_a_killed_one_left(translator, tmp_path):
    pytest.importorskip("ctranslate2")
    from keras_transformer.export import export_ctranslate2

    killed = killed_staging(tmp_path, ".ct2.tmp-")
    export_ctranslate2(translator, tmp_path / "ct2")
    assert not killed.exists()
    assert sorted(os.listdir(tmp_path)) == ["ct2"]
    assert "owner" not in os.listdir(tmp_path / "ct2")  # the mark never reaches the export
