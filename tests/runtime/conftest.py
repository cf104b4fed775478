"""Fixtures of the runtime's tests."""

import io
import sys

import pytest

import keras_transformer_runtime.translate as translate_cli


@pytest.fixture
def cli(monkeypatch, capsysbinary):
    """Runs the command line in this process: `run(*args, stdin=...)` ->
    `(exit code, stdout bytes, stderr text)`."""

    def run(*args, stdin=b""):
        stdin = stdin.encode() if isinstance(stdin, str) else stdin
        monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(stdin)))
        try:
            code = translate_cli.main(list(args))
        except SystemExit as error:
            code = error.code
        captured = capsysbinary.readouterr()
        return code, captured.out, captured.err.decode("utf-8", "replace")

    return run
