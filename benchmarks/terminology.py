"""Terminology constraints on a trained model: constraints met, BLEU and
speed against unconstrained beam search.

    python benchmarks/terminology.py --run_dir runs/multi30k \\
        --test_src data/multi30k/test_2016_flickr.en.gz \\
        --test_ref data/multi30k/test_2016_flickr.de.gz

Each test sentence gets one constraint taken from its reference: a word
of at least four letters for even-numbered sentences, two adjacent words
for odd ones (seeded choice; punctuation stripped). The rows translate the
whole test set in batches of 64 with the run's beam size and alpha:
`Translator.translate` (beam search), `translate(constraints=...)`
(dynamic beam allocation, `decoding.terminology`, `ConstrainedBeamSearch`), and
`translate_with_constraints` with no constraint at all (the constrained
signature's overhead alone). Each time is the faster of two passes after
a warm-up pass; a constraint counts as met if the translation contains
the phrase as whole words. "Tails" counts the translations that go on
after a sentence's end (`. ` and more text), where a search placed a
phrase the model would not produce in place.

A second table bans, in each of the first `--banned_sentences`
translations, its longest word (`translate(banned=...)`), once as the one
segmentation the tokenizer gives the word alone and once as its text
(every run of pieces that spells it, `PhraseSpellings`), and counts the
translations that still hold the word.
"""

import os
import re
import sys
import time
import warnings

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from ctranslate2_translation import load_run  # noqa: E402
from ctranslate2_translation import read_test_set  # noqa: E402
from ctranslate2_translation import run_parser  # noqa: E402
from ctranslate2_translation import run_translator  # noqa: E402


def reference_constraints(references, seed=0):
    """One phrase per reference (a word of 4+ letters, or two adjacent
    words), `[]` where the reference has none."""
    import numpy as np

    rng = np.random.default_rng(seed)
    chosen = []
    for i, reference in enumerate(references):
        words = [w for w in re.sub(r"[^\w\s-]", " ", reference).split() if w]
        if i % 2 == 0:
            options = [w for w in words if len(w) >= 4]
        else:
            options = [f"{a} {b}" for a, b in zip(words, words[1:], strict=False)]
        chosen.append([str(rng.choice(options))] if options else [])
    return chosen


def contains(text, phrase):
    return re.search(rf"(?<!\w){re.escape(phrase)}(?!\w)", text) is not None


def has_tail(text):
    return re.search(r"[.!?] \S", text) is not None


def timed(run, passes=2):
    """`(outputs, seconds)`: the faster of `passes` runs after a warm-up."""
    outputs = run()
    seconds = []
    for _ in range(passes):
        start = time.perf_counter()
        outputs = run()
        seconds.append(time.perf_counter() - start)
    return outputs, min(seconds)


def main():

    import sacrebleu
    import tensorflow as tf

    parser = run_parser(__doc__)
    parser.add_argument("--beam_size", type=int, help="default: the run's")
    parser.add_argument("--banned_sentences", type=int, default=200)
    parser.add_argument("--only_banned", action="store_true", help="skip the constraints table")
    args = parser.parse_args()

    sources, references = read_test_set(args)
    model, tokenizer, config = load_run(args.run_dir)
    beam_size = args.beam_size or config["beam_size"]
    translator = run_translator(model, tokenizer, config, beam_size=beam_size)
    if args.only_banned:
        banned_table(translator, sources[: args.banned_sentences])
        return
    constraints = reference_constraints(references)

    def without_any():
        outputs = []
        for i in range(0, len(sources), 64):
            batch = sources[i : i + 64]
            empty = tf.constant([""] * len(batch))
            result = translator.graph.translate_with_constraints(tf.constant(batch), empty, empty)
            outputs += [t.decode() for t in result["translation"].numpy()]
        return outputs

    def constrained():
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)  # counted below
            return translator.translate(sources, constraints=constraints)

    rows = {
        "beam search": lambda: translator.translate(sources),
        "translate_with_constraints, none": without_any,
        "beam search + 1 reference phrase (DBA)": constrained,
    }
    print(
        f"{len(sources)} test sentences, beam {beam_size}, alpha {config['alpha']}, "
        f"batches of 64, {os.cpu_count()} cores; "
        f"{sum(map(len, constraints))} constraints"
    )
    print(
        "| | BLEU | constraints met | tails | same as beam search | sentences/s "
        "| time vs beam search |"
    )
    print("| --- | ---: | ---: | ---: | ---: | ---: | ---: |")
    baseline = None
    for name, run in rows.items():
        outputs, seconds = timed(run)
        baseline = baseline or (outputs, seconds)
        bleu = sacrebleu.corpus_bleu(outputs, [references]).score
        met = sum(
            all(contains(o, p) for p in c) for o, c in zip(outputs, constraints, strict=True) if c
        )
        same = sum(a == b for a, b in zip(outputs, baseline[0], strict=True))
        print(
            f"| {name} | {bleu:.2f} | {met}/{sum(1 for c in constraints if c)} | "
            f"{sum(map(has_tail, outputs))} | {same}/{len(sources)} | "
            f"{len(sources) / seconds:.1f} | {seconds / baseline[1]:.2f}x |",
            flush=True,
        )
    banned_table(translator, sources[: args.banned_sentences])


def banned_table(translator, sources):
    """Each translation's longest word banned, by segmentation and by text,
    with the time of each (the faster of two passes after a warm-up)."""
    import tensorflow as tf

    from keras_transformer.translator.spellings import PhraseSpellings

    free, free_seconds = timed(lambda: translator.translate(sources, batch_size=64))
    words = [max(re.sub(r"[^\w\s-]", " ", t).split() or [""], key=len) for t in free]
    graph, longest = translator.graph, translator.settings.max_output_length - 1
    print(f"\n{len(sources)} translations, each with its longest word banned, batches of 64")
    print(
        "| banned as | translations that still hold the word | changed translations "
        "| time vs beam search |"
    )
    print("| --- | ---: | ---: | ---: |")
    for name, every in (("its one segmentation", False), ("its text (every spelling)", True)):
        spellings = PhraseSpellings(graph.tokenizer, graph.model.target_vocab_size, every)

        def run(spellings=spellings):
            outputs = []
            for i in range(0, len(sources), 64):
                banned = spellings.banned(tf.constant(words[i : i + 64]), longest)
                source = graph.encode_text(tf.constant(sources[i : i + 64]))
                ids, _ = graph.search_ids(source, 1, {"banned": banned})
                outputs += [t.decode() for t in graph.tokenizer.detokenize(ids[:, 0]).numpy()]
            return outputs

        outputs, seconds = timed(run)
        held = sum(bool(w) and contains(o, w) for o, w in zip(outputs, words, strict=True))
        changed = sum(a != b for a, b in zip(outputs, free, strict=True))
        print(
            f"| {name} | {held}/{len(sources)} | {changed}/{len(sources)} "
            f"| {seconds / free_seconds:.2f}x |",
            flush=True,
        )


if __name__ == "__main__":
    main()
