"""Sources of text pairs for `make_batches`: each a `tf.data.Dataset` of
`(source, target)` scalar strings, from two aligned lists, from two files
(plain or `.gz`, one sentence a line), or from a TFDS translation set."""

import tensorflow as tf

from keras_transformer import _backend
from keras_transformer_runtime.text import files as text_files


@_backend.tensorflow_only("training.text_pairs_from_lists", "tf.data")
def text_pairs_from_lists(sources, targets):
    """A dataset of `(source, target)` strings from two aligned lists.

    Example:

    >>> pairs = text_pairs_from_lists(["a cat"], ["eine Katze"])
    """
    if len(sources) != len(targets):
        raise ValueError(
            "`sources` and `targets` must have the same length. Received: "
            f"len(sources)={len(sources)}, len(targets)={len(targets)}"
        )
    return tf.data.Dataset.from_tensor_slices(
        (tf.constant(list(sources), tf.string), tf.constant(list(targets), tf.string))
    )


def _lines(path):
    return tf.data.TextLineDataset(str(path), compression_type=text_files.compression_type(path))


@_backend.tensorflow_only("training.text_pairs_from_files", "tf.data")
def text_pairs_from_files(source_path, target_path, check_alignment=True):
    """A dataset of `(source, target)` strings from two aligned text files.

    Files have one sentence a line, line i of one aligned with line i of
    the other; a `.gz` suffix means gzip. With `check_alignment` the line
    counts are compared first (one pass over both files), so that a
    misaligned corpus fails loudly instead of training on shifted pairs.

    Example:

    >>> pairs = text_pairs_from_files("train.en.gz", "train.de.gz")
    """
    if check_alignment:
        source_lines = text_files.count_lines(source_path)
        target_lines = text_files.count_lines(target_path)
        if source_lines != target_lines:
            raise ValueError(
                "Parallel files must have the same number of lines. Received: "
                f"{source_path} ({source_lines} lines), "
                f"{target_path} ({target_lines} lines)"
            )
    return tf.data.Dataset.zip((_lines(source_path), _lines(target_path)))


@_backend.tensorflow_only("training.text_pairs_from_tfds", "TensorFlow Datasets")
def text_pairs_from_tfds(
    name,
    split,
    source_key,
    target_key,
    data_dir=None,
    download=True,
):
    """A dataset of `(source, target)` strings from a TFDS translation set.

    Args:
        name: e.g. `"wmt14_translate/de-en"`.
        split: e.g. `"train"`, `"validation"`, `"test"`.
        source_key: feature holding the source text, e.g. `"en"`.
        target_key: feature holding the target text, e.g. `"de"`.
        data_dir: where TFDS keeps its data.
        download: whether TFDS may download and prepare the data.

    Raises:
        FileNotFoundError: `download=False` and the data set is not
            prepared in `data_dir`.

    Example:

    >>> pairs = text_pairs_from_tfds("wmt14_translate/de-en", "train", "en", "de")
    """
    import tensorflow_datasets as tfds

    try:
        dataset = tfds.load(name, split=split, data_dir=data_dir, download=download)
    except AssertionError as error:  # what TFDS raises for data it cannot find
        raise FileNotFoundError(
            f"TFDS data set {name!r} is not prepared in data_dir={data_dir!r}; pass "
            "download=True to download and prepare it."
        ) from error
    return dataset.map(
        lambda example: (example[source_key], example[target_key]),
        num_parallel_calls=tf.data.AUTOTUNE,
    )
