"""`python -m keras_transformer_runtime.serve`'s choices before it serves:
the runners, the request limits, and its usage errors
(the server itself: tests/export/test_server.py; its limits:
tests/runtime/serving/test_protocol.py)."""

import pytest

from keras_transformer_runtime import serve


def test_the_model_name_is_the_files():
    assert serve.model_name_of("/models/ende.tflite") == "ende"
    assert serve.model_name_of("/models/ende_ct2/") == "ende_ct2"


@pytest.mark.parametrize(
    "flags, message",
    [
        (["--workers", "0"], "--workers must be positive"),
        (["--max_batch_size", "-1"], "--max_batch_size must be positive"),
        (["--batch_timeout_ms", "-5"], "--batch_timeout_ms must be 0 or more"),
        ([], "`model` must be a .tflite file"),
    ],
)
def test_usage_errors_stop_before_anything_loads(flags, message, capsys):
    with pytest.raises(SystemExit) as stopped:
        serve.main(["--model", "nothing", *flags])
    assert stopped.value.code == 2 and message in capsys.readouterr().err


def test_load_runners_checks_its_arguments():
    with pytest.raises(ValueError, match="`workers` must be a positive integer"):
        serve.load_runners("ende.tflite", workers=0)
