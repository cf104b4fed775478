"""Paragraphs and long texts through every runtime: translated sentence by
sentence and joined back, as their sentences alone would be.

    pip install -e ".[litert,onnx,ctranslate2]"
    python benchmarks/documents.py --run_dir runs/multi30k \\
        --test_src data/multi30k/test_2016_flickr.en.gz \\
        --test_ref data/multi30k/test_2016_flickr.de.gz

`--run_dir` is a `model_dir` of `examples/wmt_ende.py` after its export
stage (rebuilt as `ctranslate2_translation.py` rebuilds it), decoded with
its beam size and alpha. The test set's sentences, a period added to
those that end without punctuation (no splitter can find the end of a
sentence that has none: `--as_is` keeps them), are grouped in order into
paragraphs of 2 to 8 consecutive sentences (sizes drawn with seed 0),
joined by single spaces, and once more by line breaks. Each runtime
translates the sentences one per input, then the paragraphs; a
paragraph counts as equal where its translation is its sentences'
translations (the same runtime's) joined with the same separators. The
runtimes: `Translator.translate`, the SavedModel's `serving_default`
called with whole paragraphs (the graph splits them: what a TF Serving
client gets), `SavedModelTranslator` (splits on the host), the command
line on the SavedModel (space-joined paragraphs: it reads lines),
`CTranslate2Translator` (float32), `LiteRTTranslator` and
`ONNXTranslator` (float32). Every runtime runs in this one process.

BLEU (sacreBLEU) of the space-joined paragraphs against their joined
references is printed beside the sentence-level BLEU, beside the
sentences' translations joined as the paragraphs are (scored on the same
segments as the paragraphs: BLEU counts n-grams across the joins), and
beside the paragraphs translated whole: by a `Translator` with
`split_sentences=False` (a paragraph over `max_input_length` in pieces of
words), and cut at `max_input_length` as every runtime did before texts
were split (the graph's `translate_with_alignments`, which takes each
text as one sentence).

Then texts of 500, 1,000 and 5,000 words (test sentences in order,
joined by spaces) go through each runtime once: seconds, and the
sentences of the input and of the output (as `sentences.segments`
counts them).
"""

import os
import subprocess
import sys
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from ctranslate2_translation import load_run  # noqa: E402
from ctranslate2_translation import read_test_set  # noqa: E402
from ctranslate2_translation import run_parser  # noqa: E402
from ctranslate2_translation import run_translator  # noqa: E402
from script_workers import scratch_directory  # noqa: E402

from keras_transformer_runtime.text.sentences import segments  # noqa: E402

LONG_WORDS = (500, 1000, 5000)
SEPARATORS = {"spaces": " ", "line breaks": "\n"}


def paragraph_sizes(count, seed=0):
    """Sizes of consecutive groups of `count` sentences, each 2 to 8 (the
    last may be shorter, never below 1)."""
    import numpy as np

    rng = np.random.default_rng(seed)
    sizes = []
    while sum(sizes) < count:
        sizes.append(int(min(rng.integers(2, 9), count - sum(sizes))))
    return sizes


def grouped(items, sizes):
    groups, start = [], 0
    for size in sizes:
        groups.append(items[start : start + size])
        start += size
    return groups


def long_text(sentences, words):
    """Test sentences in order (cycling), joined by spaces, until `words`."""
    chosen, total = [], 0
    while total < words:
        sentence = sentences[len(chosen) % len(sentences)]
        chosen.append(sentence)
        total += len(sentence.split())
    return " ".join(chosen)


def sentence_count(text):
    return len([part for part in segments(text)[::2] if part.strip()])


def whole_and_cut(translator, texts, batch=64):
    """Each text as one sentence cut at `max_input_length`, as every
    runtime translated before texts were split: the graph's
    `translate_with_alignments`, which takes each text whole."""
    import tensorflow as tf

    outputs = []
    for i in range(0, len(texts), batch):
        found = translator.graph.translate_with_alignments(tf.constant(texts[i : i + batch]))
        outputs += [t.decode("utf-8") for t in found["translation"].numpy()]
    return outputs


def runtimes(translator, work):
    """`{name: translate(texts)}` of every runtime, exporting as needed."""
    import tensorflow as tf
    import tensorflow_text  # noqa: F401 (the SentencePiece ops of the SavedModel)

    from keras_transformer.export import export_ctranslate2
    from keras_transformer.export import export_litert
    from keras_transformer.export import export_onnx
    from keras_transformer.export import export_saved_model
    from keras_transformer_runtime import CTranslate2Translator
    from keras_transformer_runtime import LiteRTTranslator
    from keras_transformer_runtime import ONNXTranslator
    from keras_transformer_runtime import SavedModelTranslator

    saved = export_saved_model(translator, os.path.join(work, "saved_model"))
    serve = tf.saved_model.load(saved).signatures["serving_default"]

    def served(texts, batch=16):
        outputs = []
        for i in range(0, len(texts), batch):
            found = serve(text=tf.constant(texts[i : i + batch], tf.string))["translation"]
            outputs += [t.decode("utf-8") for t in found.numpy()]
        return outputs

    def command_line(texts):
        if any("\n" in text for text in texts):
            return None  # the command line reads lines
        result = subprocess.run(
            [sys.executable, "-m", "keras_transformer_runtime.translate", "--export_dir", saved],
            input="\n".join(texts).encode() + b"\n",
            capture_output=True,
            check=True,
        )
        return result.stdout.decode("utf-8").split("\n")[:-1]

    ct2 = CTranslate2Translator(export_ctranslate2(translator, os.path.join(work, "ct2")))
    litert = LiteRTTranslator(export_litert(translator, os.path.join(work, "ende.tflite")))
    onnx = ONNXTranslator(export_onnx(translator, os.path.join(work, "ende.onnx")))
    saved_model = SavedModelTranslator(saved)
    return {
        "Translator": lambda texts: translator.translate(texts, batch_size=64),
        "SavedModel serving_default (graph splits)": served,
        "SavedModelTranslator": lambda texts: saved_model.translate(texts, batch_size=64),
        "command line (--export_dir)": command_line,
        "CTranslate2 float32": lambda texts: ct2.translate(texts, batch_size=64),
        "LiteRT float32": lambda texts: litert.translate(texts, batch_size=16),
        "ONNX float32": lambda texts: onnx.translate(texts, batch_size=16),
    }


def main():
    parser = run_parser(__doc__)
    parser.add_argument(
        "--as_is", action="store_true", help="no period added to unpunctuated sentences"
    )
    args = parser.parse_args()

    import warnings

    import sacrebleu

    sources, references = read_test_set(args)
    unpunctuated = sum(s.rstrip()[-1:].isalnum() for s in sources)
    if not args.as_is:
        sources = [s + "." if s.rstrip()[-1:].isalnum() else s for s in sources]
    sizes = paragraph_sizes(len(sources))
    model, tokenizer, config = load_run(args.run_dir)
    translator = run_translator(model, tokenizer, config)
    work = scratch_directory("documents_")
    rows = runtimes(translator, work)
    paragraphs = {
        name: [sep.join(group) for group in grouped(sources, sizes)]
        for name, sep in SEPARATORS.items()
    }
    joined_references = [" ".join(group) for group in grouped(references, sizes)]
    print(
        f"{len(sources)} test sentences in {len(sizes)} paragraphs of 2-8; beam "
        f"{config['beam_size']}, alpha {config['alpha']}, {os.cpu_count()} cores; "
        f"{unpunctuated} sentences without final punctuation "
        + ("kept as they are" if args.as_is else "given a period")
    )
    print(
        "| runtime | equal, spaces | equal, line breaks | sentence BLEU "
        "| sentences joined, BLEU | paragraph BLEU |"
    )
    print("| --- | ---: | ---: | ---: | ---: | ---: |")
    outputs_by_row = {}
    for name, translate in rows.items():
        alone = translate(sources)
        cells = []
        for separator_name, separator in SEPARATORS.items():
            found = translate(paragraphs[separator_name])
            if found is None:
                cells.append("n/a")
                continue
            outputs_by_row[(name, separator_name)] = found
            expected = [separator.join(group) for group in grouped(alone, sizes)]
            equal = sum(a == b for a, b in zip(found, expected, strict=True))
            cells.append(f"{equal}/{len(expected)}")
        bleu = [
            sacrebleu.corpus_bleu(alone, [references]).score,
            sacrebleu.corpus_bleu(
                [" ".join(group) for group in grouped(alone, sizes)], [joined_references]
            ).score,
            sacrebleu.corpus_bleu(outputs_by_row[(name, "spaces")], [joined_references]).score,
        ]
        print(f"| {name} | {' | '.join(cells)} | " + " | ".join(f"{b:.2f}" for b in bleu) + " |")
        sys.stdout.flush()
    whole = run_translator(model, tokenizer, config, split_sentences=False)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # paragraphs over max_input_length
        unsplit = whole.translate(paragraphs["spaces"], batch_size=64)
    print(
        "Paragraphs translated whole (split_sentences=False; over max_input_length, "
        f"in pieces of words): paragraph BLEU "
        f"{sacrebleu.corpus_bleu(unsplit, [joined_references]).score:.2f}"
    )
    # As every runtime did before: one sentence, cut at max_input_length
    # (translate_with_alignments takes each text as one sentence).
    cut = whole_and_cut(translator, paragraphs["spaces"])
    print(
        "Paragraphs translated whole and cut at max_input_length (before "
        f"splitting): paragraph BLEU {sacrebleu.corpus_bleu(cut, [joined_references]).score:.2f}"
    )

    print()
    columns = [f"{words:,} words: s, sentences in/out" for words in LONG_WORDS]
    print("| runtime | " + " | ".join(columns) + " |")
    print("| --- |" + " ---: |" * len(LONG_WORDS))
    texts = {words: long_text(sources, words) for words in LONG_WORDS}
    for name, translate in rows.items():
        cells = []
        for text in texts.values():
            start = time.perf_counter()
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                [found] = translate([text])
            seconds = time.perf_counter() - start
            cells.append(f"{seconds:.1f}, {sentence_count(text)}/{sentence_count(found)}")
        print(f"| {name} | {' | '.join(cells)} |")
        sys.stdout.flush()


if __name__ == "__main__":
    main()
