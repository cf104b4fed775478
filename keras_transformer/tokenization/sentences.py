"""Sentence splitting inside the graph: `keras_transformer_runtime.
sentences`' rules with TensorFlow's (RE2) regular expressions, so that a
SavedModel splits as the hosts do.

Example:

>>> segments(tf.constant(["Dr. Smith arrived. He sat down.", "Hi"]))
<tf.RaggedTensor [[b'Dr. Smith arrived.', b' ', b'He sat down.'], [b'Hi']]>
"""

import re

import tensorflow as tf

from keras_transformer_runtime.text.sentences import ABBREVIATIONS
from keras_transformer_runtime.text.sentences import BOUNDARY
from keras_transformer_runtime.text.sentences import CLOSING
from keras_transformer_runtime.text.sentences import FINAL
from keras_transformer_runtime.text.sentences import KEPT_PERIOD
from keras_transformer_runtime.text.sentences import OPENING


def _characters(characters):
    """A bracket expression's characters, escaped for RE2."""
    return "".join(f"\\x{{{ord(c):04X}}}" for c in characters)


_NOT_WORD = r"(^|[^\pL\pN])"
# What Python's `\s` matches (Unicode white space), which RE2's `\s` does
# not (ASCII only): the host's rules split at a no-break, thin or
# ideographic space, and so must these. `_BLANK`: the same but `\n`.
_BLANK = r"\t\x{0B}\f\r \x{1C}-\x{1F}\x{85}\p{Z}"
_SPACE = _BLANK + r"\n"
_RULES = (
    # A letter after another's dot: "e.g.", "U.S.", "z.B.".
    (r"\.(\pL)\.", f".\\1{KEPT_PERIOD}"),
    # A single letter: an initial.
    (_NOT_WORD + r"(\pL)\.", f"\\1\\2{KEPT_PERIOD}"),
    (_NOT_WORD + "(" + "|".join(map(re.escape, ABBREVIATIONS)) + r")\.", f"\\1\\2{KEPT_PERIOD}"),
    # One or two digits: an ordinal.
    (r"(^|[^\pL\pN_.])(\pN{1,2})\.", f"\\1\\2{KEPT_PERIOD}"),
    (
        f"([{_characters(FINAL)}]+(?:[{_BLANK}]?[{_characters(CLOSING)}])*)([{_BLANK}]+)"
        f"([{_characters(OPENING)}]*[\\p{{Lu}}\\pN])",
        f"\\1{BOUNDARY}\\2{BOUNDARY}\\3",
    ),
    (f"([{_BLANK}]*\\n[{_SPACE}]*)", f"{BOUNDARY}\\1{BOUNDARY}"),
    (KEPT_PERIOD, "."),
)


def segments(text):
    """Strings `(batch,)` to their sentences and separators, alternately:
    ragged `(batch, None)` strings, an odd count per text, which
    `tf.strings.reduce_join` joins back into the text."""
    text = tf.convert_to_tensor(text, tf.string)
    marked = text
    for pattern, rewrite in _RULES:
        marked = tf.strings.regex_replace(marked, pattern, rewrite)
    # A text with the noncharacters the rules use is left whole.
    reserved = tf.strings.regex_full_match(text, f"(?s).*[{BOUNDARY}{KEPT_PERIOD}].*")
    return tf.strings.split(tf.where(reserved, text, marked), BOUNDARY)
