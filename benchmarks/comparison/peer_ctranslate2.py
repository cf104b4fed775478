"""The workers for CTranslate2: a random-weight model of the same shape,
built through `ctranslate2.specs` (`worker_decode`) or converted from our
own random-weight `Transformer` by `export.ctranslate2.transformer_spec`,
the conversion users run on their trained models (`worker_converted`), in
float32 or int8; and CTranslate2 at its best on a trained model's export
(`translate_at_best`).

At its best means as CTranslate2's own users run it: the whole input in
one `translate_batch` call, which sorts it by length and splits it into
batches of `max_batch_size` examples or tokens (`BATCHINGS`), run in
parallel by `inter_threads` translators of `intra_threads` threads each
(`thread_grid`: every pair whose product the cores allow). Each pair runs
in a process of its own; every batching is timed in it.
"""

import os
import tempfile
import time

from comparison.measure import time_calls
from comparison.workload import decode_sources

POSITIONS = 256  # positions in the table: more than any workload decodes
# CTranslate2's batching of one call: (batch_type, max_batch_size).
BATCHINGS = (
    ("examples", 16),
    ("examples", 32),
    ("examples", 64),
    ("tokens", 1024),
    ("tokens", 2048),
)


def thread_grid():
    """`(inter_threads, intra_threads)` pairs of `thread_counts()` (1, a
    power of two or all cores) whose product is at most the cores: on 2
    cores, (1, 1), (1, 2) and (2, 1)."""
    from script_workers import thread_counts

    counts = thread_counts()
    return [(inter, intra) for inter in counts for intra in counts if inter * intra <= counts[-1]]


def setting_name(inter, intra, batching=None):
    """How a table prints a setting, e.g. `inter 2 x intra 1, 64 examples`."""
    name = f"inter {inter} x intra {intra}"
    return name if batching is None else f"{name}, {batching[1]} {batching[0]}"


def translate_at_best(
    model_dir, compute_type, inter, intra, sources, beam_size, alpha, single, batchings=BATCHINGS
):
    """CTranslate2 on the export at `model_dir` (of `export_ctranslate2`:
    its SentencePiece model beside it) with these threads, as its users run
    it: each of `BATCHINGS` translates all of `sources` in one call (text to
    text, tokenization included; the faster of two passes after a warm-up),
    and the first `single` sources one call each (the latency of a request
    alone; none with `single=0`). Returns `{"by_batching": {name:
    sentences/s}, "batch": the fastest, "batching": its name, "outputs": its
    translations, "single": sentences/s one at a time}`."""
    import json

    import ctranslate2

    from keras_transformer_runtime.runners.ctranslate2 import SETTINGS_FILE
    from keras_transformer_runtime.runners.ctranslate2 import tokenizer_kind
    from keras_transformer_runtime.text.tokenizers import host_tokenizer

    with open(os.path.join(model_dir, SETTINGS_FILE), encoding="utf-8") as f:
        recorded = json.load(f)
    pieces = host_tokenizer(tokenizer_kind(model_dir, recorded), model_dir)
    translator = ctranslate2.Translator(
        model_dir, compute_type=compute_type, inter_threads=inter, intra_threads=intra
    )

    def translate(texts, batching=("examples", 64)):
        results = translator.translate_batch(
            [pieces.source(text) for text in texts],
            beam_size=beam_size,
            length_penalty=alpha,
            batch_type=batching[0],
            max_batch_size=batching[1],
        )
        return [pieces.text(result.hypotheses[0]) for result in results]

    def speed(texts, run):
        run(texts[:8])
        best = 0.0
        for _ in range(2):
            start = time.perf_counter()
            outputs = run(texts)
            best = max(best, len(texts) / (time.perf_counter() - start))
        return best, outputs

    by_batching, fastest = {}, None
    for batching in batchings:
        rate, outputs = speed(sources, lambda texts, b=batching: translate(texts, b))
        by_batching[f"{batching[1]} {batching[0]}"] = rate
        if fastest is None or rate > fastest[0]:
            fastest = (rate, f"{batching[1]} {batching[0]}", outputs)
    single_rate = 0.0
    if single:
        single_rate, _ = speed(
            sources[:single], lambda texts: [translate([text])[0] for text in texts]
        )
    return {
        "by_batching": by_batching,
        "batch": fastest[0],
        "batching": fastest[1],
        "outputs": fastest[2],
        "single": single_rate,
    }


def _sinusoids(length, depth):
    """The paper's position table `(length, depth)`, sines and cosines
    interleaved (as ours)."""
    import numpy as np

    angles = np.arange(length)[:, None] / 10000.0 ** (2 * (np.arange(depth) // 2) / depth)
    return np.where(np.arange(depth) % 2 == 0, np.sin(angles), np.cos(angles)).astype(np.float32)


def _model(cfg, ids, directory):
    """A random-weight CTranslate2 model of the same shape."""
    import numpy as np
    from ctranslate2.specs import transformer_spec

    rng = np.random.default_rng(0)
    d, f, v = cfg["d_model"], cfg["d_ff"], cfg["vocab"]
    spec = transformer_spec.TransformerSpec.from_config(
        (cfg["layers"], cfg["layers"]), cfg["heads"], pre_norm=False
    )

    def dense(rows, cols):
        return rng.uniform(
            -((6 / (rows + cols)) ** 0.5), (6 / (rows + cols)) ** 0.5, (rows, cols)
        ).astype(np.float32)

    def linear(spec_linear, rows, cols):
        spec_linear.weight = dense(rows, cols)
        spec_linear.bias = np.zeros(rows, np.float32)

    def norm(spec_norm):
        spec_norm.gamma = np.ones(d, np.float32)
        spec_norm.beta = np.zeros(d, np.float32)

    embedding = rng.normal(0, d**-0.5, (v, d)).astype(np.float32)
    # A table, as every converted model carries one (ours, Marian's):
    # without one CTranslate2 makes its own sinusoids at every step, which
    # cost it 3 to 4 ms a step on these models.
    positions = _sinusoids(POSITIONS, d)
    spec.encoder.position_encodings.encodings = positions
    spec.decoder.position_encodings.encodings = positions
    spec.encoder.embeddings[0].weight = embedding
    spec.decoder.embeddings.weight = embedding
    spec.decoder.projection.weight = embedding
    spec.decoder.projection.bias = np.zeros(v, np.float32)
    for layer in spec.encoder.layer:
        norm(layer.self_attention.layer_norm)
        linear(layer.self_attention.linear[0], 3 * d, d)
        linear(layer.self_attention.linear[1], d, d)
        norm(layer.ffn.layer_norm)
        linear(layer.ffn.linear_0, f, d)
        linear(layer.ffn.linear_1, d, f)
    for layer in spec.decoder.layer:
        norm(layer.self_attention.layer_norm)
        linear(layer.self_attention.linear[0], 3 * d, d)
        linear(layer.self_attention.linear[1], d, d)
        norm(layer.attention.layer_norm)
        linear(layer.attention.linear[0], d, d)
        linear(layer.attention.linear[1], 2 * d, d)
        linear(layer.attention.linear[2], d, d)
        norm(layer.ffn.layer_norm)
        linear(layer.ffn.linear_0, f, d)
        linear(layer.ffn.linear_1, d, f)
    # CTranslate2's names for the special tokens, at our ids.
    tokens = [f"t{i}" for i in range(v)]
    for name, token in (("pad", "<blank>"), ("unk", "<unk>"), ("bos", "<s>"), ("eos", "</s>")):
        tokens[ids[name]] = token
    spec.register_source_vocabulary(tokens)
    spec.register_target_vocabulary(tokens)
    spec.validate()
    spec.save(directory)
    return tokens


class _Vocabulary:
    """What the conversion reads of a tokenizer: pieces `t<i>`, CTranslate2's
    names for the special tokens at our ids."""

    def __init__(self, size, ids):
        self.vocab_size = size
        self.unk_id, self.bos_id, self.eos_id = ids["unk"], ids["bos"], ids["eos"]
        self.pieces = [f"t{i}" for i in range(size)]
        for name, token in (("pad", "<blank>"), ("unk", "<unk>"), ("bos", "<s>"), ("eos", "</s>")):
            self.pieces[ids[name]] = token

    def id_to_piece(self, token_id):
        return self.pieces[token_id]


def _converted_model(cfg, ids, directory):
    """Our random-weight `Transformer` of the same shape (the one our
    decoding rows time), converted."""
    from keras_transformer.export.ctranslate2 import transformer_spec

    from comparison.ours import build_model

    vocabulary = _Vocabulary(cfg["vocab"], ids)
    transformer_spec(build_model(cfg, "fp32", dropout=0.0), vocabulary).save(directory)
    return vocabulary.pieces


def worker_converted(spec):
    """`worker_decode` with the model converted from ours (the worker's
    peak memory includes TensorFlow, which the conversion imports)."""
    return worker_decode(spec, build=_converted_model)


def worker_decode(spec, build=_model):
    """Greedy or beam decoding of `spec["decode"]` (a `DECODE_SHAPES`
    entry), exactly its `steps` tokens each, float32 or int8, in one
    `translate_batch` call with `spec`'s `inter` and `threads` (intra) and
    `max_batch_size`."""
    import ctranslate2

    cfg = spec["cfg"]
    shape = spec["decode"]
    with tempfile.TemporaryDirectory() as directory:
        tokens = build(cfg, spec["ids"], directory)
        translator = ctranslate2.Translator(
            directory,
            device="cpu",
            compute_type={"fp32": "float32", "int8": "int8"}[spec["precision"]],
            inter_threads=spec.get("inter", 1),
            intra_threads=spec.get("threads", os.cpu_count()),
        )
        sources = decode_sources(cfg, spec["ids"], (shape["batch"], shape["source_len"]))
        batch = [[tokens[i] for i in row] for row in sources]
        results = []

        def step():
            results[:] = translator.translate_batch(
                batch,
                beam_size=shape["beam"],
                max_batch_size=spec.get("max_batch_size", shape["batch"]),
                min_decoding_length=shape["steps"],
                max_decoding_length=shape["steps"],
            )

        times = time_calls(step, spec["warmup"], spec["steps"])
    lengths = [len(r.hypotheses[0]) for r in results]
    return {"times": times, "tokens": sum(lengths), "lengths": sorted(set(lengths))}
