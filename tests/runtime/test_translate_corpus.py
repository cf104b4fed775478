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


def test_sampling_settings_reach_the_runners_loading(tmp_path, monkeypatch, capsys):
    pytest.importorskip("apache_beam", reason="the command runs on Apache Beam")
    from keras_transformer_runtime import logs
    from keras_transformer_runtime.corpus import pipeline

    asked = {}
    monkeypatch.setattr(logs, "filter_native_logs", lambda argv: None)  # this process's stderr
    monkeypatch.setattr(
        pipeline, "translate_corpus", lambda *args, **options: asked.update(options) or {}
    )
    (tmp_path / "in.txt").write_text("A dog.\n")
    command = ["--model", "ende_ct2", "--kind", "ctranslate2", "--input", str(tmp_path / "in.txt")]
    command += ["--output", str(tmp_path / "out"), "--top_k", "20", "--temperature", "0.7"]
    with pytest.raises(SystemExit):
        translate_corpus.main(command)
    assert "go with --mode sample" in capsys.readouterr().err and not asked
    assert translate_corpus.main([*command, "--mode", "sample"]) == 0
    assert asked["top_k"] == 20 and asked["temperature"] == 0.7 and "top_p" not in asked
    assert asked["kind"] == "ctranslate2" and asked["compute_type"] == "default"
