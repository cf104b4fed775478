"""Export a trained `Translator` to CTranslate2, and translate with the export.

CTranslate2 (https://github.com/OpenNMT/CTranslate2) is a C++ inference
engine for Transformers, fast on CPUs and able to run in int8. It is an
optional extra: `pip install -e ".[ctranslate2]"`.

`export_ctranslate2(translator, output_dir)` maps the model's trained
weights into a `ctranslate2.specs.TransformerSpec` (post-norm or pre-norm,
our interleaved sinusoid table or learned positions, any tying of the
embeddings, embeddings scaled by √d_model) and writes:

    output_dir/
      model.bin, config.json, *_vocabulary.json   (CTranslate2's files)
      spm.model                                    (the SentencePiece model)
      keras_transformer.json                       (decoding settings)

`CTranslate2Translator(output_dir)` loads it and translates and scores raw
strings as `Translator` does (SentencePiece in Python, no TensorFlow in the
loop); `python -m keras_transformer.translate --ctranslate2_dir DIR` is its
command line.

Differences from `Translator`, by construction of CTranslate2's search:

* CTranslate2 normalizes beam scores by `length ** length_penalty`, not
  GNMT's `((5 + length) / 6) ** alpha`. `CTranslate2Translator` therefore
  asks for the `beam_size` finished hypotheses with their raw
  log-probabilities and ranks them with GNMT's penalty itself; with
  `alpha=0` the search is the same as ours.
* The output-length limit is per call of CTranslate2, not per sentence:
  sources are sorted by length and batched, and a batch gets the limit of
  its longest source (`max_extra_length` beyond it), a little more than a
  shorter sentence's own. Only outputs that run to the limit can differ
  (with `batch_size=1` they do not: a hypothesis the limit stops gets EOS
  and its log-probability, as in our searches).
* `min_length`, `no_repeat_ngram_size` and `repetition_penalty` are passed
  to CTranslate2's own implementations of the same controls.
"""

import dataclasses
import json
import os
import shutil
import tempfile

import keras
import numpy as np

from keras_transformer import _backend
from keras_transformer.export.versions import swap_in
from keras_transformer.translator import TargetScore

SETTINGS_FILE = "keras_transformer.json"
TOKENIZER_FILE = "spm.model"
# `None` keeps float32.
QUANTIZATIONS = (
    None,
    "int8",
    "int8_float32",
    "int8_float16",
    "int8_bfloat16",
    "int16",
    "float16",
    "bfloat16",
    "float32",
)


def _import_ctranslate2():
    try:
        import ctranslate2
    except ImportError:
        raise ImportError(
            "CTranslate2 is not installed; it is an optional extra of keras_transformer: "
            'pip install -e ".[ctranslate2]" (or `pip install ctranslate2`).'
        ) from None
    return ctranslate2


@_backend.tensorflow_only("export.export_ctranslate2", "it converts a Translator")
def export_ctranslate2(translator, output_dir, quantization=None, overwrite=False):
    """Writes `translator`'s model, tokenizer and decoding settings as a
    CTranslate2 model directory.

    The directory is written next to `output_dir` and moved into place
    when complete, so a crash never leaves half a model behind.

    Args:
        translator: a `keras_transformer.Translator` (its `model`, its
            SentencePiece `tokenizer` and its decoding settings are used).
        output_dir: the directory to write; it must not exist, or be
            empty, unless `overwrite`.
        quantization: the weights' type in the export, one of
            `QUANTIZATIONS`: `None` (float32), `"int8"`, `"int8_float32"`,
            `"int8_float16"`, `"int8_bfloat16"`, `"int16"`, `"float16"`,
            `"bfloat16"`, `"float32"`. CTranslate2 can still convert at load
            time (`compute_type`).
        overwrite: replace an existing non-empty `output_dir`.

    Returns:
        `output_dir`.

    Raises:
        ImportError: CTranslate2 is not installed.
        ValueError: a setting CTranslate2 cannot express (the message names
            it), an unknown `quantization`, or a non-empty `output_dir`
            without `overwrite`.

    Example:

    >>> export_ctranslate2(translator, "ende_ct2", quantization="int8")
    >>> CTranslate2Translator("ende_ct2").translate(["A dog runs."])
    ['Ein Hund läuft.']
    """
    if quantization not in QUANTIZATIONS:
        raise ValueError(
            f"`quantization` must be one of {QUANTIZATIONS}. "
            f"Received: quantization={quantization!r}"
        )
    output_dir = os.fspath(output_dir)
    if os.path.isdir(output_dir) and os.listdir(output_dir) and not overwrite:
        raise ValueError(
            f"`output_dir` {output_dir!r} exists and is not empty; pass overwrite=True to "
            "replace it."
        )
    if os.path.exists(output_dir) and not os.path.isdir(output_dir):
        raise ValueError(f"`output_dir` {output_dir!r} is a file, not a directory.")
    _import_ctranslate2()
    spec = transformer_spec(translator.model, translator.tokenizer)
    spec.optimize(quantization=quantization)
    parent = os.path.dirname(os.path.abspath(output_dir))
    os.makedirs(parent, exist_ok=True)
    staging = tempfile.mkdtemp(dir=parent, prefix=f".{os.path.basename(output_dir)}.tmp-")
    try:
        spec.save(staging)
        translator.tokenizer.save(os.path.join(staging, TOKENIZER_FILE))
        settings = {
            **translator.settings(),
            "quantization": quantization or "float32",
            "source_eos": True,
        }
        with open(os.path.join(staging, SETTINGS_FILE), "w", encoding="utf-8") as f:
            json.dump(settings, f, indent=2, sort_keys=True)
            f.write("\n")
        swap_in(staging, output_dir, aside_prefix=f".{os.path.basename(output_dir)}.tmp-old-")
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return output_dir


def transformer_spec(model, tokenizer):
    """The `ctranslate2.specs.TransformerSpec` of a `Transformer` and its
    SentencePiece tokenizer, weights set and vocabularies registered.

    The vocabularies are the tokenizer's pieces; the model's embedding rows
    beyond them (a model vocabulary padded to a round size) are left out,
    which is what `Translator` does by forbidding them.
    """
    from ctranslate2.specs import common_spec
    from ctranslate2.specs import transformer_spec as ct2

    _check_expressible(model)
    spec = ct2.TransformerSpec.from_config(
        (len(model.encoder.stack), len(model.decoder.stack)),
        model.num_heads,
        pre_norm=bool(model.norm_first),
        activation=common_spec.Activation.RELU,  # the only one `Transformer` builds
    )
    vocab = tokenizer.vocab_size
    # The model's own resolution of `tie_embeddings` into matrices.
    for layer_spec, embedding in (
        (spec.encoder.embeddings[0], model.source_embedding),
        (spec.decoder.embeddings, model._target_embedding()),
        (spec.decoder.projection, model._output_projection()),
    ):
        layer_spec.weight = _value(embedding.embeddings)[:vocab]
    spec.decoder.projection.bias = np.zeros(vocab, np.float32)
    source_positions, target_positions = _position_tables(model)
    spec.encoder.position_encodings.encodings = source_positions
    spec.decoder.position_encodings.encodings = target_positions
    for layer_spec, layer in zip(spec.encoder.layer, model.encoder.stack, strict=True):
        _self_attention(layer_spec.self_attention, layer)
        _feed_forward(layer_spec.ffn, layer)
    for layer_spec, layer in zip(spec.decoder.layer, model.decoder.stack, strict=True):
        _self_attention(layer_spec.self_attention, layer)
        _cross_attention(layer_spec.attention, layer)
        _feed_forward(layer_spec.ffn, layer)
    if model.norm_first:
        _norm(spec.encoder.layer_norm, model.encoder.final_norm)
        _norm(spec.decoder.layer_norm, model.decoder.final_norm)

    pieces = _pieces(tokenizer)
    spec.register_source_vocabulary(pieces)
    spec.register_target_vocabulary(pieces)
    config = spec.config
    config.unk_token = pieces[tokenizer.unk_id]
    config.bos_token = config.decoder_start_token = pieces[tokenizer.bos_id]
    config.eos_token = pieces[tokenizer.eos_id]
    config.add_source_eos = True
    config.layer_norm_epsilon = float(model.layer_norm_epsilon)
    spec.validate()
    return spec


def _check_expressible(model):
    """Raises a `ValueError` naming the settings if `model`'s attention
    heads have a shape CTranslate2's `TransformerSpec` cannot express (its
    heads are `d_model / num_heads` wide for queries, keys and values)."""
    d_model, heads = model.d_model, model.num_heads
    head_dim = d_model // heads
    key_dim = model.key_dim or head_dim
    value_dim = model.value_dim or key_dim
    if d_model % heads or key_dim != head_dim or value_dim != head_dim:
        raise ValueError(
            "CTranslate2 needs key_dim == value_dim == d_model / num_heads. Received: "
            f"d_model={d_model}, num_heads={heads}, key_dim={model.key_dim}, "
            f"value_dim={model.value_dim}"
        )


def _value(variable):
    return np.asarray(keras.ops.convert_to_numpy(variable), np.float32)


def _linear(spec, dense):
    """A Keras `Dense` (kernel `(in, out)`) as CTranslate2's `(out, in)`."""
    spec.weight = _value(dense.kernel).T.copy()
    spec.bias = _value(dense.bias)


def _fused(spec, denses):
    """Several `Dense` layers of one input as one CTranslate2 linear."""
    spec.weight = np.concatenate([_value(d.kernel).T for d in denses], axis=0)
    spec.bias = np.concatenate([_value(d.bias) for d in denses], axis=0)


def _norm(spec, norm):
    spec.gamma = _value(norm.gamma)
    spec.beta = _value(norm.beta)


def _self_attention(spec, layer):
    attention = layer.self_attention
    _fused(spec.linear[0], [attention.query_dense, attention.key_dense, attention.value_dense])
    _linear(spec.linear[1], attention.output_dense)
    _norm(spec.layer_norm, layer.self_attention_norm)


def _cross_attention(spec, layer):
    attention = layer.cross_attention
    _linear(spec.linear[0], attention.query_dense)
    _fused(spec.linear[1], [attention.key_dense, attention.value_dense])
    _linear(spec.linear[2], attention.output_dense)
    _norm(spec.layer_norm, layer.cross_attention_norm)


def _feed_forward(spec, layer):
    _linear(spec.linear_0, layer.feed_forward.inner_dense)
    _linear(spec.linear_1, layer.feed_forward.output_dense)
    _norm(spec.layer_norm, layer.feed_forward_norm)


def _position_tables(model):
    """`(source, target)` position tables `(max_length, d_model)`: the
    learned ones, or the sinusoid table our `PositionalEncoding` computes
    (interleaved sines and cosines, not CTranslate2's built-in layout)."""
    if model.position_encoding == "learned":
        return _value(model.source_positions.embeddings), _value(model.target_positions.embeddings)
    # The model's own layer, in float32 whatever the model's dtype policy.
    encoding = type(model.source_positions)(
        max_wavelength=model.source_positions.max_wavelength, dtype="float32"
    )
    zeros = keras.ops.zeros((1, model.max_length, model.d_model), "float32")
    table = _value(encoding(zeros)[0])
    return table, table


def _pieces(tokenizer):
    """The tokenizer's pieces in id order."""
    return [tokenizer.id_to_piece(i) for i in range(tokenizer.vocab_size)]


@dataclasses.dataclass(frozen=True)
class Hypothesis:
    """One output of `CTranslate2Translator.translate_with_scores`.

    Attributes:
        translation: the detokenized text.
        score: `log_prob / ((5 + len(tokens)) / 6) ** alpha`, as
            `Translator` ranks and reports it.
        log_prob: the sum of the tokens' log-probabilities, EOS included.
        tokens: the SentencePiece pieces, ending with EOS's (added and
            scored where the length limit stopped the hypothesis, as
            `Translator` does).
    """

    translation: str
    score: float
    log_prob: float
    tokens: list


class CTranslate2Translator:
    """Translates, samples and scores raw strings with a directory written
    by `export_ctranslate2`, with the settings saved there.

    SentencePiece runs in Python and the model in CTranslate2; TensorFlow
    is not used. Sources are truncated to `max_input_length` pieces (EOS
    included), as `Translator` truncates them.

    Args:
        model_dir: a directory written by `export_ctranslate2`.
        device: `"cpu"` or `"cuda"`.
        compute_type: CTranslate2's compute type, e.g. `"default"` (the
            exported type), `"int8"`, `"float32"`.
        intra_threads: threads per translation (0: CTranslate2's default).
        inter_threads: translations run in parallel.
        **settings: decoding settings that replace the exported ones
            (`beam_size`, `alpha`, `max_extra_length`, `min_length`,
            `no_repeat_ngram_size`, `repetition_penalty`, `temperature`,
            `top_k`, `top_p`, `max_input_length`, `max_output_length`).

    Example:

    >>> translator = CTranslate2Translator("ende_ct2", compute_type="int8")
    >>> translator.translate(["A dog runs."])
    ['Ein Hund läuft.']
    """

    def __init__(
        self,
        model_dir,
        device="cpu",
        compute_type="default",
        intra_threads=0,
        inter_threads=1,
        **settings,
    ):
        ctranslate2 = _import_ctranslate2()
        import sentencepiece

        model_dir = os.fspath(model_dir)
        settings_path = os.path.join(model_dir, SETTINGS_FILE)
        if not os.path.isfile(settings_path):
            raise ValueError(
                f"`model_dir` {model_dir!r} is not an export of `export_ctranslate2`: it has no "
                f"{SETTINGS_FILE}."
            )
        with open(settings_path, encoding="utf-8") as f:
            self.settings = json.load(f)
        unknown = sorted(set(settings) - set(_OVERRIDABLE))
        if unknown:
            raise ValueError(
                f"Unknown decoding settings {unknown}; the settings are {sorted(_OVERRIDABLE)}."
            )
        self.settings.update(settings)
        self.model_dir = model_dir
        self.translator = ctranslate2.Translator(
            model_dir,
            device=device,
            compute_type=compute_type,
            intra_threads=intra_threads,
            inter_threads=inter_threads,
        )
        self.processor = sentencepiece.SentencePieceProcessor(
            model_file=os.path.join(model_dir, TOKENIZER_FILE)
        )
        self._ctranslate2 = ctranslate2
        self._eos_piece = self.processor.id_to_piece(self.processor.eos_id())

    def _source_pieces(self, sentences):
        """Pieces of each source, truncated to leave room for EOS (which
        CTranslate2 appends)."""
        keep = self.settings["max_input_length"] - 1
        return [self.processor.encode(text, out_type=str)[:keep] for text in sentences]

    def _by_length(self, sentences, batch_size, run):
        """`run(pieces)` over batches of at most `batch_size` sources of
        similar length (sorted by length, so that a batch's output-length
        limit, its longest source's, is close to each sentence's own, and
        little is padded); its outputs, one per sentence, in input order."""
        pieces = self._source_pieces(sentences)
        order = sorted(range(len(pieces)), key=lambda i: len(pieces[i]))
        outputs = [None] * len(pieces)
        for start in range(0, len(order), batch_size):
            chunk = order[start : start + batch_size]
            for i, output in zip(chunk, run([pieces[i] for i in chunk]), strict=True):
                outputs[i] = output
        return outputs

    def _decoding_limit(self, pieces):
        """The most tokens CTranslate2 may generate for a batch, EOS not
        counted: our limit (the longest source with EOS, plus
        `max_extra_length`, at most `max_output_length`, EOS included) less
        the EOS that `_finished` adds where the limit stops a hypothesis."""
        longest = max((len(p) for p in pieces), default=0) + 1
        limit = min(longest + self.settings["max_extra_length"], self.settings["max_output_length"])
        return max(limit - 1, 1)

    def _finished(self, pieces, results):
        """Per result, its hypotheses as `(tokens, log_prob)`, each ending
        with EOS: one the length limit stopped gets EOS and EOS's
        log-probability (one scoring call), as our searches force EOS at
        the limit."""
        eos = self._eos_piece
        outputs = [
            [(list(t), float(s)) for t, s in zip(r.hypotheses, r.scores, strict=True)]
            for r in results
        ]
        stopped = [
            (i, j)
            for i, hypotheses in enumerate(outputs)
            for j, (tokens, _) in enumerate(hypotheses)
            if not tokens or tokens[-1] != eos
        ]
        if stopped:
            scored = self.translator.score_batch(
                [pieces[i] for i, _ in stopped],
                [outputs[i][j][0] for i, j in stopped],
                max_input_length=0,
            )
            for (i, j), result in zip(stopped, scored, strict=True):
                outputs[i][j] = (list(result.tokens), float(sum(result.log_probs)))
        return outputs

    def _hypotheses(self, finished):
        """`(tokens, log_prob)` pairs ending with EOS as `Hypothesis`, best
        first by GNMT's length penalty."""
        alpha = self.settings["alpha"]
        hypotheses = [
            Hypothesis(
                translation=self.processor.decode_pieces(tokens[:-1]),
                score=log_prob / ((5.0 + len(tokens)) / 6.0) ** alpha,
                log_prob=log_prob,
                tokens=tokens,
            )
            for tokens, log_prob in finished
        ]
        return sorted(hypotheses, key=lambda h: -h.score)

    def _controls(self):
        return dict(
            min_decoding_length=self.settings["min_length"],
            no_repeat_ngram_size=self.settings["no_repeat_ngram_size"],
            repetition_penalty=self.settings["repetition_penalty"],
        )

    def translate_with_scores(self, sentences, n_best=1, batch_size=64):
        """Beam search (greedy for `beam_size=1`): for each sentence, its
        `n_best` best `Hypothesis` (at most `beam_size`), best first."""
        beam_size = self.settings["beam_size"]
        if not 1 <= n_best <= beam_size:
            raise ValueError(
                f"`n_best` must be between 1 and the beam size ({beam_size}). "
                f"Received: n_best={n_best}"
            )

        def run(pieces):
            results = self.translator.translate_batch(
                pieces,
                beam_size=beam_size,
                num_hypotheses=beam_size,
                length_penalty=0.0,
                return_scores=True,
                return_end_token=True,
                max_input_length=0,
                max_decoding_length=self._decoding_limit(pieces),
                **self._controls(),
            )
            return [self._hypotheses(f)[:n_best] for f in self._finished(pieces, results)]

        return self._by_length(sentences, batch_size, run)

    def translate(self, sentences, batch_size=64):
        """The best translation of each sentence, in order."""
        return [h[0].translation for h in self.translate_with_scores(sentences, 1, batch_size)]

    def sample(self, sentences, num_samples=1, seed=0, batch_size=64):
        """`num_samples` random translations of each sentence
        (`temperature`, `top_k`, `top_p`), from CTranslate2's own random
        generator seeded with `seed`: repeatable, but not the draws of
        `Translator`'s `sample_with_scores`."""
        self._ctranslate2.set_random_seed(seed)

        def run(pieces):
            results = self.translator.translate_batch(
                pieces,
                beam_size=1,
                num_hypotheses=num_samples,
                sampling_topk=self.settings["top_k"],
                sampling_topp=self.settings["top_p"],
                sampling_temperature=self.settings["temperature"],
                return_scores=True,
                return_end_token=True,
                max_input_length=0,
                max_decoding_length=self._decoding_limit(pieces),
                **self._controls(),
            )
            return [self._hypotheses(f) for f in self._finished(pieces, results)]

        return self._by_length(sentences, batch_size, run)

    def score(self, sources, targets, batch_size=64):
        """Scores each target as a translation of its source (forced
        decoding), like `Translator.score`: a list of `TargetScore`."""
        sources, targets = list(sources), list(targets)
        if len(sources) != len(targets):
            raise ValueError(
                "`sources` and `targets` must hold one target per source. Received: "
                f"{len(sources)} sources and {len(targets)} targets"
            )
        keep = self.settings["max_output_length"] - 1
        alpha = self.settings["alpha"]
        scores = []
        for start in range(0, len(sources), batch_size):
            source_pieces = self._source_pieces(sources[start : start + batch_size])
            target_pieces = [
                self.processor.encode(text, out_type=str)[:keep]
                for text in targets[start : start + batch_size]
            ]
            results = self.translator.score_batch(source_pieces, target_pieces, max_input_length=0)
            for result in results:
                log_prob = float(sum(result.log_probs))
                scores.append(
                    TargetScore(
                        log_prob=log_prob,
                        score=log_prob / ((5.0 + len(result.tokens)) / 6.0) ** alpha,
                        tokens=list(result.tokens),
                        token_scores=[float(v) for v in result.log_probs],
                    )
                )
        return scores


_OVERRIDABLE = (
    "alpha",
    "beam_size",
    "max_extra_length",
    "max_input_length",
    "max_output_length",
    "min_length",
    "no_repeat_ngram_size",
    "repetition_penalty",
    "temperature",
    "top_k",
    "top_p",
)
