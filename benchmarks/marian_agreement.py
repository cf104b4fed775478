"""How exactly an imported Marian model reproduces Hugging Face's, on
Multi30k, without downloading anything.

    python benchmarks/marian_agreement.py --data_dir ../shared/data/multi30k

Builds a Marian directory as the tests do (`tests/pretrained/
marian_directory.py`), but from Multi30k: two SentencePiece models on the
training sentences, `vocab.json` in Marian's layout, a `MarianMTModel`
trained `--train_steps` Adam steps on the pairs (so that its outputs vary
as a translator's do), a random `final_logits_bias`, then
`save_pretrained`. It then imports the directory with `load_marian` and
prints one table:

* tokenizer: our in-graph ids against `MarianTokenizer`'s, source and
  target side, on `--sentences` test sentences plus emoji, mixed scripts,
  unknown characters and language codes; detokenization against its
  `decode(skip_special_tokens=True)` on the target ids;
* logits: teacher-forced, the largest difference on validation pairs;
* greedy and beam 4 (`alpha=0` against `length_penalty=0`; and our
  default `alpha=0.6` against Hugging Face's default 1.0): outputs equal
  token for token to `generate` (with `alpha=0`, only hypotheses that run
  to the length limit can differ: Hugging Face's forced EOS counts as
  certain, ours as EOS's log-probability);
* the SavedModel (session loader, as TF Serving) against `Translator`;
* our CTranslate2 export against CTranslate2's own `TransformersConverter`
  of the same directory (greedy).
"""

import argparse
import os
import sys
import time

from script_workers import scratch_directory

from keras_transformer_runtime.text import files as text_files

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
sys.path.insert(0, ROOT)

AWKWARD = [
    "",
    "Emoji 😀 here 🐕!",
    "Mixed Καλημέρα мир 世界 straße",
    "Unknown characters: ∮ ⅀ ꙮ \u200b",
    "tab\there\nnewline",
    ">>deu<< A dog runs.",
    ">>xxx<< an unknown code",
    "ÄÖÜ ß é É ñ ç",
]


def agreement(ours, theirs):
    same = sum(a == b for a, b in zip(ours, theirs, strict=True))
    return f"{same}/{len(theirs)}"


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--data_dir", default=os.path.join(ROOT, "..", "shared", "data", "multi30k")
    )
    parser.add_argument("--sentences", type=int, default=1000, help="tokenizer sentences")
    parser.add_argument("--searches", type=int, default=200, help="sentences searched")
    parser.add_argument("--train_steps", type=int, default=1500)
    args = parser.parse_args()

    import numpy as np
    import tensorflow as tf
    import torch
    import transformers

    from keras_transformer import Translator
    from keras_transformer.export import export_ctranslate2
    from keras_transformer.export import export_saved_model
    from keras_transformer.pretrained import load_marian
    from tests.pretrained.marian_directory import generate
    from tests.pretrained.marian_directory import searched
    from tests.pretrained.marian_directory import write_marian_directory

    train_en = text_files.read_lines(os.path.join(args.data_dir, "train.en.gz"))
    train_de = text_files.read_lines(os.path.join(args.data_dir, "train.de.gz"))
    val_en = text_files.read_lines(os.path.join(args.data_dir, "val.en.gz"))
    val_de = text_files.read_lines(os.path.join(args.data_dir, "val.de.gz"))
    test_en = text_files.read_lines(os.path.join(args.data_dir, "test_2016_flickr.en.gz"))
    test_de = text_files.read_lines(os.path.join(args.data_dir, "test_2016_flickr.de.gz"))
    work = scratch_directory("marian_agreement-")
    directory = os.path.join(work, "marian")
    started = time.time()
    import pathlib

    hf_model = write_marian_directory(
        pathlib.Path(directory), train_en[:20000], train_de[:20000], learning_rate=1e-3,
        source_vocab_size=2000, target_vocab_size=2500, d_model=64, num_heads=4, ffn_dim=256,
        encoder_layers=2, decoder_layers=2, max_positions=256, train_steps=args.train_steps,
        language_codes=(">>deu<<", ">>fra<<"),
    )  # fmt: skip
    print(f"built and trained the Marian model in {time.time() - started:.0f} s", file=sys.stderr)
    hf_tokenizer = transformers.MarianTokenizer.from_pretrained(directory)
    pretrained = load_marian(directory)
    tokenizer, rows = pretrained.tokenizer, []

    # Tokenizer.
    texts = test_en[: args.sentences] + AWKWARD
    targets = test_de[: args.sentences] + AWKWARD
    ours = tokenizer.tokenize(texts).to_list()
    theirs = [hf_tokenizer(text)["input_ids"][:-1] for text in texts]
    rows.append(("source ids = MarianTokenizer's", agreement(ours, theirs)))
    ours = tokenizer.tokenize_target(targets).to_list()
    theirs = [hf_tokenizer(text_target=text)["input_ids"][:-1] for text in targets]
    rows.append(("target ids = MarianTokenizer's", agreement(ours, theirs)))
    decoded = [t.decode() for t in tokenizer.detokenize(tf.ragged.constant(theirs)).numpy()]
    expected = [hf_tokenizer.decode(ids, skip_special_tokens=True) for ids in theirs]
    rows.append(("detokenize = MarianTokenizer.decode", agreement(decoded, expected)))

    # Teacher-forced logits, 200 validation pairs in batches of 25.
    worst, pad = 0.0, hf_tokenizer.pad_token_id
    for start in range(0, 200, 25):
        batch = hf_tokenizer(
            val_en[start : start + 25], text_target=val_de[start : start + 25],
            return_tensors="pt", padding=True,
        )  # fmt: skip
        with torch.no_grad():
            reference = hf_model(**batch).logits.numpy()
        labels = batch["labels"].numpy()
        decoder_input = np.concatenate(
            [np.full((len(labels), 1), tokenizer.bos_id), labels[:, :-1]], axis=1
        )
        logits = np.asarray(pretrained.model((batch["input_ids"].numpy(), decoder_input)))
        mask = labels != pad
        worst = max(worst, float(np.abs(logits[..., :-1] - reference)[mask].max()))
    rows.append(
        (
            "teacher-forced logits on 200 validation pairs, largest absolute difference",
            f"{worst:.1e}",
        )
    )

    # Searches against generate, one sentence at a time (no padding effects).
    sources = val_en[200 : 200 + args.searches]
    extra = 50

    def ours(beam_size, alpha):
        translator = Translator(
            pretrained.model, tokenizer, beam_size=beam_size, alpha=alpha, max_extra_length=extra
        )
        return searched(translator, sources)

    for label, beam, alpha, penalty in (
        ("greedy = generate(num_beams=1)", 1, 0.0, 1.0),
        ("beam 4, alpha 0 = generate(num_beams=4, length_penalty=0)", 4, 0.0, 0.0),
        ("beam 4, alpha 0.6 = generate(num_beams=4) (length_penalty 1.0)", 4, 0.6, 1.0),
    ):
        theirs = generate(hf_model, hf_tokenizer, sources, beam, extra, penalty)
        rows.append((label, agreement(ours(beam, alpha), theirs)))

    # The SavedModel through the session loader, as TF Serving runs it.
    translator = Translator(pretrained.model, tokenizer, beam_size=4)
    expected = translator.translate(sources)
    path = export_saved_model(translator, os.path.join(work, "export"))
    served = session_translations(path, sources)
    rows.append(("SavedModel (session loader) = Translator, beam 4", agreement(served, expected)))

    # CTranslate2: our export against its converter, greedy.
    import ctranslate2

    from keras_transformer_runtime import CTranslate2Translator

    greedy = Translator(pretrained.model, tokenizer, beam_size=1, max_extra_length=extra)
    export_ctranslate2(greedy, os.path.join(work, "ours_ct2"))
    ctranslate2.converters.TransformersConverter(directory).convert(os.path.join(work, "ct2"))
    converted = ctranslate2.Translator(os.path.join(work, "ct2"))
    tokens = [hf_tokenizer.convert_ids_to_tokens(hf_tokenizer(s)["input_ids"]) for s in sources]
    results = []
    for source_tokens in tokens:
        (result,) = converted.translate_batch(
            [source_tokens], beam_size=1, max_decoding_length=len(source_tokens) + extra - 1
        )
        ids = hf_tokenizer.convert_tokens_to_ids(result.hypotheses[0])
        results.append(hf_tokenizer.decode(ids, skip_special_tokens=True))
    ours = CTranslate2Translator(os.path.join(work, "ours_ct2")).translate(sources, batch_size=1)
    rows.append(
        ("our CTranslate2 export = TransformersConverter's, greedy", agreement(ours, results))
    )
    rows.append(
        (
            "Translator greedy = TransformersConverter's",
            agreement(greedy.translate(sources), results),
        )
    )

    print(
        f"\nMarian model: {pretrained.model.count_params():,} weights (d_model 64, 2+2 layers), "
        f"{tokenizer.vocab_size - 1:,}-piece vocabulary, trained {args.train_steps} steps on "
        f"Multi30k; transformers {transformers.__version__}, CTranslate2 "
        f"{ctranslate2.__version__}\n"
    )
    print("| check | agreement |")
    print("| --- | ---: |")
    for check, value in rows:
        print(f"| {check} | {value} |")


def session_translations(path, sentences):
    """`serving_default` of the SavedModel at `path` through the TF1
    session loader (TF Serving's), batches of 64."""
    import tensorflow as tf

    outputs = []
    with tf.compat.v1.Session(graph=tf.Graph()) as session:
        meta_graph = tf.compat.v1.saved_model.load(session, ["serve"], path)
        signature = meta_graph.signature_def["serving_default"]
        text = signature.inputs["text"].name
        translation = signature.outputs["translation"].name
        for start in range(0, len(sentences), 64):
            batch = sentences[start : start + 64]
            result = session.run(translation, {text: batch})
            outputs += [t.decode("utf-8") for t in result]
    return outputs


if __name__ == "__main__":
    main()
