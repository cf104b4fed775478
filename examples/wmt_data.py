"""The data of a `wmt_ende.py` run: the training pairs, and the valid and
test sets as lists, from TFDS (downloaded when not prepared and the
network is there), from a named corpus (`--data`, downloaded into
`--data_dir` when missing) or from local files."""

import dataclasses
import os
import socket
import sys
import time

import wmt_corpora

from keras_transformer import training
from keras_transformer_runtime.text import files as text_files

TFDS_HOST = ("storage.googleapis.com", 443)


@dataclasses.dataclass
class Data:
    """The training pairs, and the valid and test sets as `(sources,
    references)` lists (`valid` may be `None`). A multilingual run's sets
    hold every direction, one after the other, and `target_lang` names
    each row's language per set (`{"valid": [...], "test": [...]}`);
    `mixing_weights` are the training corpora's, and `described` says
    what the training pairs are where they are more than one corpus's
    (for the summary)."""

    train: object
    valid: tuple | None
    test: tuple
    target_lang: dict = dataclasses.field(default_factory=dict)
    mixing_weights: dict | None = None
    described: str | None = None

    def languages_of(self, name):
        """Set `name`'s language per row (`None` for one language)."""
        return self.target_lang.get(name)


def _decode(line, where):
    """A line of bytes as text; invalid UTF-8 is replaced and reported."""
    try:
        return line.decode("utf-8")
    except UnicodeDecodeError:
        print(f"warning: {where}: invalid UTF-8 replaced", file=sys.stderr)
        return line.decode("utf-8", errors="replace")


def _as_lists(pairs, limit, names):
    """The first `limit` pairs as `(sources, references)` lists; `names`
    name the two sides in warnings (file names, or the TFDS split)."""
    sources, references = [], []
    for number, (source, reference) in enumerate(pairs.take(limit or -1).as_numpy_iterator(), 1):
        sources.append(_decode(source, f"{names[0]}:{number}"))
        references.append(_decode(reference, f"{names[1]}:{number}"))
    return sources, references


def _tfds_pairs(config, split):
    """TFDS pairs; downloads when the data is not prepared and the network
    is there, else stops with the local-files advice."""
    keys = (config.source_lang, config.target_codes[0])
    load = lambda download: training.text_pairs_from_tfds(  # noqa: E731
        config.tfds_name, split, *keys, data_dir=config.tfds_data_dir, download=download
    )
    try:
        return load(download=False)
    except FileNotFoundError:
        try:
            socket.create_connection(TFDS_HOST, timeout=5).close()
        except OSError:
            sys.exit(
                f"TFDS data set {config.tfds_name} is not prepared and the network is "
                "unreachable.\nPass local parallel files instead: --train_src --train_tgt "
                "[--valid_src --valid_tgt] --test_src --test_ref (plain or .gz, one "
                "sentence a line), or --data multi30k for a 30,000-pair corpus that is "
                "downloaded once."
            )
        return load(download=True)


def _fetch_corpus(config):
    """Downloads what `--data`'s corpus lacks in `--data_dir`, checked; a
    failed download stops the command with the URL and the directory."""
    corpus = wmt_corpora.CORPORA[config.data]
    print(f"data: {config.data} in {config.data_dir} ({corpus.note})")
    languages = (config.source_lang, *config.target_codes)
    try:
        wmt_corpora.fetch(
            corpus, config.data_dir, languages, config.data_url, check_digests=config.data_digests
        )
    except wmt_corpora.CorpusError as error:
        sys.exit(f"data: {error}")


def _multilingual_data(config):
    """Every direction of `--data`'s corpus from `--source_lang` into
    `--target_langs`: the training corpora mixed by
    temperature sampling, the valid and test sets one after the other."""
    corpus = wmt_corpora.CORPORA[config.data]

    def files(role, code):
        names = (config.source_lang, code)
        return [os.path.join(config.data_dir, corpus.file_name(role, n)) for n in names]

    corpora, sizes = {}, {}
    sets = {"valid": ([], []), "test": ([], [])}
    target_lang = {"valid": [], "test": []}
    for code in config.target_codes:
        corpora[code] = training.text_pairs_from_files(*files("train", code))
        sizes[code] = text_files.count_lines(files("train", code)[1])
        for name, role in (("valid", "valid"), ("test", "test")):
            found = _as_lists(
                training.text_pairs_from_files(*files(role, code)),
                config.max_eval_sentences,
                files(role, code),
            )
            for rows, more in zip(sets[name], found, strict=True):
                rows.extend(more)
            target_lang[name] += [code] * len(found[0])
    mixed = training.mix_corpora(corpora, sizes, config.temperature)
    weights = ", ".join(f"{code} {p:.3f}" for code, p in mixed.weights.items())
    described = f"{sum(sizes.values()):,} pairs in {len(sizes)} directions, drawn {weights}"
    print(f"data: {described}")
    return Data(
        described=described,
        train=mixed.pairs,
        valid=sets["valid"],
        test=sets["test"],
        target_lang=target_lang,
        mixing_weights=mixed.weights,
    )


def data_stage(config):
    limit = config.max_eval_sentences
    if config.data:
        _fetch_corpus(config)
    if config.multilingual:
        return _multilingual_data(config)
    if config.uses_tfds:
        return Data(
            train=_tfds_pairs(config, "train"),
            valid=_as_lists(_tfds_pairs(config, "validation"), limit, ("validation",) * 2),
            test=_as_lists(_tfds_pairs(config, "test"), limit, ("test",) * 2),
        )
    valid = None
    if config.valid_src and config.valid_tgt:
        files = (config.valid_src, config.valid_tgt)
        valid = _as_lists(training.text_pairs_from_files(*files), limit, files)
    return Data(
        train=training.text_pairs_from_files(config.train_src, config.train_tgt),
        valid=valid,
        test=_as_lists(
            training.text_pairs_from_files(config.test_src, config.test_ref),
            limit,
            (config.test_src, config.test_ref),
        ),
    )


def word_links(config, pairs):
    """eflomal's word links of the training `pairs` (`training.align_words`),
    kept in `model_dir/word_links.txt` for a rerun."""
    path = os.path.join(config.model_dir, "word_links.txt")
    if os.path.exists(path):
        with open(path, encoding="utf-8") as f:
            return f.read().splitlines()
    sources, targets = [], []
    for source, target in pairs.as_numpy_iterator():
        sources.append(source.decode("utf-8"))
        targets.append(target.decode("utf-8"))
    started = time.perf_counter()
    links = training.align_words(sources, targets)
    os.makedirs(config.model_dir, exist_ok=True)
    with open(path + ".tmp", "w", encoding="utf-8") as f:
        f.write("".join(line + "\n" for line in links))
    os.replace(path + ".tmp", path)
    count = sum(len(line.split()) for line in links)
    print(
        f"word links: {count:,} eflomal links over {len(links):,} pairs in "
        f"{time.perf_counter() - started:.0f} s -> {path}"
    )
    return links
