"""Markup through translation, measured: where a tag lands, whether every
tag comes back, what the tags cost in quality and time.

    python benchmarks/markup_placement.py --ctranslate2_dir exports/multi30k_ct2 \\
        --test_src data/multi30k/test_2016_flickr.en.gz \\
        --test_ref data/multi30k/test_2016_flickr.de.gz

The evaluation set: each test sentence holding exactly one of `WORDS`
(English nouns of the Multi30k domain with one clear German translation,
checked by hand, each with its inflected forms) whose reference holds
exactly one of its translation's forms. That word is wrapped in `<b>`, and
the sentence translated as HTML. A sentence counts for placement where the
translation holds exactly one of the forms: it is placed when `<b>` wraps
that word and nothing else.

Rows: each runner with its alignments (the cross-attention of the
model's alignment heads, summed by word and matched one to one:
`attention_matching`; a model trained with `--guided_alignment` aligns
with one head trained towards eflomal's links), the same with the argmax per target piece
only (how runners aligned before, and how an export without the
attention output still does), and placing tags by position (what a
runner without alignments does), the baseline. Columns:

* `set`: sentences in the evaluation set; `word kept`: those whose
  translation holds the word's translation once (placement is measured
  on them); `placed`: of those, the share whose tag wraps exactly it;
* `tags kept`: outputs holding exactly the input's tags, of all;
* `BLEU plain` / `BLEU tagged`: sacreBLEU of the set translated as text,
  and as HTML with the tags taken out of the outputs;
* `text s` / `html s`: seconds to translate the set (the fastest of three
  passes after a warm-up), and the overhead of HTML.
"""

import argparse
import dataclasses
import re
import time

from keras_transformer_runtime.text import formats
from keras_transformer_runtime.text.files import read_lines
from keras_transformer_runtime.text.words import WORD

# English word -> the German forms of its one clear translation.
WORDS = {
    "man": {"Mann", "Mannes"},
    "woman": {"Frau"},
    "men": {"Männer", "Männern"},
    "women": {"Frauen"},
    "dog": {"Hund", "Hundes"},
    "dogs": {"Hunde", "Hunden"},
    "girl": {"Mädchen"},
    "boy": {"Junge", "Jungen"},
    "child": {"Kind", "Kindes"},
    "children": {"Kinder", "Kindern"},
    "street": {"Straße"},
    "water": {"Wasser"},
    "ball": {"Ball", "Balls"},
    "hat": {"Hut"},
    "bicycle": {"Fahrrad", "Fahrrads"},
    "bike": {"Fahrrad", "Fahrrads"},
    "beach": {"Strand"},
    "snow": {"Schnee"},
    "grass": {"Gras"},
    "car": {"Auto", "Autos"},
    "table": {"Tisch"},
    "guitar": {"Gitarre"},
    "camera": {"Kamera"},
    "building": {"Gebäude", "Gebäudes"},
    "horse": {"Pferd", "Pferdes"},
    "baby": {"Baby", "Babys"},
    "wall": {"Wand", "Mauer"},
    "tree": {"Baum"},
    "city": {"Stadt"},
    "river": {"Fluss"},
    "sand": {"Sand"},
    "jacket": {"Jacke"},
    "dress": {"Kleid"},
    "boat": {"Boot"},
    "field": {"Feld"},
    "mountain": {"Berg"},
    "window": {"Fenster"},
    "stage": {"Bühne"},
    "park": {"Park"},
    "music": {"Musik"},
    "kitchen": {"Küche"},
    "cat": {"Katze"},
    "bird": {"Vogel"},
    "fire": {"Feuer"},
    "lake": {"See"},
    "basketball": {"Basketball"},
    "soccer": {"Fußball"},
    "microphone": {"Mikrofon"},
    "helmet": {"Helm"},
    "skateboard": {"Skateboard"},
}
TAG = re.compile(r"<[^>]+>")
WRAPPED = re.compile(r"<b>(.*?)</b>", re.S)


@dataclasses.dataclass(frozen=True)
class Case:
    """One sentence of the set: the plain source, the tagged one, the
    reference, and the German forms the tag should wrap."""

    source: str
    tagged: str
    reference: str
    forms: frozenset


def words(text):
    return [m.group() for m in WORD.finditer(text)]


def evaluation_set(sources, references):
    """The `Case`s of the test set (see the module's docstring)."""
    cases = []
    for source, reference in zip(sources, references, strict=True):
        found = [w for w in words(source) if w.lower() in WORDS]
        if len(found) != 1 or sum(w.lower() == found[0].lower() for w in words(source)) != 1:
            continue
        forms = frozenset(WORDS[found[0].lower()])
        if sum(w in forms for w in words(reference)) != 1:
            continue
        match = next(m for m in WORD.finditer(source) if m.group() == found[0])
        tagged = f"{source[: match.start()]}<b>{match.group()}</b>{source[match.end() :]}"
        cases.append(Case(source, tagged, reference, forms))
    return cases


def scored(cases, plain, tagged):
    """The row's numbers for the plain and tagged translations."""
    import sacrebleu

    kept = [
        (case, page)
        for case, text, page in zip(cases, plain, tagged, strict=True)
        if sum(w in case.forms for w in words(text)) == 1
    ]
    placed = 0
    for case, page in kept:
        wrapped = words(" ".join(WRAPPED.findall(page)))
        placed += len(wrapped) == 1 and wrapped[0] in case.forms
    tags_kept = sum(TAG.findall(t) == ["<b>", "</b>"] for t in tagged)
    stripped = [TAG.sub("", t) for t in tagged]
    references = [[c.reference for c in cases]]
    return {
        "word kept": len(kept),
        "placed": placed / max(len(kept), 1),
        "tags kept": tags_kept,
        "BLEU plain": sacrebleu.corpus_bleu(plain, references).score,
        "BLEU tagged": sacrebleu.corpus_bleu(stripped, references).score,
    }


def timed(call, passes=3):
    """`(result, seconds)`: the faster of `passes` calls after a warm-up."""
    call()
    best, result = None, None
    for _ in range(passes):
        start = time.perf_counter()
        result = call()
        seconds = time.perf_counter() - start
        best = seconds if best is None else min(best, seconds)
    return result, best


def aligned_html(runner):
    """Translates pages with the runner's alignments (`format="html"`):
    words matched on the whole attention (`attention_matching`)."""
    return lambda texts: runner.translate(texts, format="html")


def argmax_html(runner):
    """Translates pages with each target piece's most attended source piece
    only (the runner's alignments without their `attention`), as runners
    aligned before the matching."""

    def translate(texts):
        def aligned(segments, target_lang=None):
            found = runner.translate_with_alignments(segments, target_lang=target_lang)
            return [dataclasses.replace(a, attention=[]) for a in found]

        found = formats.of("html").translate(texts, None, None, aligned)
        return [document.translation for document in found]

    return translate


def positional_html(runner):
    """Translates pages placing markup by position, as a runner without
    alignments does (`formats.Markup.translate` without `aligned`)."""

    def translate(texts):
        plain = lambda segments, target_lang: runner.translate(segments)  # noqa: E731
        found = formats.of("html").translate(texts, None, plain, None)
        return [document.translation for document in found]

    return translate


def rows(args):
    """`(label, runner, html translation)` of each row."""
    from keras_transformer_runtime import CTranslate2Translator

    found = []
    if args.ctranslate2_dir:
        ct2 = CTranslate2Translator(
            args.ctranslate2_dir, inter_threads=args.inter_threads, intra_threads=1
        )
        found += _rows_of(f"CTranslate2 (inter {args.inter_threads} x intra 1)", ct2)
    if args.saved_model_dir:
        from keras_transformer_runtime import SavedModelTranslator

        saved = SavedModelTranslator(args.saved_model_dir)
        found += _rows_of("SavedModel", saved)
    if args.litert_model:
        from keras_transformer_runtime import LiteRTTranslator

        found += _rows_of("LiteRT (2 threads)", LiteRTTranslator(args.litert_model, 2))
    if args.onnx_model:
        from keras_transformer_runtime import ONNXTranslator

        found += _rows_of("ONNX Runtime (intra 2 x inter 1)", ONNXTranslator(args.onnx_model, 2))
    return found


def _rows_of(name, runner):
    return [
        (f"{name}, matched on attention", runner, aligned_html(runner)),
        (f"{name}, attention argmax", runner, argmax_html(runner)),
        (f"{name}, by position", runner, positional_html(runner)),
    ]


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--ctranslate2_dir")
    parser.add_argument("--saved_model_dir")
    parser.add_argument("--litert_model", help="an export_litert .tflite file")
    parser.add_argument("--onnx_model", help="an export_onnx .onnx file")
    parser.add_argument("--test_src", required=True)
    parser.add_argument("--test_ref", required=True)
    parser.add_argument("--inter_threads", type=int, default=2)
    args = parser.parse_args()
    exports = (args.ctranslate2_dir, args.saved_model_dir, args.litert_model, args.onnx_model)
    if not any(exports):
        parser.error("give one export or more: --ctranslate2_dir, --saved_model_dir, ...")
    cases = evaluation_set(read_lines(args.test_src), read_lines(args.test_ref))
    print(f"evaluation set: {len(cases)} sentences with one tagged word of {len(WORDS)}\n")
    columns = "row, set, word kept, placed, tags kept, BLEU plain, BLEU tagged, text s, html s"
    print("| " + " | ".join(columns.split(", ")) + " |")
    print("|" + " --- |" * len(columns.split(", ")))
    for label, runner, translate_html in rows(args):
        plain, text_seconds = timed(lambda r=runner: r.translate([c.source for c in cases]))
        tagged, html_seconds = timed(lambda t=translate_html: t([c.tagged for c in cases]))
        row = scored(cases, plain, tagged)
        overhead = 100 * (html_seconds / text_seconds - 1)
        print(
            f"| {label} | {len(cases)} | {row['word kept']} | {100 * row['placed']:.1f}% | "
            f"{row['tags kept']} of {len(cases)} | {row['BLEU plain']:.2f} | "
            f"{row['BLEU tagged']:.2f} | {text_seconds:.2f} | {html_seconds:.2f} "
            f"({overhead:+.0f}%) |"
        )


if __name__ == "__main__":
    main()
