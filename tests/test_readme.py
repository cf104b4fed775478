"""Every command of README.md runs as written, in order, from a fresh
directory: the example's runs with the tests' tiny model (`TINY_RUN_FLAGS`)
on a `file://` mirror of Multi30k, the runtime's commands as they are,
`kt-serve` in a process of its own while the client line runs. What
cannot run here (installs, downloads, the test suite itself) is listed,
so that a new kind of command fails until it is run or listed."""

import gzip
import io
import os
import shlex
import shutil
import subprocess
import sys
import time

import pytest

from keras_transformer_runtime import translate
from tests.examples.helpers import load_example
from tests.examples.test_wmt_multilingual import CORPUS
from tests.examples.test_wmt_multilingual import LINES
from tests.examples.test_wmt_multilingual import text
from tests.examples.test_wmt_multilingual import write_mirror

pytestmark = [pytest.mark.tensorflow_only, pytest.mark.large]  # trains, exports, serves

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
# Commands that cannot run here: installs, downloads, the test suite.
NOT_RUN = ("python -m venv", "python -m pytest")
NOT_RUN_PROGRAMS = ("pip", "hf", "sudo")
# A tiny run of the example (the README's own directories kept), trained
# long enough that its translations are not empty: the distillation and
# back-translation runs train on them.
TINY = (
    "--preset tiny --num_layers 1 --d_model 32 --num_heads 2 --d_ff 64 --vocab_size 300 "
    "--beam_size 1 --train_steps 150 --steps_per_checkpoint 150 --warmup_steps 20"
).split()


def readme_commands():
    """The README's shell commands, in order: each `bash` block's lines,
    continuation lines joined, comments dropped, `a && b` split."""
    with open(os.path.join(ROOT, "README.md"), encoding="utf-8") as f:
        lines = f.read().splitlines()
    commands, block, pending = [], False, ""
    for line in lines:
        if line.startswith("```"):
            block = line == "```bash"
            continue
        if not block or not line.strip() or line.lstrip().startswith("#"):
            continue
        pending += line.rstrip("\\").rstrip() + " " if line.endswith("\\") else line
        if not line.endswith("\\"):
            commands += [c.strip() for c in pending.split(" && ")]
            pending = ""
    return commands


def words(command):
    """The command's words as the shell reads them, comments dropped."""
    return shlex.split(command, comments=True)


def test_the_readme_lists_the_commands_this_test_knows():
    kinds = {command_kind(c) for c in readme_commands()}
    assert kinds <= {"skip", "example", "kt-translate", "kt-translate-corpus", "kt-serve"}


def command_kind(command):
    program = words(command.split(" | ")[-1])
    name = os.path.basename(program[0])
    if command.startswith(NOT_RUN) or name in NOT_RUN_PROGRAMS:
        return "skip"
    if name == "python" and program[1].startswith("examples/"):
        return "example"
    return name


class Runner:
    """Runs the README's commands in `directory`, one by one."""

    def __init__(self, directory, monkeypatch, capsys):
        self.directory, self.monkeypatch, self.capsys = directory, monkeypatch, capsys
        self.server = None

    def run(self, command):
        kind = command_kind(command)
        if kind == "skip":
            return None
        stdin = b""
        if " | " in command:
            producer, command = command.split(" | ", 1)
            assert words(producer)[0] == "echo", producer
            stdin = (" ".join(words(producer)[1:]) + "\n").encode()
        argv = words(command)
        if kind == "example":
            return self.example(argv[1], argv[2:])
        if kind == "kt-serve":
            return self.serve(argv[1:])
        if kind == "kt-translate-corpus":  # in a process: it filters the process's stderr
            module = "keras_transformer_runtime.translate_corpus"
            done = subprocess.run([sys.executable, "-m", module, *argv[1:]], capture_output=True)
            assert done.returncode == 0, (command, done.stderr[-3000:])
            return done.stderr.decode()
        self.monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(stdin)))
        try:
            code = translate.main(argv[1:])
        except SystemExit as error:
            code = error.code
        out, err = self.capsys.readouterr()
        assert code == 0, (command, err[-3000:])
        return out

    def example(self, script, argv):
        name = os.path.splitext(os.path.basename(script))[0]
        module = load_example(name)
        if name == "wmt_ende":
            argv = [*argv, *TINY, "--data_url", self.mirror]
        if name == "serving_client":
            return self.client(module, argv)
        result = module.main(argv)
        assert result not in (1, 2), (script, argv)  # 0, None or the run's results
        return self.capsys.readouterr().out

    def serve(self, argv):
        command = [sys.executable, "-m", "keras_transformer_runtime.serve", *argv]
        port = argv[argv.index("--port") + 1]
        self.server = subprocess.Popen(command, cwd=self.directory, stderr=subprocess.PIPE)
        deadline = time.time() + 120
        line = b""
        while b"serving " not in line:
            line = self.server.stderr.readline()
            assert line or self.server.poll() is None, "kt-serve stopped"
            assert time.time() < deadline, "kt-serve did not start"
        assert f"http://127.0.0.1:{port}/".encode() in line
        return line.decode()

    def client(self, module, argv):
        for _ in range(50):  # uvicorn listens a moment after the line
            code = module.main(argv)
            out, err = self.capsys.readouterr()
            if "no server answers" not in err:
                break
            time.sleep(0.2)
        assert code == 0, err
        return out

    def close(self):
        if self.server is not None:
            self.server.terminate()
            self.server.wait(timeout=30)
            self.server.stderr.close()


def fresh_clone_files(directory, marian_directory):
    """What the README's commands read in a fresh directory that the
    commands it does not run would have made: the local corpus files of
    "Train", and the downloaded OPUS-MT directory (a tiny Marian model)."""
    for split, count in LINES.items():
        for language in ("en", "de"):
            (directory / f"{split}.{language}").write_bytes(text(split, language, count))
    shutil.copytree(marian_directory, directory / "opus-mt-en-de")


@pytest.fixture
def english_german_marian(tmp_path_factory):
    pytest.importorskip("transformers", reason="the tiny Marian model is written by transformers")
    from tests.pretrained.marian_directory import generated_pairs
    from tests.pretrained.marian_directory import write_marian_directory

    directory = tmp_path_factory.mktemp("opus-mt-en-de")
    sources, targets = generated_pairs(400, seed=0)
    write_marian_directory(directory, sources, targets, train_steps=0)
    return directory


def test_every_readme_command_runs_in_order(tmp_path, monkeypatch, capsys, english_german_marian):
    corpora = load_example("wmt_corpora")
    monkeypatch.setitem(corpora.CORPORA, "multi30k", CORPUS)
    monkeypatch.chdir(tmp_path)
    runner = Runner(tmp_path, monkeypatch, capsys)
    runner.mirror = write_mirror(tmp_path.parent / f"{tmp_path.name}-mirror")
    fresh_clone_files(tmp_path, english_german_marian)
    commands = readme_commands()
    outputs = {}
    try:
        for command in commands:
            outputs[command] = runner.run(command)
    finally:
        runner.close()
    ran = [c for c in commands if outputs[c] is not None]
    skipped = [c for c in commands if outputs[c] is None]
    names = [os.path.basename(words(c)[0]) for c in skipped]
    assert names == ["pip", "python", "python", "pip", "pip", "hf"]
    assert len(ran) >= 15
    # The translations the README promises come out, one line per input.
    translations = [c for c in ran if "kt-translate --model" in c and c.startswith("echo")]
    assert all(len(outputs[c].splitlines()) == 1 for c in translations)
    assert os.path.exists(tmp_path / "exports" / "multi30k_ct2" / "model.bin")
    assert os.path.exists(tmp_path / "out" / "summary.json")
    assert gzip.decompress((tmp_path / "data" / "multi30k" / "train.de.gz").read_bytes())
