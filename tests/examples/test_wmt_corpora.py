"""examples/wmt_corpora.py: a named corpus downloaded from a `file://`
mirror the test writes, checked, written atomically; offline, the local
files are used and a missing one stops with the URL and the directory."""

import gzip
import hashlib
import os
import subprocess
import sys
import urllib.request

import pytest

from tests.examples.helpers import TINY_RUN_FLAGS
from tests.examples.helpers import load_example
from tests.examples.helpers import mirrored_corpus

pytestmark = pytest.mark.tensorflow_only  # the example is TensorFlow's

corpora = load_example("wmt_corpora")
LINES = {"train": 300, "valid": 20, "test": 10}


def text(role, language, count):
    return "".join(f"{language} {role} sentence {i}\n" for i in range(count)).encode()


# The layout of the real corpus, with fewer lines and the digests of these.
CORPUS = mirrored_corpus(LINES, ("en", "de"), text)


def write_mirror(directory, lines=LINES, swap=False):
    """`{split}.{language}.gz` files of line-numbered sentences (with
    `swap`, each language's file holds the other's text)."""
    directory.mkdir(parents=True, exist_ok=True)
    for role, count in lines.items():
        for language, written in (
            (("en", "de"), ("de", "en")) if swap else (("en", "en"), ("de", "de"))
        ):
            name = CORPUS.file_name(role, language)
            (directory / name).write_bytes(gzip.compress(text(role, written, count)))
    return directory.as_uri()


def offline(*args, **kwargs):
    raise AssertionError("the network was touched")


def test_downloads_checks_and_then_never_touches_the_network(tmp_path, monkeypatch, capsys):
    url, data = write_mirror(tmp_path / "mirror"), tmp_path / "data"
    paths = corpora.fetch(CORPUS, str(data), ("en", "de"), url)
    names = ("test_2016_flickr.en.gz", "test_2016_flickr.de.gz")
    assert paths["test"] == tuple(str(data / name) for name in names)
    assert sorted(os.listdir(data)) == sorted(os.listdir(tmp_path / "mirror"))
    for name in os.listdir(data):  # byte for byte
        assert (data / name).read_bytes() == (tmp_path / "mirror" / name).read_bytes()
    assert "downloading val.de.gz:" in capsys.readouterr().err  # the progress line

    monkeypatch.setattr(urllib.request, "urlopen", offline)
    assert corpora.fetch(CORPUS, str(data), ("en", "de"), url) == paths


def test_a_truncated_download_is_never_written_and_a_rerun_completes(tmp_path):
    mirror = tmp_path / "mirror"
    url, data = write_mirror(mirror), tmp_path / "data"
    whole = (mirror / "val.en.gz").read_bytes()
    (mirror / "val.en.gz").write_bytes(whole[: len(whole) // 2])
    with pytest.raises(corpora.CorpusError, match="val.en.gz is not a complete gzip file"):
        corpora.fetch(CORPUS, str(data), ("en", "de"), url)
    # The files before it are complete and kept; nothing else is left.
    assert sorted(os.listdir(data)) == ["train.de.gz", "train.en.gz"]

    (mirror / "val.en.gz").write_bytes(whole)
    corpora.fetch(CORPUS, str(data), ("en", "de"), url)
    assert len(os.listdir(data)) == 6


def test_a_wrong_line_count_names_the_file_and_both_counts(tmp_path):
    url = write_mirror(tmp_path / "mirror", {**LINES, "test": 9})
    data = tmp_path / "data"
    with pytest.raises(corpora.CorpusError, match=r"test_2016_flickr.en.gz has 9 lines; .* has 10"):
        corpora.fetch(CORPUS, str(data), ("en", "de"), url)
    assert not any(name.startswith("test") for name in os.listdir(data))

    # A local file with the wrong count: no network, and the way out.
    bad = write_mirror(tmp_path / "local", {**LINES, "valid": 19})
    with pytest.raises(corpora.CorpusError, match="has 19 lines.*delete it to download it again"):
        corpora.fetch(CORPUS, str(tmp_path / "local"), ("en", "de"), bad)


def test_a_file_of_the_right_length_but_the_wrong_text_is_refused(tmp_path):
    """`train.de.gz` holding the English side has the right line count;
    its digest names it, unless the user accepts a mirror's files."""
    url, data = write_mirror(tmp_path / "mirror", swap=True), tmp_path / "data"
    with pytest.raises(corpora.CorpusError) as refused:
        corpora.fetch(CORPUS, str(data), ("en", "de"), url)
    expected = CORPUS.digests["train.en.gz"]
    found = hashlib.sha256(text("train", "de", 300)).hexdigest()
    assert "train.en.gz is not multi30k's train.en.gz" in str(refused.value)
    assert expected in str(refused.value) and found in str(refused.value)
    assert "--no-data_digests" in str(refused.value)
    assert not data.exists() or os.listdir(data) == []  # nothing written

    paths = corpora.fetch(CORPUS, str(data), ("en", "de"), url, check_digests=False)
    assert len(os.listdir(data)) == 6 and os.path.exists(paths["train"][0])
    # A local file with the wrong text: refused on the next run, with the way out.
    with pytest.raises(corpora.CorpusError, match="delete it to download it again"):
        corpora.fetch(CORPUS, str(data), ("en", "de"), url)


def test_part_files_of_killed_downloads_are_removed(tmp_path):
    url, data = write_mirror(tmp_path / "mirror"), tmp_path / "data"
    data.mkdir()
    ended = subprocess.Popen(["true"])
    ended.wait()
    stale = data / f"train.en.gz.part-{ended.pid}"
    stale.write_bytes(b"half")
    running = data / f"val.de.gz.part-{os.getppid()}"  # a running process's: left alone
    running.write_bytes(b"in progress")
    corpora.fetch(CORPUS, str(data), ("en", "de"), url)
    assert not stale.exists() and running.exists()


SIGTERM_DURING_DOWNLOAD = """
import os, signal, sys, urllib.request
sys.path.insert(0, {examples!r})
import wmt_corpora

class Slow:
    headers = {{"Content-Length": "1000000"}}
    def __enter__(self): return self
    def __exit__(self, *exc): return False
    def read(self, size):
        os.kill(os.getpid(), signal.SIGTERM)  # as `kill PID` or a scheduler would
        return b"x" * size

urllib.request.urlopen = lambda url, timeout: Slow()
try:
    wmt_corpora._download("https://example.org/train.en.gz", {path!r}, 5)
except wmt_corpora.Terminated as error:
    print("terminated:", error)
print("handler restored:", signal.getsignal(signal.SIGTERM) is signal.SIG_DFL)
"""


def test_sigterm_during_a_download_leaves_no_part_file(tmp_path):
    from tests.examples.helpers import EXAMPLES

    path = str(tmp_path / "train.en.gz")
    code = SIGTERM_DURING_DOWNLOAD.format(examples=EXAMPLES, path=path)
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert "terminated: stopped by SIGTERM" in done.stdout
    assert "handler restored: True" in done.stdout
    assert os.listdir(tmp_path) == []


def test_offline_and_absent_stops_at_once_naming_the_url_and_the_directory(tmp_path):
    data = tmp_path / "data"
    missing = (tmp_path / "nowhere").as_uri()
    with pytest.raises(corpora.CorpusError) as stopped:
        corpora.fetch(CORPUS, str(data), ("en", "de"), missing)
    assert f"cannot download {missing}/train.en.gz" in str(stopped.value)
    assert f"into {data}/" in str(stopped.value) and CORPUS.url in str(stopped.value)
    assert not data.exists()  # nothing created


def test_a_language_the_corpus_lacks_is_refused():
    with pytest.raises(ValueError, match="languages: multi30k has en, de, fr, cs, not 'ja'"):
        corpora.fetch(CORPUS, "data", ("en", "ja"))


def test_the_data_preset_bundles_the_recipe_and_every_flag_overrides_it():
    config_module = load_example("wmt_config")
    config = config_module.parse_config(["--data", "multi30k"])
    assert (config.preset, config.model, config.vocab_size) == ("small", "small", 4000)
    assert config.budget_minutes == 30
    assert config.model_dir == os.path.join("runs", "multi30k")
    assert config.export_dir == os.path.join("exports", "multi30k")
    files = (config.train_src, config.valid_tgt, config.test_ref)
    expected = ("train.en.gz", "val.de.gz", "test_2016_flickr.de.gz")
    assert files == tuple(os.path.join("data", "multi30k", name) for name in expected)

    flags = "--data multi30k --preset tiny --budget_minutes 9 --data_dir d --test_ref r.de"
    config = config_module.parse_config(flags.split() + ["--target_langs", "fr"])
    assert (config.preset, config.model, config.budget_minutes) == ("tiny", "tiny", 9)
    assert (config.train_tgt, config.test_ref) == (os.path.join("d", "train.fr.gz"), "r.de")
    assert config.to_json()["data"] == "multi30k (d)"


def test_the_example_offline_without_the_files_stops_before_creating_anything(
    tmp_path, monkeypatch, capsys
):
    monkeypatch.chdir(tmp_path)
    script = load_example("wmt_ende")
    with pytest.raises(SystemExit) as stopped:
        script.main(["--data", "multi30k", "--data_url", (tmp_path / "nowhere").as_uri()])
    message = str(stopped.value)
    assert "cannot download" in message and os.path.join("data", "multi30k") + "/" in message
    assert os.listdir(tmp_path) == []  # no data/, runs/ or exports/


@pytest.mark.large  # trains and evaluates: a whole run
def test_the_example_runs_on_the_downloaded_corpus(tmp_path, monkeypatch):
    monkeypatch.setitem(corpora.CORPORA, "multi30k", CORPUS)
    monkeypatch.chdir(tmp_path)
    url = write_mirror(tmp_path / "mirror")
    results = load_example("wmt_ende").main(
        ["--data", "multi30k", "--data_url", url, *TINY_RUN_FLAGS]
    )
    assert (results["valid"]["sentences"], results["test"]["sentences"]) == (20, 10)
    assert len(os.listdir(tmp_path / "data" / "multi30k")) == 6
    assert (tmp_path / "runs" / "multi30k" / "summary.json").exists()
