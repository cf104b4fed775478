"""Translate, sample and score with a CTranslate2 export, without
TensorFlow or Keras.

`keras_transformer.export.export_ctranslate2(translator, directory)`
writes the directory:

    directory/
      model.bin, config.json, *_vocabulary.json   (CTranslate2's files)
      spm.model                                    (the SentencePiece model)
        or source.spm, target.spm, vocab.json      (a Marian model's tokenizer)
      keras_transformer.json                       (decoding settings)

and `CTranslate2Translator(directory)` runs it: SentencePiece in Python,
the model in CTranslate2 (https://github.com/OpenNMT/CTranslate2), so that
a CPU inference server needs only `ctranslate2` and `sentencepiece`
(`pip install ctranslate2 sentencepiece`). It decodes as `Translator` does,
with these differences, by construction of CTranslate2's search:

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
  to CTranslate2's own implementations of the same controls. A hypothesis
  the length limit stops is re-scored by the model alone (CTranslate2's
  `score_batch`), without the last two: with them, its score differs
  from `Translator`'s, and a `RuntimeWarning` says so.
* No search chooses PAD or BOS, as in our searches. CTranslate2 would
  score among the other pieces when told to suppress them, so only a
  source whose hypotheses hold one is searched again so, and re-scored by
  the model: every score is the model's log-probability.
* CTranslate2 does not decode an empty source: its translation is empty
  (EOS, scored by the model), as each of the `n_best`, where `Translator`
  decodes from EOS alone.
* The hypotheses after the best of an n-best list may differ from
  `Translator`'s: the two beam searches collect finished hypotheses
  differently (CTranslate2 may keep one that ended at once, an empty
  translation). The best, and every score, agree.
* Sampling draws from CTranslate2's own random generator: repeatable with
  a seed, but not the draws of `Translator`.
* Terminology constraints and banned phrases (`Translator.translate(...,
  constraints=, banned=)`, the SavedModel's `translate_with_constraints`)
  are not supported: CTranslate2's search has neither.
"""

import dataclasses
import json
import os

from keras_transformer_runtime.batching import in_length_order
from keras_transformer_runtime.runners import runner
from keras_transformer_runtime.runners.ctranslate2_attention import SearchAttention
from keras_transformer_runtime.runners.ctranslate2_outputs import SearchOutputs
from keras_transformer_runtime.runners.ctranslate2_outputs import aligned
from keras_transformer_runtime.runners.ctranslate2_outputs import controls
from keras_transformer_runtime.runners.ctranslate2_outputs import decoding_limit
from keras_transformer_runtime.runners.results import TargetScore
from keras_transformer_runtime.runners.results import length_penalty
from keras_transformer_runtime.runners.settings import DecodingSettings
from keras_transformer_runtime.text.tokenizers import ASSETS
from keras_transformer_runtime.text.tokenizers import host_tokenizer

SETTINGS_FILE = "keras_transformer.json"
# The largest seed of `CTranslate2Translator.sample` (CTranslate2's generator takes 32 bits).
MAX_SEED = 2**32 - 1


def import_ctranslate2():
    """The `ctranslate2` module, or an `ImportError` that says how to get it."""
    try:
        import ctranslate2
    except ImportError:
        raise ImportError(
            "CTranslate2 is not installed; it is an optional extra of the runtime: "
            "pip install 'keras-transformer-runtime[ctranslate2]' (or `pip install ctranslate2`)."
        ) from None
    return ctranslate2


def tokenizer_kind(model_dir, recorded):
    """The kind of tokenizer an export directory holds: as recorded, or,
    in exports written before the kind was recorded, as its files say (a
    Marian tokenizer's `source.spm`)."""
    if "tokenizer" in recorded:
        return recorded["tokenizer"]
    marian = os.path.isfile(os.path.join(model_dir, ASSETS["marian"]["source"]))
    return "marian" if marian else "sentencepiece"


class CTranslate2Translator(runner.Runner):
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
        inter_threads: translations run in parallel: calls from that many
            threads at once (one server worker each) run side by side, and
            one call's batches run that many at once.
        **settings: `DecodingSettings` that replace the exported ones
            (`beam_size`, `alpha`, ...).

    Attributes:
        settings: the `DecodingSettings` in use.
        quantization: the weights' type in the export, e.g. `"int8"`.

    Example:

    >>> translator = CTranslate2Translator("ende_ct2", compute_type="int8")
    >>> translator.translate(["A dog runs."])
    ['Ein Hund läuft.']
    """

    methods = frozenset(
        {
            runner.TRANSLATE,
            runner.TRANSLATE_WITH_SCORES,
            runner.SAMPLE,
            runner.SCORE,
            runner.TRANSLATE_WITH_ALIGNMENTS,
        }
    )
    has_token_scores = True
    shared_by_threads = True  # calls from `inter_threads` threads run side by side

    def __init__(
        self,
        model_dir,
        device="cpu",
        compute_type="default",
        intra_threads=0,
        inter_threads=1,
        **settings,
    ):
        ctranslate2 = import_ctranslate2()

        model_dir = os.fspath(model_dir)
        settings_path = os.path.join(model_dir, SETTINGS_FILE)
        if not os.path.isfile(settings_path):
            raise ValueError(
                f"`model_dir` {model_dir!r} is not an export of `export_ctranslate2`: it has no "
                f"{SETTINGS_FILE}."
            )
        with open(settings_path, encoding="utf-8") as f:
            recorded = json.load(f)
        self.settings = DecodingSettings.from_dict(recorded).replace(**settings)
        self.quantization = recorded.get("quantization", "float32")
        # Exports before it was recorded: the output limit, as then.
        self._model_max_length = recorded.get("model_max_length", self.settings.max_output_length)
        self.model_dir = model_dir
        self._options = dict(
            device=device,
            compute_type=compute_type,
            intra_threads=intra_threads,
            inter_threads=inter_threads,
        )
        self.translator = ctranslate2.Translator(model_dir, **self._options)
        self.pieces = host_tokenizer(tokenizer_kind(model_dir, recorded), model_dir)
        self.languages = self.pieces.languages
        self._ctranslate2 = ctranslate2
        self._outputs = SearchOutputs(self.translator, self.pieces)

    @property
    def bulk_batch_size(self):
        """64 sentences on one thread, 256 on several (CTranslate2 shares a
        batch's rows among its threads)."""
        return 64 if self._options["intra_threads"] == 1 else 256

    def _source_pieces(self, sentences):
        """Pieces of each source, truncated to leave room for EOS (which
        CTranslate2 appends)."""
        keep = self.settings.max_input_length - 1
        return [self.pieces.source(runner.as_text(text))[:keep] for text in sentences]

    def _by_length(self, sentences, batch_size, run, parallel=1):
        """`run(pieces)` over batches of at most `batch_size` sources of
        similar length (so that a batch's output-length limit, its longest
        source's, is close to each sentence's own, and little is padded),
        `parallel` batches at once; its outputs, one per sentence, in input
        order."""
        pieces = self._source_pieces(sentences)

        def run_batch(chunk):
            return run([pieces[i] for i in chunk])

        return in_length_order(
            len(pieces), lambda i: len(pieces[i]), run_batch, batch_size, parallel=parallel
        )

    def describe(self):
        """The export's directory, quantization and decoding settings."""
        return runner.export_description(
            f"CTranslate2 model: {self.model_dir}", self.quantization, self.settings
        )

    def _source_lengths(self, texts):
        return [len(self.pieces.source(runner.as_text(text))) for text in texts]

    def _beam_search(self, pieces, **options):
        """One `translate_batch` call of beam search (greedy for
        `beam_size=1`) over source `pieces` with the settings' controls and
        limit, every hypothesis with its score and EOS."""
        beam_size = self.settings.beam_size
        return self.translator.translate_batch(
            pieces,
            beam_size=beam_size,
            num_hypotheses=beam_size,
            length_penalty=0.0,
            return_scores=True,
            return_end_token=True,
            max_input_length=0,
            max_decoding_length=decoding_limit(pieces, self.settings),
            **controls(self.settings),
            **options,
        )

    def _translate_with_scores(self, sentences, n_best, token_scores, batch_size):
        """Beam search (greedy for `beam_size=1`): for each sentence, its
        `n_best` best `Hypothesis` (at most `beam_size`), best first; with
        `token_scores`, each with its tokens' log-probabilities (one more
        scoring call per batch, as `score` gives them)."""
        runner.check_n_best(n_best, self.settings.beam_size)

        def run(pieces):
            hypotheses = self._outputs.best_first(self._beam_search, pieces, self.settings)
            best = [options[:n_best] for options in hypotheses]
            return self._with_token_scores(pieces, best) if token_scores else best

        # A batch per `inter_threads` translator at once (the sampler's
        # draws stay in turn, and so repeatable with one translator).
        return self._by_length(sentences, batch_size, run, self._options["inter_threads"])

    def _translate_with_alignments(self, sentences, batch_size):
        """The best translation of each sentence as an
        `AlignedTranslation` (without token scores): each target piece
        aligned to the source piece it attends to most in the export's
        alignment heads (every head of the last decoder layer, averaged,
        as `Translator`), with that whole attention (`SearchAttention`:
        the search's own, its first row from one greedy step)."""
        eos = self.pieces.eos_piece

        def run(pieces):
            attention = SearchAttention(self.translator, self._beam_search)
            found = self._outputs.best_first(attention.search, pieces, self.settings)
            best = [options[0] for options in found]
            rows = attention.of(pieces, best)
            found = zip(best, pieces, strict=True)
            return [aligned(h, p, rows.get(i, []), eos) for i, (h, p) in enumerate(found)]

        return self._by_length(sentences, batch_size, run, self._options["inter_threads"])

    def _with_token_scores(self, pieces, hypotheses):
        """`hypotheses` (a list per source of `pieces`) with their tokens'
        log-probabilities, from one `score_batch` call."""
        pairs = [(i, h) for i, options in enumerate(hypotheses) for h in options]
        scored = self.translator.score_batch(
            [pieces[i] for i, _ in pairs], [h.tokens[:-1] for _, h in pairs], max_input_length=0
        )
        values = iter([float(v) for v in result.log_probs] for result in scored)
        return [
            [dataclasses.replace(h, token_scores=next(values)) for h in options]
            for options in hypotheses
        ]

    def _sample(self, sentences, num_samples, seed, batch_size):
        """`num_samples` random translations of each sentence
        (`temperature`, `top_k`, `top_p`), from CTranslate2's own random
        generator seeded with `seed`: repeatable (with one `inter_threads`,
        the default), but not the draws of `Translator`'s `sample`.

        CTranslate2's generators belong to its worker threads and take the
        seed when they are made, so a later `set_random_seed` does not
        change them (OpenNMT/CTranslate2#1757): each call draws with a
        model loaded afresh after seeding (a model load per call).

        Raises:
            ValueError: `seed` is not an integer in [0, 2**32 - 1], the
                range of CTranslate2's generator.
        """
        if isinstance(seed, bool) or not isinstance(seed, int) or not 0 <= seed <= MAX_SEED:
            raise ValueError(
                f"`seed` must be an integer in [0, {MAX_SEED}] (CTranslate2's random "
                f"generator takes 32 bits). Received: seed={seed!r}"
            )
        self._ctranslate2.set_random_seed(seed)
        sampler = self._ctranslate2.Translator(self.model_dir, **self._options)

        def draw(pieces, **options):
            return sampler.translate_batch(
                pieces,
                beam_size=1,
                num_hypotheses=num_samples,
                sampling_topk=self.settings.top_k,
                sampling_topp=self.settings.top_p,
                sampling_temperature=self.settings.temperature,
                return_scores=True,
                return_end_token=True,
                max_input_length=0,
                max_decoding_length=decoding_limit(pieces, self.settings),
                **controls(self.settings),
                **options,
            )

        def run(pieces):
            return self._outputs.best_first(draw, pieces, self.settings)

        return self._by_length(sentences, batch_size, run)

    def score(self, sources, targets, batch_size=None, target_lang=None):
        """Scores each target as a translation of its source (forced
        decoding; into `target_lang` for a multilingual model), like
        `Translator.score`: a list of `TargetScore`. A
        target is truncated as `Translator.score` truncates it, to the
        model's `max_length` tokens with EOS (whatever
        `max_output_length` limits translations to)."""
        batch_size = self.resolve_batch_size(batch_size)
        sources, targets = list(sources), list(targets)
        if len(sources) != len(targets):
            raise ValueError(
                "`sources` and `targets` must hold one target per source. Received: "
                f"{len(sources)} sources and {len(targets)} targets"
            )
        sources = self.tagged_sources(sources, target_lang)
        keep = self._model_max_length - 1
        alpha = self.settings.alpha

        def run(chunk):
            source_pieces = self._source_pieces([sources[i] for i in chunk])
            target_pieces = [self.pieces.target(runner.as_text(targets[i]))[:keep] for i in chunk]
            results = self.translator.score_batch(source_pieces, target_pieces, max_input_length=0)
            scores = []
            for result in results:
                log_prob = float(sum(result.log_probs))
                scores.append(
                    TargetScore(
                        log_prob=log_prob,
                        score=log_prob / length_penalty(len(result.tokens), alpha),
                        tokens=list(result.tokens),
                        token_scores=[float(v) for v in result.log_probs],
                    )
                )
            return scores

        def size(i):
            return len(sources[i]) + len(targets[i])

        return in_length_order(len(sources), size, run, batch_size)
