import io
import json
import os
import sys
import warnings

import numpy as np
import pytest
import tensorflow as tf

from keras_transformer import Transformer
from keras_transformer import Translator
from keras_transformer.export import ctranslate2 as ct2_export
from keras_transformer_runtime import CTranslate2Translator
from keras_transformer_runtime.runners.ctranslate2 import SETTINGS_FILE
from keras_transformer_runtime.translate import main as translate_main
from tests.export.random_models import random_model
from tests.export.runtime_process import translate_in_a_process
from tests.training.helpers import letter_reversal_corpus

pytestmark = pytest.mark.tensorflow_only  # TensorFlow by design

ctranslate2 = pytest.importorskip(
    "ctranslate2", reason='CTranslate2 is an optional extra: pip install -e ".[ctranslate2]"'
)


@pytest.mark.parametrize(
    "options",
    [
        dict(),
        dict(norm_first=True, position_encoding="learned", tie_embeddings="none"),
        dict(tie_embeddings="target", num_decoder_layers=3),
    ],
    ids=["paper", "pre_norm_learned_untied", "target_tied_deeper_decoder"],
)
def test_scores_equal_the_teacher_forced_forward_pass(words_tokenizer, tmp_path, options):
    tokenizer, sentences = words_tokenizer
    model = random_model(**options)
    translator = Translator(model, tokenizer, alpha=0.6)
    ct2_export.export_ctranslate2(translator, tmp_path / "ct2")
    converted = CTranslate2Translator(tmp_path / "ct2")
    sources, targets = sentences[:12], sentences[12:24]
    ours, theirs = translator.score(sources, targets), converted.score(sources, targets)
    for a, b in zip(ours, theirs, strict=True):
        assert a.tokens == b.tokens
        np.testing.assert_allclose(b.token_scores, a.token_scores, atol=1e-4)
        np.testing.assert_allclose(b.score, a.score, atol=1e-4)
    with open(tmp_path / "ct2" / SETTINGS_FILE) as f:
        settings = json.load(f)
    assert settings == {
        **translator.settings.to_dict(),
        "quantization": "float32",
        "source_eos": True,
        "model_max_length": 64,
        "tokenizer": "sentencepiece",
        "languages": [],  # a model of one language pair
    }
    # An export written before the tokenizer's kind was recorded still loads.
    del settings["tokenizer"]
    with open(tmp_path / "ct2" / SETTINGS_FILE, "w") as f:
        json.dump(settings, f)
    earlier = CTranslate2Translator(tmp_path / "ct2").score(sources, targets)
    assert [s.tokens for s in earlier] == [s.tokens for s in theirs]


def test_a_target_is_scored_as_the_translator_truncates_it(words_tokenizer, tmp_path):
    """`max_output_length` limits translations, not the targets scored:
    both runtimes truncate a long target to the model's `max_length`."""
    tokenizer, sentences = words_tokenizer
    translator = Translator(random_model(), tokenizer, max_output_length=8)
    ct2_export.export_ctranslate2(translator, tmp_path / "ct2")
    converted = CTranslate2Translator(tmp_path / "ct2")
    long = " ".join(sentences[:12])  # more than 8 pieces, fewer than 64
    ours, theirs = translator.score([sentences[0]], [long]), converted.score([sentences[0]], [long])
    assert len(ours[0].tokens) > 8
    assert theirs[0].tokens == ours[0].tokens
    np.testing.assert_allclose(theirs[0].token_scores, ours[0].token_scores, atol=1e-4)


def _our_hypotheses(translator, sources):
    """Our best output per source as `(pieces with EOS, score)`."""
    source_ids = translator.graph.encode_text(tf.constant(sources))
    ids, scores = translator.graph.search_ids(source_ids, 1)
    outputs = []
    for row, score in zip(ids[:, 0].numpy(), scores[:, 0].numpy(), strict=True):
        pieces = [translator.tokenizer.id_to_piece(i) for i in row if i != translator.pad_id]
        outputs.append((pieces, float(score)))
    return outputs


@pytest.mark.large  # uses the trained letter reverser
@pytest.mark.parametrize("beam_size", [1, 4])
def test_trained_model_decodes_like_the_translator(letter_reverser, tmp_path, beam_size):
    translator = Translator(letter_reverser.model, letter_reverser.tokenizer, beam_size=beam_size)
    ct2_export.export_ctranslate2(translator, tmp_path / "ct2")
    converted = CTranslate2Translator(tmp_path / "ct2", compute_type="float32")
    sources, _ = letter_reversal_corpus(200, seed=11)
    ours = _our_hypotheses(translator, sources)
    theirs = [h[0] for h in converted.translate_with_scores(sources, batch_size=50)]
    same = [i for i in range(len(sources)) if ours[i][0] == theirs[i].tokens]
    differences = [
        (sources[i], ours[i], (theirs[i].tokens, theirs[i].score))
        for i in range(len(sources))
        if i not in same
    ]
    assert len(same) >= 0.98 * len(sources), differences
    np.testing.assert_allclose(
        [theirs[i].score for i in same], [ours[i][1] for i in same], atol=1e-3
    )
    assert converted.translate(sources[:3]) == translator.translate(sources[:3])


@pytest.mark.parametrize("beam_size", [1, 4])
def test_outputs_stopped_by_the_length_limit_are_ours(words_tokenizer, tmp_path, beam_size):
    # Random weights almost never choose EOS: every output runs to its
    # limit, where our searches force EOS. One sentence per call, so
    # CTranslate2's per-call limit is the sentence's own.
    tokenizer, sentences = words_tokenizer
    translator = Translator(random_model(), tokenizer, beam_size=beam_size, max_extra_length=4)
    ct2_export.export_ctranslate2(translator, tmp_path / "ct2")
    converted = CTranslate2Translator(tmp_path / "ct2")
    sources = sentences[:6]
    ours = _our_hypotheses(translator, sources)
    theirs = [h[0] for h in converted.translate_with_scores(sources, batch_size=1)]
    assert [o[0] for o in ours] == [t.tokens for t in theirs]
    np.testing.assert_allclose([t.score for t in theirs], [o[1] for o in ours], atol=1e-4)


def test_bulk_batches_follow_the_threads(words_tokenizer, tmp_path):
    # Several threads share a large batch's rows.
    tokenizer, _ = words_tokenizer
    ct2_export.export_ctranslate2(Translator(random_model(), tokenizer), tmp_path / "ct2")
    assert CTranslate2Translator(tmp_path / "ct2", intra_threads=1).bulk_batch_size == 64
    assert CTranslate2Translator(tmp_path / "ct2", intra_threads=2).bulk_batch_size == 256


def test_server_workers_share_one_translator_that_runs_their_calls_side_by_side(
    words_tokenizer, tmp_path
):
    """`load_runners` for 2 workers: one runner, CTranslate2 with 2
    `inter_threads` (one copy of the weights); calls from 2 threads at once
    give what each gives alone."""
    import threading

    from keras_transformer_runtime.serve import load_runners

    tokenizer, _ = words_tokenizer
    ct2_export.export_ctranslate2(Translator(random_model(), tokenizer), tmp_path / "ct2")
    runners = load_runners(str(tmp_path / "ct2"), workers=2, threads=1)
    assert len(runners) == 2 and runners[0] is runners[1]
    assert runners[0].translator.num_translators == 2  # inter_threads
    batches = [["a b c", "d e"], ["e d c b", "a"]]
    alone = [runners[0].translate(batch) for batch in batches]
    together = [None, None]

    def work(index):
        together[index] = runners[index].translate(batches[index])

    threads = [threading.Thread(target=work, args=(i,)) for i in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert together == alone
    # One call's batches, two at once on the two translators: as in turn.
    sentences = [s for batch in batches for s in batch]
    one_call = runners[0].translate(sentences, batch_size=1)
    assert one_call == [runners[0].translate([s])[0] for s in sentences]


@pytest.mark.large  # uses the trained letter reverser
def test_int8_export_still_reverses(letter_reverser, tmp_path):
    translator = Translator(letter_reverser.model, letter_reverser.tokenizer)
    ct2_export.export_ctranslate2(translator, tmp_path / "int8", quantization="int8")
    assert json.loads((tmp_path / "int8" / SETTINGS_FILE).read_text())["quantization"] == ("int8")
    converted = CTranslate2Translator(tmp_path / "int8")
    sources, targets = letter_reversal_corpus(100, seed=12)
    outputs = converted.translate(sources)
    assert np.mean([o == t for o, t in zip(outputs, targets, strict=True)]) >= 0.9
    float32 = (tmp_path / "int8" / "model.bin").stat().st_size
    ct2_export.export_ctranslate2(translator, tmp_path / "float32")
    assert float32 < 0.5 * (tmp_path / "float32" / "model.bin").stat().st_size


def test_bad_input_is_refused_and_a_failed_export_keeps_the_old_one(
    words_tokenizer, tmp_path, monkeypatch
):
    tokenizer, _ = words_tokenizer
    translator = Translator(random_model(), tokenizer)
    with pytest.raises(ValueError, match="`quantization` must be one of"):
        ct2_export.export_ctranslate2(translator, tmp_path / "a", quantization="int4")
    narrow = Transformer(vocab_size=300, num_layers=1, d_model=32, num_heads=4, d_ff=64, key_dim=4)
    with pytest.raises(ValueError, match="key_dim == value_dim == d_model / num_heads"):
        ct2_export.export_ctranslate2(Translator(narrow, tokenizer), tmp_path / "b")

    target = tmp_path / "model"
    ct2_export.export_ctranslate2(translator, target)
    before = (target / "model.bin").read_bytes()
    with pytest.raises(ValueError, match="exists and is not empty"):
        ct2_export.export_ctranslate2(translator, target)

    def broken_save(self, output_dir):
        raise OSError("disk full")

    monkeypatch.setattr(ctranslate2.specs.TransformerSpec, "save", broken_save)
    with pytest.raises(OSError, match="disk full"):
        ct2_export.export_ctranslate2(translator, target, overwrite=True)
    monkeypatch.undo()
    assert (target / "model.bin").read_bytes() == before
    assert sorted(os.listdir(tmp_path)) == ["model"]  # no staging left behind

    with pytest.raises(ValueError, match="is not an export of `export_ctranslate2`"):
        CTranslate2Translator(tmp_path)
    with pytest.raises(
        ValueError, match=r"Unknown decoding setting\(s\) \['beam'\].*Received: beam=2"
    ):
        CTranslate2Translator(target, beam=2)
    with pytest.raises(ValueError, match="`n_best` must be between 1 and the beam size"):
        CTranslate2Translator(target).translate_with_scores(["a"], n_best=5)
    for seed in (-1, 2**32, 1.5):
        with pytest.raises(ValueError, match=r"`seed` must be an integer in \[0, 4294967295\]"):
            CTranslate2Translator(target).sample(["a"], seed=seed)

    monkeypatch.setitem(sys.modules, "ctranslate2", None)
    advice = r"pip install 'keras-transformer-runtime\[ctranslate2\]'"
    with pytest.raises(ImportError, match=advice):
        ct2_export.export_ctranslate2(translator, tmp_path / "c")


@pytest.mark.large  # starts a Python process
def test_the_runtime_translates_in_a_process_without_tensorflow(words_tokenizer, tmp_path):
    """What a CPU inference server runs: `keras_transformer_runtime` alone,
    neither TensorFlow nor Keras nor keras_transformer imported."""
    tokenizer, sentences = words_tokenizer
    translator = Translator(random_model(), tokenizer, beam_size=2, max_extra_length=4)
    ct2_export.export_ctranslate2(translator, tmp_path / "ct2")
    sources = sentences[:3]
    expected = CTranslate2Translator(tmp_path / "ct2").translate_with_scores(sources)
    ran = translate_in_a_process("CTranslate2Translator", tmp_path / "ct2", sources)
    assert ran["imported"] == []
    assert ran["translations"] == [h[0].translation for h in expected]
    np.testing.assert_allclose(ran["scores"], [h[0].score for h in expected], atol=1e-5)


def _run_cli(monkeypatch, capsysbinary, args, stdin):
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(stdin.encode())))
    assert translate_main(args) == 0
    return capsysbinary.readouterr().out.decode().splitlines()


@pytest.mark.large  # uses the trained letter reverser
def test_command_line(letter_reverser, tmp_path, monkeypatch, capsysbinary):
    translator = Translator(letter_reverser.model, letter_reverser.tokenizer)
    directory = str(tmp_path / "ct2")
    ct2_export.export_ctranslate2(translator, directory)
    converted = CTranslate2Translator(directory)
    sources, targets = letter_reversal_corpus(3, seed=13)
    stdin = "".join(s + "\n" for s in sources)
    run = lambda *args, stdin=stdin: _run_cli(  # noqa: E731
        monkeypatch, capsysbinary, ["--ctranslate2_dir", directory, *args], stdin
    )
    assert run() == targets
    lines = run("--n_best", "2", "--with_scores")
    best = converted.translate_with_scores(sources, n_best=2)
    assert lines == [
        f"{number}\t{h.score:.4f}\t{h.translation}"
        for number, options in enumerate(best, 1)
        for h in options
    ]
    scored = run(
        "--mode",
        "score",
        stdin="".join(f"{s}\t{t}\n" for s, t in zip(sources, targets, strict=True)),
    )
    expected = translator.score(sources, targets)
    assert [float(line.split("\t")[1]) for line in scored] == pytest.approx(
        [s.log_prob for s in expected], abs=1e-3
    )
    with_tokens = run("--with_token_scores")
    tokens = converted.translate_with_scores(sources, token_scores=True)
    assert with_tokens == [
        f"{h[0].translation}\t" + " ".join(f"{v:.4f}" for v in h[0].token_scores) for h in tokens
    ]
    samples = run("--mode", "sample", "--n_best", "3", "--seed", "5")
    assert len(samples) == 9 and samples == run("--mode", "sample", "--n_best", "3", "--seed", "5")
    assert '"beam_size": 4' in "\n".join(run("--info"))


def test_documented_differences_are_what_the_runtime_does(words_tokenizer, tmp_path):
    """The README's table of differences: a hypothesis stopped by the
    length limit under repetition_penalty warns that its score ignores the
    controls; an empty source gets the empty translation as each n-best."""
    tokenizer, sentences = words_tokenizer
    translator = Translator(random_model(), tokenizer, beam_size=2, max_extra_length=1)
    ct2_export.export_ctranslate2(translator, tmp_path / "ct2")
    plain = CTranslate2Translator(tmp_path / "ct2")
    penalized = CTranslate2Translator(tmp_path / "ct2", repetition_penalty=1.5)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no controls: no warning
        plain.translate(sentences[:4])
    with pytest.warns(RuntimeWarning, match="without repetition_penalty and no_repeat_ngram_size"):
        penalized.translate(sentences[:4])  # a random model runs to the limit
    (empty,) = plain.translate_with_scores([""], n_best=2)
    assert [h.translation for h in empty] == ["", ""] and empty[0] == empty[1]
    expected = plain.score([""], [""])[0]
    assert empty[0].log_prob == pytest.approx(expected.log_prob, abs=1e-4)


def test_token_scores_sum_to_each_hypothesis_log_probability(words_tokenizer, tmp_path):
    tokenizer, sentences = words_tokenizer
    translator = Translator(random_model(), tokenizer, beam_size=3, max_extra_length=4)
    ct2_export.export_ctranslate2(translator, tmp_path / "ct2")
    converted = CTranslate2Translator(tmp_path / "ct2")
    plain = converted.translate_with_scores(sentences[:8], n_best=2)
    scored = converted.translate_with_scores(sentences[:8], n_best=2, token_scores=True)
    for options, scored_options in zip(plain, scored, strict=True):
        for h, s in zip(options, scored_options, strict=True):
            assert (s.translation, s.tokens, h.token_scores) == (h.translation, h.tokens, [])
            assert len(s.token_scores) == len(s.tokens)
            np.testing.assert_allclose(sum(s.token_scores), s.log_prob, atol=1e-4)
    # As the model scores the same pieces teacher-forced (ours, in the graph).
    best = scored[0][0]
    ids = [[tokenizer.piece_to_id(p) for p in best.tokens]]
    source = translator.graph.encode_text(tf.constant(sentences[:1]))
    expected = translator.model_search.token_log_probs(source, tf.constant(ids, tf.int32))
    np.testing.assert_allclose(best.token_scores, expected.numpy()[0], atol=1e-4)


@pytest.mark.parametrize("beam_size", [1, 4])
def test_no_search_chooses_pad_or_bos(words_tokenizer, tmp_path, beam_size):
    """Every TensorFlow search masks PAD and BOS; CTranslate2's did not,
    and an untrained model's best hypotheses started with `<s>` (29 of 40):
    tokens, scores and rankings then differed from every other runtime.
    Its scores stay the model's log-probabilities, as ours."""
    tokenizer, sentences = words_tokenizer
    translator = Translator(random_model(), tokenizer, beam_size=beam_size, max_extra_length=4)
    ct2_export.export_ctranslate2(translator, tmp_path / "ct2")
    converted = CTranslate2Translator(tmp_path / "ct2")
    assert set(converted.pieces.never_generated) == {"<pad>", "<s>"}
    sources = sentences[:40]
    # One sentence per call: CTranslate2's length limit is per call (a documented difference).
    theirs = converted.translate_with_scores(sources, n_best=beam_size, batch_size=1)
    chosen = {token for options in theirs for h in options for token in h.tokens}
    assert not chosen & {"<pad>", "<s>"}
    sampled = converted.sample(sources[:10], num_samples=2)
    assert not {t for options in sampled for h in options for t in h.tokens} & {"<pad>", "<s>"}
    ours = _our_hypotheses(translator, sources)
    assert [o[0] for o in ours] == [options[0].tokens for options in theirs]
    np.testing.assert_allclose(
        [options[0].score for options in theirs], [o[1] for o in ours], atol=1e-4
    )


def test_the_export_aligns_with_the_models_alignment_heads(words_tokenizer, tmp_path):
    """A model that aligns with its first layer's first head (as guided
    alignment trains it): CTranslate2's attention rows are `Translator`'s,
    which differ from the mean of every head of the last layer."""
    tokenizer, sentences = words_tokenizer
    model = random_model(alignment_layer=0, alignment_heads=1)
    translator = Translator(model, tokenizer, beam_size=2)
    ct2_export.export_ctranslate2(translator, tmp_path / "ct2")
    converted = CTranslate2Translator(tmp_path / "ct2")
    sources = sentences[:16]  # a random model: some near ties break apart
    ours = translator.translate(sources, return_alignments=True)
    theirs = converted.translate_with_alignments(sources)
    every_head = random_model()  # the same weights, aligning as by default
    every_head.set_weights(model.get_weights())
    default = Translator(every_head, tokenizer, beam_size=2)
    everyone = default.translate(sources, return_alignments=True)
    compared = differs = 0
    for a, b, c in zip(ours, theirs, everyone, strict=True):
        if a.translation != b.translation:
            continue
        compared += 1
        np.testing.assert_allclose(np.array(b.attention), np.array(a.attention), atol=1e-3)
        if a.translation == c.translation:
            differs += not np.allclose(np.array(a.attention), np.array(c.attention), atol=1e-3)
    assert compared >= 6 and differs >= 3, (compared, differs)
