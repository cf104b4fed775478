"""`Translator`: text in, text out, tokenization and search in the graph."""

import numpy as np
import tensorflow as tf

from keras_transformer import _backend
from keras_transformer.translator import runs
from keras_transformer.translator.graph import TranslatorGraph
from keras_transformer.translator.model_search import ModelSearch
from keras_transformer.translator.model_search import resolved_settings
from keras_transformer.translator.request import TranslationRequest
from keras_transformer.translator.request import check_constraints
from keras_transformer.translator.search_rows import drawn_seed
from keras_transformer_runtime import validation
from keras_transformer_runtime.batching import in_length_order
from keras_transformer_runtime.runners import results
from keras_transformer_runtime.runners import runner
from keras_transformer_runtime.text import glossary as phrases

_TOKENIZE_BATCH = 1024  # texts per call of the graph's tokenizer


class Translator(runner.Runner):
    """Translates batches of raw strings with a `Transformer` and a tokenizer.

    Tokenizes in the graph, appends EOS, encodes once, runs cached beam
    search (greedy when `beam_size=1`) with the length penalty
    `((5 + len) / 6)^alpha` and a limit of source length +
    `max_extra_length` tokens per sentence, and detokenizes. With
    `search="sample"` it draws each token at random instead
    (`decoding.sample`: `temperature`, `top_k`, `top_p`), for
    back-translation or diverse outputs; `sample` samples whatever `search`
    is. Sources longer than `max_input_length` tokens (EOS included) are
    truncated to it; outputs never exceed the model's `max_length`. Empty
    strings and empty batches are fine, and the output has one result per
    input, in order.

    Its Python methods are those every runner of the package has
    (`keras_transformer_runtime.Runner`: `translate_with_scores`,
    `sample`, `score`, `translate_with_constraints`, returning
    `Hypothesis` and `TargetScore`); `translate` takes more options. The
    graph functions behind them are `graph`'s (`TranslatorGraph`), named
    after the SavedModel signatures that serve them: `keras_transformer.
    export` saves them for TF Serving; they take a string vector and trace
    once.

    Special ids: sequences are padded with the model's `pad_id`; BOS and
    EOS are the tokenizer's (`tokenizer.bos_id`, `tokenizer.eos_id`). A
    tokenizer whose `pad_id` differs from the model's is refused.

    Args:
        model: a `Transformer`.
        tokenizer: a `keras_transformer.tokenization.Tokenizer` (a
            `SentencePieceTokenizer`, a `MarianTokenizer`).
        settings: the `DecodingSettings` (default: the paper's beam search,
            `DecodingSettings()`). Their `max_input_length` and
            `max_output_length` default to the model's `max_length`, which
            `max_output_length` may not exceed; a request may ask for fewer
            output tokens (`translate(..., max_output_length=)`).
        jit_compile: compile the search with XLA.
        alignment_layer: the decoder layer whose cross-attention aligns
            (`return_alignments=True`; default the model's `alignment_layer`).
        name: the graph module's name.
        **changes: settings that replace those of `settings`, by name
            (`beam_size=1`, `alpha=0.8`, ...).

    Attributes:
        settings: the `DecodingSettings` in use, with the lengths resolved.
        graph: the `TranslatorGraph`.

    Example:

    >>> translator = Translator(model, tokenizer, beam_size=1)
    >>> translator.translate(["A dog runs."])
    ['Ein Hund läuft.']
    """

    methods = frozenset(runner.METHODS)
    has_token_scores = True

    def __init__(
        self,
        model,
        tokenizer,
        settings=None,
        jit_compile=False,
        alignment_layer=None,
        name=None,
        **changes,
    ):
        _backend.require_tensorflow("Translator", "tf.function searches and the TF Text tokenizer")
        self.settings = resolved_settings(settings, changes, model)
        self.model = model
        self.tokenizer = tokenizer
        self.model_search = ModelSearch(model, tokenizer, self.settings, alignment_layer)
        self.alignment_layer = self.model_search.alignment_layer
        self.pad_id = model.pad_id
        self.bos_id, self.eos_id = self.model_search.bos_id, self.model_search.eos_id
        self.jit_compile = jit_compile
        self.graph = TranslatorGraph(self.model_search, jit_compile=jit_compile, name=name)
        self.languages = tokenizer.languages

    @classmethod
    def from_run(cls, model_dir, tokenizer=None, checkpoint_paths=None, dtype=None, **changes):
        """The translator of the run `train` wrote in `model_dir`: its
        model, the tokenizer `train` kept (or `model_dir`'s `spm.model`),
        and the weights, settings and dtype policy the run chose
        (`record_choice`; else its last 5 checkpoints averaged, in
        float32). `checkpoint_paths` (averaged), `dtype` (a policy name)
        and `changes` (settings by name) override the run's.

        Example:

        >>> translator = Translator.from_run("runs/multi30k")
        >>> translator.translate(["A dog runs."])
        ['Ein Hund läuft.']
        """
        return runs.translator_from_run(
            cls, model_dir, tokenizer, checkpoint_paths, dtype, **changes
        )

    def without_xla(self):
        """This translator with its search as a plain graph (`jit_compile`
        off), as exports and stock TF Serving need it."""
        return Translator(
            self.model, self.tokenizer, self.settings, alignment_layer=self.alignment_layer
        )

    def describe(self):
        """The model's size and the decoding settings, as text."""
        return (
            f"Translator: {type(self.model).__name__} of {self.model.count_params():,} "
            f"parameters, {type(self.tokenizer).__name__}\n"
            f"decoding settings: {self.settings.to_dict()}"
        )

    def _batches(self, sentences, run, batch_size, progress=None):
        """`run(text)` (a string tensor of a batch) over `sentences` in
        batches of similar length; its results in order."""
        sentences = list(sentences)

        def run_chunk(chunk):
            return run(tf.constant([sentences[i] for i in chunk], tf.string))

        return in_length_order(
            len(sentences), lambda i: len(sentences[i]), run_chunk, batch_size, progress
        )

    def _source_lengths(self, texts):
        texts, lengths = list(texts), []
        for start in range(0, len(texts), _TOKENIZE_BATCH):
            chunk = tf.constant(texts[start : start + _TOKENIZE_BATCH], tf.string)
            lengths += self.graph.tokenize(chunk)["lengths"].numpy().tolist()
        return lengths

    def _translate_with_scores(self, sentences, n_best, token_scores, batch_size):
        """For each sentence its `n_best` best `Hypothesis` (at most
        `beam_size`; the graph's `serving_default`, `n_best`), best first;
        with `token_scores` (one per sentence), each with its tokens and
        their log-probabilities (`translate_with_alignments`)."""
        runner.check_n_best(n_best, self.settings.beam_size)
        return self._signature(
            *results.scores_signature(n_best, token_scores), sentences, batch_size
        )

    def _translate_with_alignments(self, sentences, batch_size, progress=None):
        """An `AlignedTranslation` of each sentence."""
        parse = results.aligned_translations
        return self._signature("translate_with_alignments", parse, sentences, batch_size, progress)

    def _signature(self, name, parse, sentences, batch_size, progress=None):
        """The graph's function `name` over `sentences` in batches, its
        outputs `parse`d."""
        function = self.graph.signature_functions()[name]
        run = lambda text: parse(results.numpy_outputs(function(text)))  # noqa: E731
        return self._batches(sentences, run, batch_size, progress)

    def _sample(self, sentences, num_samples, seed, batch_size):
        """`num_samples` translations of each sentence drawn at random
        (`temperature`, `top_k`, `top_p`, whatever `search` is), as
        `Hypothesis`: the same for the same `seed`, sentences and
        `batch_size`."""
        validation.check_positive_int(num_samples=num_samples)
        validation.check_non_negative_int(seed=seed)
        batch_seeds = np.random.SeedSequence(seed)

        def run(text):
            batch_seed = batch_seeds.spawn(1)[0]
            draws = [
                results.best_hypotheses(
                    results.numpy_outputs(self.graph.sample(text, drawn_seed(batch_seed)))
                )
                for _ in range(num_samples)
            ]
            return [[options[0] for options in row] for row in zip(*draws, strict=True)]

        return self._batches(sentences, run, batch_size)

    def translate_with_constraints(
        self,
        sentences,
        constraints=None,
        banned=None,
        batch_size=None,
        glossary=None,
        target_lang=None,
    ):
        """`Runner.translate_with_constraints` (the graph's
        `translate_with_constraints` per sentence), every constraint
        (a `glossary`'s terms too) checked before anything is translated.

        Raises:
            ValueError: a constraint that something else would meet: empty,
                or with characters the target vocabulary cannot write.
        """
        sentences = list(sentences)
        check_constraints(self.tokenizer, sentences, constraints, glossary)
        return super().translate_with_constraints(
            sentences, constraints, banned, batch_size, glossary, target_lang
        )

    def _translate_with_constraints(self, sentences, constraints, banned, batch_size):
        sentences = list(sentences)
        joined = {
            "constraints": [phrases.joined(p) for p in constraints],
            "banned": [phrases.joined(p) for p in banned],
        }

        def run(chunk):
            inputs = {
                name: tf.constant([values[i] for i in chunk]) for name, values in joined.items()
            }
            text = tf.constant([sentences[i] for i in chunk], tf.string)
            outputs = self.graph.translate_with_constraints(text, **inputs)
            return results.constrained_hypotheses(results.numpy_outputs(outputs))

        return in_length_order(len(sentences), lambda i: len(sentences[i]), run, batch_size)

    def translate(
        self,
        sentences,
        batch_size=None,
        progress=None,
        seed=None,
        prefixes=None,
        max_output_length=None,
        return_alignments=False,
        constraints=None,
        banned=None,
        target_lang=None,
        format="text",
    ):
        """Translates a list of strings, `batch_size` sentences at a time
        (sorted by length for little padding), and returns a list in the
        same order. A string of several sentences is translated sentence
        by sentence and joined back (`settings.split_sentences`; see
        `keras_transformer_runtime.Runner`).

        Args:
            sentences: the strings.
            batch_size: sentences per call of the graph (default: the
                runner's `bulk_batch_size`).
            progress: a label: a line on stderr counts the sentences done
                and the seconds spent.
            seed: with `search="sample"`, an int (default a fresh random
                one) that makes the draws repeatable: the same seed,
                sentences and `batch_size` give the same outputs.
            prefixes: one string per sentence (`""` for none) that its
                translation starts with (forced, then the search goes on).
            max_output_length: a cap on each translation's tokens, EOS
                included.
            return_alignments: return a list of `AlignedTranslation`: each
                translation with its pieces, their alignments and their
                log-probabilities (`token_scores`, and `word_scores` per
                word, for spotting the words to check).
            constraints, banned: per sentence, a list of phrases its
                translation must hold, and must not (see
                `translate_with_constraints`; beam or greedy search, no
                other option); a `RuntimeWarning` names the sentences
                whose constraints the length limit left unmet.
            target_lang: for a multilingual model (`languages`), the
                language to translate into: one code (`"fr"`) or a list
                of one per sentence; see `keras_transformer_runtime.
                languages`.
            format: `"text"`, or `"html"` or `"markdown"`: inline markup
                put back around the aligned words (`translate_documents`).

        Returns:
            The translations, strings (or `AlignedTranslation`s), in order.

        Example:

        >>> translator.translate(["A dog runs."], prefixes=["Ein Hund"])
        ['Ein Hund rennt.']
        >>> translator.translate(["A dog runs."], constraints=[["Hund", "rennt"]])
        ['Ein Hund rennt.']
        >>> multilingual.translate(["A dog runs.", "A dog runs."], target_lang=["de", "fr"])
        ['Ein Hund rennt.', 'Un chien court.']
        """
        batch_size = self.resolve_batch_size(batch_size)
        request = TranslationRequest.checked(
            self.model_search.strategy,
            sentences,
            prefixes=prefixes,
            max_output_length=max_output_length,
            return_alignments=return_alignments,
            constraints=constraints,
            banned=banned,
            seed=seed,
            target_lang=target_lang,
            format=format,
        )
        if request.format.marked_up:
            return super().translate(request.sentences, batch_size, target_lang, format)
        if request.with_terms:
            found = self.translate_with_constraints(
                request.sentences,
                request.constraints,
                request.banned,
                batch_size,
                target_lang=request.target_lang,
            )
            phrases.warn_unmet(found, stacklevel=3)
            return [h.translation for h in found]
        split = self.split(request.sentences, request.target_lang)
        if request.return_alignments:
            return split.aligned(
                self._translate_with_alignments(split.sentences, batch_size, progress)
            )
        prefixes = None
        if request.prefixes is not None:  # each input's starts its first sentence's
            prefixes = [""] * len(split.sentences)
            for row, prefix in enumerate(request.prefixes):
                units = split.units(row)
                if units:
                    prefixes[units[0]] = prefix
        return split.texts(
            self._translate_plain(split.sentences, prefixes, request, batch_size, progress)
        )

    def _translate_plain(self, sentences, prefixes, request, batch_size, progress):
        """`translate` of sentences with the settings' search, their
        prefixes and the request's length cap."""
        sampling = self.model_search.strategy.draws_at_random
        batch_seeds = np.random.SeedSequence(request.seed or 0)

        def run(chunk):
            text = tf.constant([sentences[i] for i in chunk], tf.string)
            seed = drawn_seed(batch_seeds.spawn(1)[0]) if sampling else tf.constant(0, tf.int64)
            if request.with_options:
                prefix = [prefixes[i] for i in chunk] if prefixes is not None else [""] * len(chunk)
                outputs = self.graph.options_with_seed(
                    text,
                    tf.constant(prefix, tf.string),
                    tf.constant(request.max_output_length or 0, tf.int32),
                    seed,
                )
            elif sampling:
                outputs = self.graph.sample(text, seed)
            else:
                outputs = self.graph.serving_default(text)
            return [results.text(value) for value in outputs["translation"].numpy()]

        return in_length_order(
            len(sentences), lambda i: len(sentences[i]), run, batch_size, progress
        )

    def score(self, sources, targets, batch_size=None, progress=None, target_lang=None):
        """Scores each target as a translation of its source (forced
        decoding), `batch_size` pairs at a time; see the graph's `score`.
        A target is scored as the tokenizer segments it: for a translation
        whose search wrote it in other pieces, that is another number than
        the translation's token scores (docs/serving.md, "Token scores").

        Returns:
            A list of `TargetScore`, one per pair, in order.

        Example:

        >>> [s.log_prob for s in translator.score(["A dog."], ["Ein Hund."])]
        [-1.93]
        """
        batch_size = self.resolve_batch_size(batch_size)
        sources, targets = self.tagged_sources(sources, target_lang), list(targets)
        if len(sources) != len(targets):
            raise ValueError(
                "`sources` and `targets` must hold one target per source. Received: "
                f"{len(sources)} sources and {len(targets)} targets"
            )

        def run(chunk):
            outputs = self.graph.score(
                tf.constant([sources[i] for i in chunk], tf.string),
                tf.constant([targets[i] for i in chunk], tf.string),
            )
            return results.target_scores(results.numpy_outputs(outputs))

        size = lambda i: len(sources[i]) + len(targets[i])  # noqa: E731
        return in_length_order(len(sources), size, run, batch_size, progress)
