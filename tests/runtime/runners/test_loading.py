"""Which runner an export needs, and the checks made before loading one
(`keras_transformer_runtime.runners.loading`; the runners themselves load in
tests/export)."""

import pytest

from keras_transformer_runtime.runners import loading


def test_the_runner_is_chosen_by_the_export(tmp_path):
    ct2 = tmp_path / "ende_ct2"
    ct2.mkdir()
    (ct2 / "model.bin").write_bytes(b"")
    saved = tmp_path / "exports"
    saved.mkdir()
    assert loading.runner_kind(tmp_path / "ende.tflite") == "litert"
    assert loading.runner_kind("ende.onnx") == "onnx"
    assert loading.runner_kind(ct2) == "ctranslate2"
    assert loading.runner_kind(saved) == "saved_model"
    with pytest.raises(ValueError, match=r"`model` must be a \.tflite file.*model='nothing'"):
        loading.runner_kind("nothing")


@pytest.mark.parametrize("threads", [0, -1, 1.5])
def test_threads_must_be_a_positive_integer(threads):
    with pytest.raises(ValueError, match="`threads` must be a positive integer"):
        loading.load_runner("ende.tflite", threads=threads)
