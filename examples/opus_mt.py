"""Import a pretrained OPUS-MT (Marian) translator, translate, export.

    # Once, with internet access (pip install -e ".[pretrained]"):
    hf download Helsinki-NLP/opus-mt-en-de --local-dir opus-mt-en-de

    # Offline from here on: import, translate, export for TF Serving.
    python examples/opus_mt.py --marian_dir opus-mt-en-de \\
        --export_dir exports/opus-mt-en-de "A dog runs through the snow."
    echo "How are you?" | kt-translate \\
        --model exports/opus-mt-en-de

Reads the Hugging Face directory with `keras_transformer.pretrained.
load_marian` (no PyTorch needed for model.safetensors), translates the
sentences given as arguments (or stdin's lines) with the model's beam
size, and with `--export_dir` writes the self-contained SavedModel (the
two SentencePiece models and the vocabulary inside), with
`--ctranslate2_dir` the CTranslate2 export. Multi-target models take the
target language as the source's first token: ">>fra<< A dog runs.".
"""

import argparse
import os
import sys

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import keras_transformer as kt  # noqa: E402
from keras_transformer.pretrained import load_marian  # noqa: E402


def main(argv=None):
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("sentences", nargs="*", help="sentences to translate (default: stdin)")
    parser.add_argument("--marian_dir", required=True, help="a Hugging Face MarianMT directory")
    parser.add_argument("--export_dir", help="write a SavedModel for TF Serving here")
    parser.add_argument("--ctranslate2_dir", help="write a CTranslate2 export here")
    parser.add_argument("--beam_size", type=int, help="default: the model's num_beams")
    parser.add_argument("--batch_size", type=int, default=32)
    args = parser.parse_args(argv)
    try:
        pretrained = load_marian(args.marian_dir)
    except ValueError as error:
        parser.error(f"--marian_dir: {error}")
    settings = pretrained.settings
    if args.beam_size:
        settings = settings.replace(beam_size=args.beam_size)
    translator = kt.Translator(pretrained.model, pretrained.tokenizer, settings)
    print(
        f"{args.marian_dir}: {pretrained.model.count_params():,} weights, "
        f"{pretrained.tokenizer.vocab_size:,} ids, beam {settings.beam_size}",
        file=sys.stderr,
    )
    sentences = args.sentences
    if not sentences and not (args.export_dir or args.ctranslate2_dir):
        sentences = [line.rstrip("\n") for line in sys.stdin]
    for translation in translator.translate(sentences, args.batch_size):
        print(translation)
    if args.export_dir:
        path = kt.export.export_saved_model(translator, args.export_dir)
        print(f"export: {path}", file=sys.stderr)
    if args.ctranslate2_dir:
        kt.export.export_ctranslate2(translator, args.ctranslate2_dir, overwrite=True)
        print(f"CTranslate2 export: {args.ctranslate2_dir}", file=sys.stderr)


if __name__ == "__main__":
    main()
