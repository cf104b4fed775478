"""The ONNX export: the whole search converted by tf2onnx, run by ONNX
Runtime with SentencePiece on the host, translating as `Translator`."""

import io
import json
import os
import sys

import pytest

from keras_transformer import Translator
from keras_transformer.export import export_onnx
from keras_transformer_runtime.translate import main as translate_main
from tests.export.agreement import assert_translates_as
from tests.export.random_models import random_model
from tests.export.runtime_process import translate_in_a_process
from tests.training.helpers import letter_reversal_corpus

pytestmark = [pytest.mark.tensorflow_only, pytest.mark.large]  # each converts a traced search

pytest.importorskip("tf2onnx", reason='tf2onnx is an optional extra: pip install -e ".[onnx]"')
pytest.importorskip(
    "onnxruntime", reason='onnxruntime is an optional extra: pip install -e ".[onnx]"'
)

from keras_transformer_runtime import ONNXTranslator  # noqa: E402


@pytest.mark.parametrize("beam_size", [1, 3])
def test_translates_as_the_translator(
    letter_reverser,
    reverser_translator,
    reverser_export,
    tmp_path,
    monkeypatch,
    capsysbinary,
    beam_size,
):
    # One conversion per search: tf2onnx takes 20-40 s for each (beam 3's is
    # the one the runner conformance tests use). A trained model: a random
    # one's near-ties may break either way.
    if beam_size == reverser_translator.settings.beam_size:
        translator, path = reverser_translator, reverser_export("ONNXTranslator")
    else:
        translator = Translator(
            letter_reverser.model, letter_reverser.tokenizer, beam_size=beam_size
        )
        path = export_onnx(translator, tmp_path / "ende.onnx")
    listing = sorted(os.listdir(os.path.dirname(path)))
    assert listing == ["ende.onnx", "ende.onnx.json", "ende.onnx.spm.model"]
    sentences = letter_reversal_corpus(60, seed=21)[0]
    sources = ["", "a", *sentences]
    assert_translates_as(translator, ONNXTranslator, path, sources)
    # Operators in parallel (ONNX Runtime's inter-op threads): the same search.
    parallel = ONNXTranslator(path, num_threads=1, inter_op_threads=2)
    assert parallel.translate(sources) == translator.translate(sources)
    with open(f"{path}.json") as f:
        record = json.load(f)
    assert (record["runtime"], record["beam_size"]) == ("onnx", beam_size)

    # The command line, and a process with ONNX Runtime but no TensorFlow.
    stdin = "".join(s + "\n" for s in sentences[:5])
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(stdin.encode())))
    assert translate_main(["--onnx_model", path]) == 0
    assert capsysbinary.readouterr().out.decode().splitlines() == translator.translate(
        sentences[:5]
    )
    ran = translate_in_a_process("ONNXTranslator", path, sentences[:3])
    assert ran["imported"] == []
    assert ran["translations"] == translator.translate(sentences[:3])


@pytest.mark.parametrize("threads", [dict(inter_op_threads=0), dict(num_threads=1.5)])
def test_bad_thread_counts_are_refused_by_name(tmp_path, threads):
    name = next(iter(threads))
    with pytest.raises(ValueError, match=f"`{name}` must be a positive integer"):
        ONNXTranslator(str(tmp_path / "ende.onnx"), **threads)


def test_bad_arguments_are_refused_before_converting(words_tokenizer, tmp_path):
    tokenizer, _ = words_tokenizer
    translator = Translator(random_model(), tokenizer, beam_size=2)
    with pytest.raises(ValueError, match="`opset` must be a positive integer"):
        export_onnx(translator, tmp_path / "m.onnx", opset=0)
    (tmp_path / "m.onnx").write_bytes(b"an earlier model")
    with pytest.raises(FileExistsError, match="overwrite=True"):
        export_onnx(translator, tmp_path / "m.onnx")
    assert (tmp_path / "m.onnx").read_bytes() == b"an earlier model"
    with open(tmp_path / "m.onnx.json", "w") as f:
        json.dump({"runtime": "litert"}, f)
    with pytest.raises(ValueError, match="exported for the runtime 'litert', not for 'onnx'"):
        ONNXTranslator(tmp_path / "m.onnx")
