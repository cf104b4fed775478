"""The corpus command line (`python -m keras_transformer_runtime.translate_corpus`):
its usage errors, before anything is loaded or run (its runs:
tests/export/test_translate_corpus.py)."""

import pytest

from keras_transformer_runtime import translate_corpus


@pytest.mark.parametrize(
    "flags, message",
    [
        (["--shard_lines", "0"], "--shard_lines must be positive"),
        (["--workers", "-1"], "--workers must be positive"),
        (["--batch_size", "0"], "--batch_size must be positive"),
        (["--seed", "-2"], "`seed` must be an integer, 0 or more"),
        (["--mode", "greedy"], "invalid choice: 'greedy'"),
    ],
)
def test_usage_errors_name_the_flag(flags, message, tmp_path, capsys):
    (tmp_path / "in.txt").write_text("A dog.\n")
    command = ["--export_dir", "ende.tflite", "--input", str(tmp_path / "in.txt")]
    with pytest.raises(SystemExit) as stopped:
        translate_corpus.main([*command, "--output", str(tmp_path / "out"), *flags])
    assert stopped.value.code == 2 and message in capsys.readouterr().err


def test_an_unknown_export_or_an_input_that_matches_nothing_is_a_usage_error(tmp_path, capsys):
    with pytest.raises(SystemExit):
        translate_corpus.main(["--export_dir", "nothing", "--input", "x", "--output", "o"])
    assert "`model` must be a .tflite file" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        translate_corpus.main(
            ["--export_dir", "ende.tflite", "--input", str(tmp_path / "no*"), "--output", "o"]
        )
    assert "matches no file" in capsys.readouterr().err
