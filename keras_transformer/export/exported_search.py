"""What the exports of the search as one model file (LiteRT, ONNX) share:
the search as a function of ids, traced for a converter, and the writing
of the model file with its tokenizer and settings beside it (the layout is
`keras_transformer_runtime.runners.exported_search`'s)."""

import json
import os
import shutil

import keras
import tensorflow as tf

from keras_transformer import _backend
from keras_transformer.export._weights import check_finite
from keras_transformer.export.versions import owned_staging_dir
from keras_transformer.export.versions import remove_stale_staging
from keras_transformer.translator.model_search import ModelSearch
from keras_transformer_runtime.runners.exported_search import ATTENTION
from keras_transformer_runtime.runners.exported_search import EARLIER_SENTENCEPIECE_SUFFIX
from keras_transformer_runtime.runners.exported_search import OUTPUT_IDS
from keras_transformer_runtime.runners.exported_search import SCORES
from keras_transformer_runtime.runners.exported_search import SETTINGS_SUFFIX
from keras_transformer_runtime.runners.exported_search import SIGNATURE
from keras_transformer_runtime.runners.exported_search import SOURCE_IDS
from keras_transformer_runtime.runners.exported_search import TOKEN_SCORES
from keras_transformer_runtime.runners.exported_search import companion
from keras_transformer_runtime.runners.exported_search import tokenizer_files
from keras_transformer_runtime.runners.exported_search import tokenizer_prefix
from keras_transformer_runtime.text.tokenizers import ASSETS

SOURCE_IDS_SPEC = tf.TensorSpec([None, None], tf.int32, name=SOURCE_IDS)


def check_exportable(translator, path, overwrite, export):
    """Raises a `ValueError` naming the setting if `export` (a function's
    name) cannot write `translator` to `path` (a sampling translator, NaN
    or infinite weights, a directory), and a `FileExistsError` if `path`
    exists and not `overwrite`."""
    if translator.model_search.strategy.draws_at_random:
        raise ValueError(
            f"{export} exports beam search and greedy search (beam_size=1), not sampling. "
            "Received: a translator with search='sample'"
        )
    check_finite(translator.model)
    if os.path.isdir(path):
        raise ValueError(f"`path` {path!r} is a directory; {export} writes one model file.")
    if os.path.exists(path) and not overwrite:
        raise FileExistsError(f"{path} exists; pass overwrite=True to replace it.")


def float32_model(model):
    """`model` itself if it computes in float32, else a float32 copy of it
    (a mixed-precision model's weights are float32 already): the converters
    know no bfloat16."""
    if keras.backend.standardize_dtype(model.compute_dtype) == "float32":
        return model
    copy = type(model).from_config({**model.get_config(), "dtype": "float32"})
    copy.set_weights(model.get_weights())
    return copy


class SearchModule(tf.Module):
    """The search of `translator` as `translate(source_ids)` -> `{"ids",
    "scores"}` (see `keras_transformer_runtime.runners.exported_search`), traced
    for a converter (`_backend.tracing_for_conversion(fixed_shapes)`), with
    the model's variables tracked so that a SavedModel of it holds them."""

    def __init__(self, translator, fixed_shapes):
        super().__init__(name="keras_transformer_search")
        model = float32_model(translator.model)
        # As in the SavedModel export: the `tf.Variable`s the graph reads.
        self.model_variables = [v.value for v in model.variables]
        search = ModelSearch(
            model, translator.tokenizer, translator.settings, translator.alignment_layer
        )

        @tf.function(input_signature=[SOURCE_IDS_SPEC], autograph=False)
        def translate(source_ids):
            found = search.aligned_search_ids(source_ids)
            return {
                OUTPUT_IDS: found.ids[:, 0],
                SCORES: found.scores[:, 0],
                TOKEN_SCORES: found.token_scores[:, 0],
                ATTENTION: found.attention[:, 0],
            }

        with _backend.tracing_for_conversion(fixed_shapes=fixed_shapes):
            self.concrete = translate.get_concrete_function()
        self.traced = _Traced(translate)


class _Traced:
    """Holds a `tf.function` where `tf.saved_model.save` does not look: it
    traces the functions of a saved object again, in its own context (and
    so outside the converter's)."""

    def __init__(self, function):
        self.function = function


def export_record(translator, runtime, quantization):
    """What `PATH.json` holds: the decoding settings, the special ids, the
    tokenizer's kind, the runtime, the weights' type and the signature."""
    return {
        **translator.settings.to_dict(),
        "runtime": runtime,
        "quantization": quantization or "float32",
        "tokenizer": translator.tokenizer.kind,
        "languages": list(translator.languages.codes),
        "pad_id": int(translator.pad_id),
        "bos_id": int(translator.bos_id),
        "eos_id": int(translator.eos_id),
        "signature": {
            "name": SIGNATURE,
            "inputs": {SOURCE_IDS: "int32 [batch, length]: ids, EOS, padding"},
            "outputs": {
                OUTPUT_IDS: "int32 [batch, output_length]: ids, EOS, padding",
                SCORES: "float32 [batch]: length-penalized log-probability",
                TOKEN_SCORES: "float32 [batch, output_length]: each token's log-probability",
                ATTENTION: (
                    "float32 [batch, output_length, length]: each token's attention over "
                    "the source (the alignment layer's, its heads' mean)"
                ),
            },
        },
    }


def write_model_file(path, translator, record, write_model):
    """Writes the model file `path` (`write_model(file)` writes it) with
    the tokenizer and `record` (`PATH.json`) beside it: each is written in
    a staging directory beside `path` and renamed into place, the model
    file last, so that a crash leaves the old files or the new ones, not
    half a file; tokenizer files of another kind from an earlier export to
    `path` are removed, and so are the staging directories of earlier
    exports to `path` that were killed."""
    path = os.path.abspath(os.fspath(path))
    parent, name = os.path.split(path)
    os.makedirs(parent, exist_ok=True)
    remove_stale_staging(parent, f".{name}.tmp-")
    staging = owned_staging_dir(parent, f".{name}.tmp-")
    try:
        write_model(os.path.join(staging, name))
        written = translator.tokenizer.save_assets(staging, tokenizer_prefix(path))
        with open(os.path.join(staging, name + SETTINGS_SUFFIX), "w", encoding="utf-8") as f:
            json.dump(record, f, indent=2, sort_keys=True)
            f.write("\n")
        for file in [*written, name + SETTINGS_SUFFIX, name]:
            os.replace(os.path.join(staging, file), os.path.join(parent, file))
        others = [f for kind in ASSETS for f in tokenizer_files(path, kind)]
        for file in [*others, companion(path, EARLIER_SENTENCEPIECE_SUFFIX)]:
            if os.path.basename(file) not in written and os.path.exists(file):
                os.remove(file)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return path
