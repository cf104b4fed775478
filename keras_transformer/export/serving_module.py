"""What a SavedModel export saves (`ServingModule`): the translator's
model and tokenizer, its settings, and one `tf.function` per signature,
the translating ones behind the request limits; a multilingual model's
take each text's `target_lang` too."""

import json

import tensorflow as tf

from keras_transformer.translator import documents
from keras_transformer.translator.graph import TranslatorGraph
from keras_transformer.translator.signatures import BANNED
from keras_transformer.translator.signatures import CONSTRAINTS
from keras_transformer.translator.signatures import MAX_OUTPUT_LENGTH
from keras_transformer.translator.signatures import PHRASE_SEPARATOR
from keras_transformer.translator.signatures import PREFIX
from keras_transformer.translator.signatures import SEED
from keras_transformer.translator.signatures import SOURCE
from keras_transformer.translator.signatures import TARGET
from keras_transformer.translator.signatures import TARGET_LANG
from keras_transformer.translator.signatures import TEXT
from keras_transformer_runtime.text import languages
from keras_transformer_runtime.text.languages import TargetLanguages


class ServingModule(tf.Module):
    """What is saved: the translator's model and tokenizer, its decoding
    settings as a constant, and one `tf.function` per signature."""

    def __init__(self, translator, limits):
        super().__init__(name="keras_transformer_translator")
        self.limits = dict(limits)
        # The functions read the `tf.Variable`s inside Keras's variables, and
        # those are what must be saved: exporting a Keras variable writes a
        # second copy, which the TF1 session loader (TF Serving) restores
        # instead of the one the graph reads. So the Keras model stays out of
        # the object graph, and its `tf.Variable`s are listed explicitly.
        object.__setattr__(self, "translator", translator)
        # A graph whose searches take at most `max_batch_size` sentences at
        # a time (a text splits into any number of them): the translator's
        # own when it does (what earlier calls traced is reused), else one
        # of the same search.
        graph = translator.graph
        if graph.max_rows != self.limits["max_batch_size"]:
            graph = TranslatorGraph(translator.model_search, max_rows=self.limits["max_batch_size"])
        object.__setattr__(self, "graph", graph)
        self.model_variables = [v.value for v in translator.model.variables]
        # The tokenizer's resources (a MarianTokenizer's lookup table), so
        # that the export creates and initializes them on load.
        self.tokenizer = translator.tokenizer
        # Likewise the lookup tables of banned phrases' spellings.
        self.spellings = graph.spellings
        # A variable, not a constant: constants are not saved as objects.
        self.settings_json = tf.Variable(
            json.dumps(self.settings(), sort_keys=True), trainable=False, name="settings_json"
        )

    def settings(self):
        """The translator's decoding settings and the request limits."""
        languages = self.translator.languages
        languages = {
            "languages": list(languages.codes),
            # A model of one language needs none; a multilingual one, where its tags are required.
            "language_required": languages.requires_target_lang,
        }
        return {**self.translator.settings.to_dict(), **self.limits, **languages}

    def _within_limits(self, text, side="source"):
        """`text`, after assertions that the request is within the limits
        (an `InvalidArgument` error names the limit otherwise); `side`
        says how the text counts: `"text"` every token (the signatures
        that split texts translate them all), `"source"` truncated to
        `max_input_length`, `"target"` to the model's `max_length`."""
        max_batch, max_tokens = self.limits["max_batch_size"], self.limits["max_input_tokens"]
        truncated_to = {
            "text": None,
            "source": self.translator.settings.max_input_length,
            "target": self.translator.model.max_length,
        }[side]
        tokenizer = self.translator.tokenizer
        tokenize = tokenizer.tokenize_target if side == "target" else tokenizer.tokenize
        lengths = tf.cast(tokenize(text).row_lengths(), tf.int64) + 1
        if truncated_to is not None:
            lengths = tf.minimum(lengths, truncated_to)
        tokens = tf.reduce_sum(lengths)
        side = "source" if side == "text" else side
        checks = [
            tf.debugging.assert_less_equal(
                tf.size(text),
                max_batch,
                message=f"A request may hold at most max_batch_size={max_batch} sentences.",
            ),
            tf.debugging.assert_less_equal(
                tokens,
                tf.cast(max_tokens, tokens.dtype),
                message=f"A request may hold at most max_input_tokens={max_tokens} {side} tokens.",
            ),
        ]
        with tf.control_dependencies(checks):
            return tf.identity(text)

    def _phrases_within_limits(self, phrases, name, longest_checked=True):
        """`phrases` (each sentence's, joined by `|||`), after assertions
        that the request is within the limits: each sentence has at most
        `max_phrases` phrases, each phrase (with `longest_checked`) at most
        the longest output's tokens (`max_output_length - 1`, room for
        EOS), and all of them, counted whole, at most `max_input_tokens`. The searches keep
        phrases whole, and a constrained step's cost grows with the square
        of a phrase's length: truncated counts would not bound it."""
        batch = tf.size(phrases)
        split = tf.strings.strip(tf.strings.split(tf.reshape(phrases, [-1]), PHRASE_SEPARATOR))
        lengths = tf.cast(
            self.translator.tokenizer.tokenize_target(split.flat_values).row_lengths(), tf.int64
        )
        counted = tf.RaggedTensor.from_row_splits(
            tf.cast(lengths > 0, tf.int64), split.row_splits, validate=False
        )
        per_sentence = tf.reduce_max(tf.concat([tf.reduce_sum(counted, axis=1), [0]], 0))
        longest = tf.reduce_max(tf.concat([lengths, [0]], 0))
        most_phrases = self.limits["max_phrases"]
        most_tokens = self.translator.settings.max_output_length - 1
        max_tokens = self.limits["max_input_tokens"]
        checks = [
            tf.debugging.assert_less_equal(
                tf.cast(batch, tf.int64),
                tf.cast(self.limits["max_batch_size"], tf.int64),
                message=(
                    f"A request may hold at most max_batch_size={self.limits['max_batch_size']} "
                    "sentences."
                ),
            ),
            tf.debugging.assert_less_equal(
                per_sentence,
                tf.cast(most_phrases, tf.int64),
                message=f"A request may hold at most max_phrases={most_phrases} {name} phrases "
                "per sentence.",
            ),
            tf.debugging.assert_less_equal(
                longest if longest_checked else tf.constant(0, tf.int64),
                tf.cast(most_tokens, tf.int64),
                message=f"A request may hold at most {most_tokens} target tokens in one {name} "
                "phrase (the longest output, EOS aside).",
            ),
            tf.debugging.assert_less_equal(
                tf.reduce_sum(lengths),
                tf.cast(max_tokens, tf.int64),
                message=f"A request may hold at most max_input_tokens={max_tokens} {name} tokens.",
            ),
        ]
        with tf.control_dependencies(checks):
            return tf.identity(phrases)

    # Plain methods, made `tf.function`s by `signatures()` and kept off the
    # object: `tf.saved_model.save` traces a saved object's functions again
    # (in its own context); the signatures it is given it saves as traced.
    def _serving_default(self, text):
        return self.graph.serving_default(self._within_limits(text, "text"))

    def _n_best(self, text):
        return self.graph.n_best(self._within_limits(text, "text"))

    def _translate_with_options(self, text, prefix, max_output_length):
        return self.graph.translate_with_options(
            self._within_limits(text, "text"),
            self._within_limits(prefix, "target"),
            max_output_length,
        )

    def _translate_with_constraints(self, text, constraints, banned):
        return self.graph.translate_with_constraints(
            self._within_limits(text),
            self._phrases_within_limits(constraints, "constraints"),
            # A banned phrase longer than any output cannot occur (the
            # search drops it): refused only by the counts.
            self._phrases_within_limits(banned, "banned", longest_checked=False),
        )

    def _translate_with_alignments(self, text):
        return self.graph.translate_with_alignments(self._within_limits(text))

    def _sample(self, text, seed):
        return self.graph.sample(self._within_limits(text, "text"), seed)

    def _score(self, source, target):
        return self.graph.score(self._within_limits(source), self._within_limits(target, "target"))

    def _with_target_lang(self, method):
        """`method` taking a last input, `target_lang`, each of whose
        entries tags its text (the first input) for a multilingual model."""

        def tagged(text, *inputs):
            *inputs, target_lang = inputs
            return method(self._tagged(text, target_lang), *inputs)

        return tagged

    def _tagged(self, text, target_lang):
        return tagged(text, target_lang, self.translator.languages.codes)

    def signatures(self):
        """Each signature's concrete function: the graph's functions, those
        that run the model behind the request limits (`tokenize` and
        `detokenize` as they are); a multilingual model's translating
        signatures take a last input, `target_lang` (`_tagged`)."""
        limited = {
            "serving_default": (self._serving_default, [TEXT]),
            "n_best": (self._n_best, [TEXT]),
            "translate_with_options": (
                self._translate_with_options,
                [TEXT, PREFIX, MAX_OUTPUT_LENGTH],
            ),
            "translate_with_alignments": (self._translate_with_alignments, [TEXT]),
            "translate_with_constraints": (
                self._translate_with_constraints,
                [TEXT, CONSTRAINTS, BANNED],
            ),
            "sample": (self._sample, [TEXT, SEED]),
            "score": (self._score, [SOURCE, TARGET]),
        }
        functions = self.graph.signature_functions()
        for name, (method, inputs) in limited.items():
            if self.translator.languages.requires_target_lang:
                method, inputs = self._with_target_lang(method), [*inputs, TARGET_LANG]
            functions[name] = tf.function(method, input_signature=inputs, autograph=False)
        return {name: function.get_concrete_function() for name, function in functions.items()}


def tagged(text, target_lang, codes):
    """Each of `text` starting with the tag of its `target_lang` (`""`: the
    language tag typed at its start), without the tags of `codes` that the
    text itself holds (a user's words never choose the language); a text
    without characters as it is. The graph's own `TargetLanguages.requested`
    and `tagged`: it refuses what they refuse (`InvalidArgument`, their
    words), so that a TF Serving client gets what a runner's caller gets.
    """
    names = ", ".join(codes)  # unquoted: TensorFlow escapes quotes in messages
    blank = tf.equal(tf.strings.strip(text), "")
    typed = tf.equal(target_lang, "")
    untyped, typed_tag = documents.leading_tags(text)
    leading = tf.not_equal(typed_tag, "")
    typed_code = tf.strings.regex_replace(typed_tag, r"^>>(.*)<<$", r"\1")
    code = tf.where(typed, typed_code, target_lang)
    known = tf.reduce_any(tf.equal(code[:, None], tf.constant(list(codes))[None, :]), axis=1)
    checks = [
        tf.debugging.assert_equal(
            tf.size(target_lang),
            tf.size(text),
            message="A request must give one target_lang per text.",
        ),
        tf.debugging.assert_equal(
            tf.reduce_all(~typed | leading | blank),
            True,
            message="This model translates into several languages: pass target_lang, one of "
            f"{names} (or start each text with its tag, such as {languages.tag(codes[0])}).",
        ),
        tf.debugging.assert_equal(
            tf.reduce_all(known | (typed & (blank | ~leading))),
            True,
            message=f"target_lang must be one of the languages this model knows: {names} "
            '(or "": a tag typed at the start of the text).',
        ),
    ]
    with tf.control_dependencies(checks):
        rest = tf.where(typed, untyped, text)
        rest = tf.strings.regex_replace(rest, TargetLanguages(codes).own_tags_pattern, "")
        rest = tf.strings.regex_replace(rest, r"^\s+", "")
        return tf.where(blank, text, tf.strings.join([">>", code, "<< ", rest]))
