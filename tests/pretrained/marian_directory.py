"""Random Marian models saved as Hugging Face does, with their tokenizer
files: the oracle of the import tests and of `benchmarks/marian_agreement.py`.

Nothing is downloaded: two SentencePiece models are trained on the given
sentences, `vocab.json` is laid out as Marian's (`</s>` 0, `<unk>` 1, the
pieces of both models, `<pad>` last), and a `MarianMTModel` with random
weights (and a random `final_logits_bias`) is saved with
`save_pretrained`.
"""

import io
import json
import random

import sentencepiece

# Word i of one list translates to word i of the other.
WORDS_EN = (
    "a the dog cat man woman child runs sits on in red blue big small street park ball".split()
)
WORDS_DE = (
    "ein der Hund Katze Mann Frau Kind läuft sitzt auf im rot blau groß klein Straße Park Ball"
).split()


def generated_pairs(count, seed=0):
    """`(sources, targets)`: `count` made-up sentence pairs."""
    rng = random.Random(seed)
    sources, targets = [], []
    for _ in range(count):
        n = rng.randint(2, 9)
        picks = [rng.randrange(len(WORDS_EN)) for _ in range(n)]
        sources.append(" ".join(WORDS_EN[i] for i in picks).capitalize() + rng.choice(".!?"))
        targets.append(" ".join(WORDS_DE[i] for i in picks).capitalize() + rng.choice(".!?"))
    return sources, targets


def _spm(sentences, vocab_size):
    model = io.BytesIO()
    sentencepiece.SentencePieceTrainer.train(
        sentence_iterator=iter(sentences),
        model_writer=model,
        vocab_size=vocab_size,
        hard_vocab_limit=False,
        minloglevel=2,
    )
    return model.getvalue()


def marian_vocab(source_proto, target_proto, language_codes=()):
    """Marian's layout: `</s>` 0, `<unk>` 1, language codes, the pieces of
    both models (source first, each once), `<pad>` last."""
    pieces = ["</s>", "<unk>", *language_codes]
    for proto in (source_proto, target_proto):
        processor = sentencepiece.SentencePieceProcessor(model_proto=proto)
        for i in range(processor.get_piece_size()):
            if processor.is_control(i) or processor.is_unknown(i):
                continue
            piece = processor.id_to_piece(i)
            if piece not in pieces:
                pieces.append(piece)
    pieces.append("<pad>")
    return {piece: i for i, piece in enumerate(pieces)}


def write_marian_directory(
    directory,
    sources,
    targets,
    source_vocab_size=200,
    target_vocab_size=220,
    share_embeddings=True,
    tie_output=True,
    activation="swish",
    encoder_layers=2,
    decoder_layers=1,
    d_model=16,
    num_heads=2,
    ffn_dim=32,
    max_positions=64,
    train_steps=150,
    learning_rate=3e-3,
    language_codes=(),
    seed=0,
):
    """Writes a Marian model and its tokenizer into `directory`: random
    weights, then `train_steps` Adam steps on the pairs (so that outputs
    vary in length and content as a translator's do), then a random
    `final_logits_bias` and a zero pad embedding (as OPUS-MT models have).
    Returns the `MarianMTModel` (eval mode).
    """
    import torch
    from transformers import MarianConfig
    from transformers import MarianMTModel
    from transformers import MarianTokenizer

    directory.mkdir(parents=True, exist_ok=True)
    source_proto = _spm(sources, source_vocab_size)
    target_proto = _spm(targets, target_vocab_size)
    vocab = marian_vocab(source_proto, target_proto, language_codes)
    (directory / "source.spm").write_bytes(source_proto)
    (directory / "target.spm").write_bytes(target_proto)
    (directory / "vocab.json").write_text(json.dumps(vocab, ensure_ascii=False))
    pad = len(vocab) - 1
    config = MarianConfig(
        vocab_size=len(vocab),
        decoder_vocab_size=len(vocab),
        d_model=d_model,
        encoder_layers=encoder_layers,
        decoder_layers=decoder_layers,
        encoder_attention_heads=num_heads,
        decoder_attention_heads=num_heads,
        encoder_ffn_dim=ffn_dim,
        decoder_ffn_dim=ffn_dim,
        activation_function=activation,
        max_position_embeddings=max_positions,
        pad_token_id=pad,
        eos_token_id=0,
        decoder_start_token_id=pad,
        forced_eos_token_id=0,  # as OPUS-MT's: EOS at the length limit
        scale_embedding=True,
        share_encoder_decoder_embeddings=share_embeddings,
        tie_word_embeddings=tie_output,
        dropout=0.1,
    )
    torch.manual_seed(seed)
    model = MarianMTModel(config)
    if train_steps:
        _train(model, sources, targets, directory, train_steps, learning_rate, seed)
    model.eval()
    with torch.no_grad():
        model.final_logits_bias.copy_(0.3 * torch.randn(model.final_logits_bias.shape))
        # OPUS-MT's pad embedding is zero: Marian starts decoding from a zero
        # vector, which the conversion to Hugging Face's format gave the pad id.
        for embedding in (model.model.encoder.embed_tokens, model.model.decoder.embed_tokens):
            embedding.weight[pad] = 0.0
    model.generation_config.bad_words_ids = [[pad]]  # as OPUS-MT's generation configs
    model.save_pretrained(directory)
    MarianTokenizer(
        str(directory / "source.spm"), str(directory / "target.spm"), str(directory / "vocab.json")
    ).save_pretrained(directory)
    return MarianMTModel.from_pretrained(directory).eval()


def _train(model, sources, targets, directory, steps, learning_rate, seed):
    from transformers import MarianTokenizer

    tokenizer = MarianTokenizer(
        str(directory / "source.spm"), str(directory / "target.spm"), str(directory / "vocab.json")
    )
    import torch

    optimizer = torch.optim.Adam(model.parameters(), lr=learning_rate)
    warmup = max(1, min(200, steps // 10))
    schedule = torch.optim.lr_scheduler.LambdaLR(
        optimizer, lambda step: min(1.0, (step + 1) / warmup)
    )
    rng = random.Random(seed)
    model.train()
    for _ in range(steps):
        picks = [rng.randrange(len(sources)) for _ in range(32)]
        batch = tokenizer(
            [sources[i] for i in picks],
            text_target=[targets[i] for i in picks],
            return_tensors="pt",
            padding=True,
        )
        batch["labels"] = batch["labels"].masked_fill(
            batch["labels"] == tokenizer.pad_token_id, -100
        )
        loss = model(**batch).loss
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        schedule.step()


def generate(hf_model, hf_tokenizer, sources, num_beams, extra, length_penalty=0.0):
    """Hugging Face's outputs, one sentence at a time, cut at EOS (id 0,
    kept), with the limit of our searches: source length (EOS included) +
    `extra` tokens."""
    import torch

    outputs = []
    for source in sources:
        batch = hf_tokenizer([source], return_tensors="pt")
        with torch.no_grad():
            ids = hf_model.generate(
                **batch,
                num_beams=num_beams,
                do_sample=False,
                length_penalty=length_penalty,
                early_stopping=False,
                max_new_tokens=batch["input_ids"].shape[1] + extra,
            )[0, 1:].tolist()  # less the start (pad) token
        outputs.append(ids[: ids.index(0) + 1] if 0 in ids else ids)
    return outputs


def searched(translator, sources):
    """`translator`'s search of `sources` (one batch) as `generate`
    returns Hugging Face's: ids without BOS and padding, cut at EOS."""
    ids, _ = translator.graph.search_ids(translator.graph.encode_text(sources), 1)
    tokenizer = translator.tokenizer
    rows = []
    for row in ids.numpy()[:, 0].tolist():
        row = [i for i in row if i not in (tokenizer.bos_id, tokenizer.pad_id)]
        rows.append(row[: row.index(0) + 1] if 0 in row else row)
    return rows
