import numpy as np
import pytest
import tensorflow as tf

from keras_transformer import DecodingSettings
from keras_transformer import Translator
from keras_transformer.tokenization import train_sentencepiece
from keras_transformer_runtime import LongInputWarning
from keras_transformer_runtime import length_penalty
from tests.micro import micro_model
from tests.tokenization.helpers import OTHER_IDS
from tests.tokenization.helpers import tokenizer_with_other_ids
from tests.training.helpers import letter_reversal_corpus

pytestmark = pytest.mark.tensorflow_only  # TensorFlow by design


def best_ids(translator, sentences):
    """The search's `(ids, scores)` of `sentences`, in the graph."""
    return translator.graph.search_ids(translator.graph.encode_text(tf.constant(sentences)), 1)


@pytest.fixture
def trained(letter_reverser):
    return letter_reverser.model, letter_reverser.tokenizer


@pytest.fixture(scope="module")
def reverser(letter_reverser):
    """Translators of the trained reverser by beam size (1: greedy), the
    paper's other settings: shared, so that each traces its functions once."""
    model, tokenizer = letter_reverser.model, letter_reverser.tokenizer
    return {beam: Translator(model, tokenizer, beam_size=beam) for beam in (1, 4)}


@pytest.mark.large  # uses the trained letter reverser
@pytest.mark.parametrize("beam_size", [1, 4])
def test_exact_outputs_on_the_learned_task(reverser, beam_size):
    sources, targets = letter_reversal_corpus(40, seed=1)
    assert reverser[beam_size].translate(sources) == targets


@pytest.mark.large  # uses the trained letter reverser
def test_scores_and_n_best(reverser):
    sources, _ = letter_reversal_corpus(6, seed=2)
    text = tf.constant(sources)
    greedy = reverser[1].graph.serving_default(text)
    beam = reverser[4]
    best = beam.graph.serving_default(text)
    n_best = beam.graph.n_best(text)
    assert n_best["translations"].shape == (6, 4)
    np.testing.assert_array_equal(n_best["translations"][:, 0].numpy(), best["translation"].numpy())
    np.testing.assert_allclose(n_best["scores"][:, 0], best["score"], rtol=1e-5)
    assert np.all(np.diff(n_best["scores"].numpy(), axis=1) <= 1e-6)
    # Beam 4's best scores at least as high as greedy under the model.
    assert np.all(best["score"].numpy() >= greedy["score"].numpy() - 1e-4)


@pytest.mark.large  # uses the trained letter reverser
def test_bad_input_never_crashes_or_drops_a_sentence(trained):
    model, tokenizer = trained
    translator = Translator(model, tokenizer, beam_size=2, max_extra_length=5)
    very_long = " ".join(["a"] * 600)  # longer than max_length=256: in pieces
    batch = ["a b c", "", very_long, "日本語 😀 xyz", "a b"]
    with pytest.warns(LongInputWarning, match=r"max_input_length \(256 .*inputs \[2\]\)\.$"):
        outputs = translator.translate(batch, batch_size=3)
    assert len(outputs) == 5
    assert outputs[0] == "c b a" and outputs[4] == "b a"
    assert all(isinstance(o, str) for o in outputs)
    assert translator.graph.serving_default(tf.constant([], tf.string))["translation"].shape == (0,)
    long_ids = translator.graph.encode_text(tf.constant([very_long]))
    assert long_ids.shape[1] == model.max_length


def test_traces_once_for_any_batch(micro_translator):
    sources, _ = letter_reversal_corpus(7, seed=3)
    # The session's translator may have traced already (an export calls the
    # same function inside its own): no batch size traces again.
    serving_default = micro_translator.graph.serving_default
    serving_default(tf.constant(sources[:1]))
    traced = serving_default.experimental_get_tracing_count()
    for n in (1, 3, 7):
        serving_default(tf.constant(sources[:n]))
    assert serving_default.experimental_get_tracing_count() == traced


@pytest.mark.large  # uses the trained letter reverser
def test_runs_under_xla_with_the_same_outputs(reverser):
    translator = reverser[4]
    sources, _ = letter_reversal_corpus(7, seed=3)
    xla = Translator(translator.model, translator.tokenizer, translator.settings, jit_compile=True)
    assert xla.translate(sources) == translator.translate(sources)


@pytest.mark.parametrize(
    "kwargs, name",
    [
        (dict(beam_size=0), "beam_size"),
        (dict(alpha=-1.0), "alpha"),
        (dict(max_extra_length=-1), "max_extra_length"),
        (dict(search="nucleus"), "search"),
        (dict(temperature=0), "temperature"),
        (dict(top_k=-2), "top_k"),
        (dict(top_p=0.0), "top_p"),
    ],
)
def test_bad_arguments(micro_translator, kwargs, name):
    model, tokenizer = micro_translator.model, micro_translator.tokenizer
    with pytest.raises(ValueError, match=f"Received: {name}="):
        Translator(model, tokenizer, **kwargs)


def test_settings_are_given_once_and_resolved_against_the_model(micro_translator):
    model, tokenizer = micro_translator.model, micro_translator.tokenizer
    settings = DecodingSettings(beam_size=2, alpha=0.8)
    translator = Translator(model, tokenizer, settings, min_length=1)
    lengths = dict(max_input_length=model.max_length, max_output_length=model.max_length)
    assert translator.settings == settings.replace(min_length=1, **lengths)
    assert translator.without_xla().settings == translator.settings
    assert micro_translator.settings.to_dict()["beam_size"] == 2
    with pytest.raises(ValueError, match="Received: settings="):
        Translator(model, tokenizer, {"beam_size": 2})
    with pytest.raises(ValueError, match=r"Unknown decoding setting\(s\) \['beam'\]"):
        Translator(model, tokenizer, beam=2)
    with pytest.raises(ValueError, match=f"Received: max_output_length={model.max_length + 1}"):
        Translator(model, tokenizer, max_output_length=model.max_length + 1)


def greedy_reference(model, tokenizer, sentence, max_extra_length):
    """Greedy decoding by full forward passes over one unpadded sentence,
    with the tokenizer's BOS and EOS."""
    source = tokenizer([sentence])[0].numpy().tolist() + [tokenizer.eos_id]
    target = [tokenizer.bos_id]
    limit = len(source) + max_extra_length
    while len(target) <= limit:
        logits = model((np.array([source]), np.array([target])))[0, -1].numpy()
        token = tokenizer.eos_id if len(target) == limit else int(np.argmax(logits))
        target.append(token)
        if token == tokenizer.eos_id:
            break
    return tokenizer.detokenize(np.array(target[1:])).numpy().decode()


def test_model_and_tokenizer_special_ids_are_honoured():
    sentences = ["a b c d e", "j", "f g h i a b", "c c"]
    tokenizer = tokenizer_with_other_ids(sentences * 50, 280)
    model = micro_model(vocab_size=tokenizer.vocab_size, pad_id=OTHER_IDS["pad_id"])
    translator = Translator(model, tokenizer, beam_size=1, max_extra_length=3)
    # A batch pads the short sentences with pad id 3; each must translate
    # exactly as it does alone.
    expected = [greedy_reference(model, tokenizer, s, 3) for s in sentences]
    assert translator.translate(sentences, batch_size=4) == expected
    with pytest.raises(ValueError, match="Received: model.pad_id=0"):
        Translator(micro_model(vocab_size=tokenizer.vocab_size), tokenizer)


def test_vocabularies_of_model_and_tokenizer_are_compared():
    tokenizer = train_sentencepiece(["a b c d e f g h i j"] * 50, 280)
    small = micro_model(vocab_size=tokenizer.vocab_size - 1)
    with pytest.raises(ValueError, match="smaller than the tokenizer's"):
        Translator(small, tokenizer)
    # A larger model: its extra ids are made the most likely of all, and
    # must still never come out (the tokenizer could not detokenize them).
    extra = 30
    model = micro_model(vocab_size=tokenizer.vocab_size + extra)
    table = model.source_embedding.embeddings
    boosted = table.numpy()
    boosted[-extra:] *= 50.0
    table.assign(boosted)
    for beam_size in (1, 3):
        translator = Translator(model, tokenizer, beam_size=beam_size, max_extra_length=4)
        ids, _ = best_ids(translator, ["a b", "c"])
        assert int(tf.reduce_max(ids)) < tokenizer.vocab_size
        assert len(translator.translate(["a b", "c"])) == 2


def log_prob_reference(model, tokenizer, source, target):
    """Per-token log-probabilities of one unpadded pair by one forward pass
    in NumPy, over the tokenizer's vocabulary."""
    source_ids = tokenizer([source])[0].numpy().tolist() + [tokenizer.eos_id]
    target_ids = tokenizer([target])[0].numpy().tolist() + [tokenizer.eos_id]
    decoder_input = [tokenizer.bos_id] + target_ids[:-1]
    logits = model((np.array([source_ids]), np.array([decoder_input])))[0].numpy()
    logits = logits[:, : tokenizer.vocab_size].astype(np.float64)
    shifted = logits - logits.max(axis=-1, keepdims=True)
    log_probs = shifted - np.log(np.exp(shifted).sum(axis=-1, keepdims=True))
    pieces = [tokenizer.id_to_piece(i) for i in target_ids]
    return log_probs[np.arange(len(target_ids)), target_ids], pieces


def test_score_equals_a_forward_pass_per_pair():
    sentences = ["a b c d e", "j", "f g h i a b", "c c", ""]
    targets = ["e d c b a", "j j j j j j j", "", "c", "a"]
    tokenizer = tokenizer_with_other_ids(sentences * 50, 280)
    model = micro_model(vocab_size=tokenizer.vocab_size + 7, pad_id=OTHER_IDS["pad_id"])
    translator = Translator(model, tokenizer, alpha=0.8)
    scores = translator.score(sentences, targets, batch_size=3)
    for source, target, result in zip(sentences, targets, scores, strict=True):
        expected, pieces = log_prob_reference(model, tokenizer, source, target)
        assert result.tokens == pieces and pieces[-1] == "</s>"
        np.testing.assert_allclose(result.token_scores, expected, rtol=1e-4, atol=1e-5)
        np.testing.assert_allclose(result.log_prob, expected.sum(), rtol=1e-4)
        penalty = ((5 + len(pieces)) / 6) ** 0.8
        np.testing.assert_allclose(result.score, expected.sum() / penalty, rtol=1e-4)
    graph = translator.graph.score(tf.constant(sentences), tf.constant(targets))
    width = max(len(result.tokens) for result in scores)
    assert graph["target_tokens"].shape == graph["token_scores"].shape == (5, width)
    assert graph["target_tokens"].numpy()[2].tolist() == [b"</s>"] + [b""] * (width - 1)
    np.testing.assert_array_equal(graph["token_scores"].numpy()[2, 1:], 0.0)


@pytest.mark.large  # uses the trained letter reverser
@pytest.mark.parametrize("beam_size", [1, 4])
def test_score_of_a_search_output_is_its_search_score(reverser, beam_size):
    sources, targets = letter_reversal_corpus(12, seed=4)
    translator = reverser[beam_size]
    searched = translator.graph.serving_default(tf.constant(sources))
    outputs = [t.decode() for t in searched["translation"].numpy()]
    scored = translator.score(sources, outputs)
    np.testing.assert_allclose(
        [s.score for s in scored], searched["score"].numpy(), rtol=1e-4, atol=1e-4
    )
    # The learned output is far likelier than a wrong one.
    wrong = translator.score(sources, [t[::-1] + " a" for t in targets])
    assert all(w.log_prob < s.log_prob - 1.0 for w, s in zip(wrong, scored, strict=True))


def test_score_refuses_unpaired_inputs(micro_translator):
    translator = micro_translator
    with pytest.raises(ValueError, match="one target per source. Received: 2 sources and 1"):
        translator.score(["a b", "c"], ["b a"])
    with pytest.raises(ValueError, match="Received: batch_size=0"):
        translator.score(["a b"], ["b a"], batch_size=0)
    with pytest.raises(tf.errors.InvalidArgumentError, match="differ in length"):
        translator.graph.score(tf.constant(["a", "b"]), tf.constant(["a"]))


@pytest.mark.large  # uses the trained letter reverser
def test_sampling_top_k_one_is_greedy_and_seeds_repeat(trained, reverser):
    model, tokenizer = trained
    sources, _ = letter_reversal_corpus(10, seed=5)
    greedy = reverser[1].graph.serving_default(tf.constant(sources))
    top_one = Translator(model, tokenizer, search="sample", top_k=1, temperature=3.0)
    sampled = top_one.graph.sample(tf.constant(sources), tf.constant(9, tf.int64))
    np.testing.assert_array_equal(sampled["translation"].numpy(), greedy["translation"].numpy())
    np.testing.assert_allclose(sampled["score"].numpy(), greedy["score"].numpy(), rtol=1e-5)
    # Hot sampling: a seed repeats its draws, another seed draws others; the
    # scores are the model's own, as scoring the samples gives them.
    hot = Translator(model, tokenizer, search="sample", temperature=2.0)
    first = hot.translate(sources, batch_size=4, seed=1)
    assert hot.translate(sources, batch_size=4, seed=1) == first
    assert hot.translate(sources, batch_size=4, seed=2) != first
    source_ids = hot.graph.encode_text(tf.constant(sources))
    ids, scores = hot.graph.sample_ids(source_ids, tf.constant(3, tf.int64))
    log_probs = tf.reduce_sum(hot.graph.token_log_probs(source_ids, ids[:, 0]), axis=1).numpy()
    lengths = (ids[:, 0].numpy() != model.pad_id).sum(axis=1)
    expected = log_probs / ((5 + lengths) / 6) ** hot.settings.alpha
    np.testing.assert_allclose(scores[:, 0].numpy(), expected, rtol=1e-4, atol=1e-4)
    assert len({tuple(row) for row in ids[:, 0].numpy()}) > 5
    with pytest.raises(ValueError, match="Received: seed=1"):
        reverser[4].translate(sources, seed=1)
    for seed in (-1, 1.5):
        with pytest.raises(ValueError, match=f"`seed` must be a non-negative integer.*{seed}"):
            hot.translate(sources, seed=seed)


@pytest.mark.large  # uses the trained letter reverser
@pytest.mark.parametrize("beam_size", [1, 4])
def test_prefixes_and_output_length_per_request(trained, reverser, beam_size):
    model, tokenizer = trained
    translator = reverser[beam_size]
    sources, targets = letter_reversal_corpus(8, seed=6)
    text = tf.constant(sources)
    # The learned continuation of the right prefix; a wrong prefix is kept.
    right = [" ".join(t.split()[:2]) for t in targets]
    wrong = ["z y"] * 4 + [""] * 4
    assert translator.translate(sources, prefixes=right) == targets
    outputs = translator.graph.translate_with_options(text, tf.constant(wrong), tf.constant(0))
    texts = [t.decode() for t in outputs["translation"].numpy()]
    assert all(t.startswith("z y") for t in texts[:4]) and texts[4:] == targets[4:]
    # Scores include the prefix: they equal the teacher-forced score of the
    # pieces the search wrote (after a wrong prefix, the text of a poor
    # continuation may tokenize into other pieces: `score` would differ).
    graph = translator.graph
    source_ids = graph.encode_text(text)
    options = {"prefix": graph.encode_prefix(tf.constant(wrong)), "max_output_length": 0}
    ids = graph.best_ids(source_ids, tf.constant(0, tf.int64), options)[0][:, 0]
    forced = graph.token_log_probs(source_ids, ids).numpy().sum(axis=1)
    lengths = (ids.numpy() != model.pad_id).sum(axis=1)
    alpha = translator.settings.alpha
    np.testing.assert_allclose(
        forced / length_penalty(lengths, alpha), outputs["score"].numpy(), atol=1e-4
    )
    plain = translator.graph.serving_default(text)
    no_options = translator.graph.translate_with_options(
        text, tf.constant([""] * 8), tf.constant(0)
    )
    np.testing.assert_array_equal(no_options["translation"].numpy(), plain["translation"].numpy())
    short = translator.translate(sources, max_output_length=3)
    assert all(len(tokenizer([output])[0]) <= 2 for output in short)  # 3 tokens with EOS
    assert any(len(tokenizer([target])[0]) > 2 for target in targets)


@pytest.mark.large  # uses the trained letter reverser
def test_output_controls_in_the_translator(trained, reverser):
    model, tokenizer = trained
    sources = ["a a a a a a", "b", "c d c d c d"]
    plain = reverser[4]
    controlled = Translator(model, tokenizer, beam_size=4, min_length=6, no_repeat_ngram_size=2)
    assert controlled.settings.min_length == 6
    plain_ids = best_ids(plain, sources)[0][:, 0].numpy()
    ids = best_ids(controlled, sources)[0][:, 0].numpy()

    def tokens(row):
        return [t for t in row.tolist() if t != model.pad_id][:-1]  # EOS dropped

    def repeats(t):
        return len(set(zip(t, t[1:], strict=False))) < len(t) - 1

    assert any(len(tokens(r)) < 6 or repeats(tokens(r)) for r in plain_ids)
    assert all(len(tokens(r)) >= 6 and not repeats(tokens(r)) for r in ids)
    with pytest.raises(ValueError, match="Received: repetition_penalty=0.5"):
        Translator(model, tokenizer, repetition_penalty=0.5)
    with pytest.raises(ValueError, match="Received: max_output_length=257"):
        Translator(model, tokenizer, max_output_length=257)


@pytest.mark.large  # uses the trained letter reverser
def test_alignments_on_the_reversal_task(trained, reverser):
    """Alignments are the argmax of a layer's mean cross-attention (checked
    against `model.attention_scores` for each layer), and on the trained
    reversal task the default (last) layer aligns a target letter with the
    source letter it copies. Which layer aligns is a result of training:
    over seven trainings the last layer aligned 94-100% of tokens, the
    first 66-100%; the threshold is 90% of the last layer's."""
    model, tokenizer = trained
    sources, targets = letter_reversal_corpus(40, seed=7)
    translator = reverser[4]
    results = translator.translate(sources, batch_size=16, return_alignments=True)
    assert [r.translation for r in results] == targets
    aligned = tokens = 0
    for source, result in zip(sources, results, strict=True):
        letters = len(source.split())
        # One piece per letter here, then EOS: target token i (a letter)
        # copies source letter n - 1 - i, and EOS follows EOS.
        assert len(result.source_tokens) == len(result.target_tokens) == letters + 1
        expected = list(range(letters - 1, -1, -1)) + [letters]
        aligned += sum(a == e for a, e in zip(result.alignments, expected, strict=True))
        tokens += len(expected)
    assert aligned >= 0.9 * tokens, (aligned, tokens)
    text = tf.constant(sources[:3])
    source_ids = translator.graph.encode_text(text).numpy()
    # Held in a name: a tf.function method keeps only a weak reference.
    first_layer = Translator(model, tokenizer, alignment_layer=0)
    for layer, aligning in ((0, first_layer), (-1, translator)):  # -1: the default
        outputs = aligning.graph.translate_with_alignments(text)
        alignments = outputs["alignments"].numpy()
        assert alignments.shape == outputs["target_tokens"].shape
        for row, source_row in enumerate(source_ids):
            length = int((outputs["target_tokens"].numpy()[row] != b"").sum())  # EOS included
            target = tokenizer([outputs["translation"].numpy()[row]])[0].numpy().tolist()
            target += [tokenizer.eos_id]
            assert len(target) == length
            decoder_input = np.array([[tokenizer.bos_id] + target[:-1]])
            cross = model.attention_scores(source_row[None], decoder_input)["cross"][layer]
            mean = np.mean(cross.numpy()[0], axis=0)  # (target, source)
            expected = np.argmax(mean, axis=-1)
            assert alignments[row, :length].tolist() == expected.tolist()
            assert (alignments[row, length:] == -1).all()
            # The whole attention, whose argmax the alignments are.
            attention = outputs["attention"].numpy()[row]
            np.testing.assert_allclose(attention[:length], mean, atol=1e-5)
            assert (attention[length:] == 0).all()
    for result in results:
        assert len(result.attention) == len(result.target_tokens)
        for row, most in zip(result.attention, result.alignments, strict=True):
            assert len(row) == len(result.source_tokens)
            assert abs(sum(row) - 1) < 1e-4 and int(np.argmax(row)) == most
    # Each token's log-probability, as scoring the translation gives it.
    scored = translator.score(sources, [r.translation for r in results])
    for result, score in zip(results, scored, strict=True):
        assert result.target_tokens == score.tokens
        np.testing.assert_allclose(result.token_scores, score.token_scores, atol=1e-5)
    with pytest.raises(ValueError, match="Received: alignment_layer=2"):
        Translator(model, tokenizer, alignment_layer=2)
    with pytest.raises(ValueError, match="return_alignments"):
        translator.translate(sources, prefixes=sources, return_alignments=True)


def test_token_scores_sum_to_the_searchs_log_probability(micro_translator):
    # Teacher-forced log-probabilities of the output against the cached
    # search's own, which scored the same tokens one step at a time.
    sources = ["a b c", "", "d e f g h i", "j"]
    results = micro_translator.translate(sources, return_alignments=True)
    scores = micro_translator.graph.serving_default(tf.constant(sources))["score"].numpy()
    alpha = micro_translator.settings.alpha
    for result, score in zip(results, scores, strict=True):
        assert len(result.token_scores) == len(result.target_tokens)
        log_prob = score * length_penalty(len(result.target_tokens), alpha)
        np.testing.assert_allclose(sum(result.token_scores), log_prob, rtol=1e-5, atol=1e-5)
        words = result.word_scores
        np.testing.assert_allclose(
            sum(w for _, w in words) + result.token_scores[-1], log_prob, rtol=1e-5, atol=1e-5
        )


@pytest.mark.large  # uses the trained letter reverser
@pytest.mark.parametrize("beam_size", [1, 4])
def test_banned_phrases_stay_out_of_the_translations(reverser, beam_size):
    translator = reverser[beam_size]
    sources, targets = letter_reversal_corpus(60, seed=17)
    banned = [["c b", "j"] if i % 2 else [] for i in range(len(sources))]
    outputs = translator.translate(sources, batch_size=16, banned=banned)
    hit = 0
    for output, target, phrases in zip(outputs, targets, banned, strict=True):
        words = output.split()
        assert "j" not in words or not phrases
        assert not phrases or all(words[i : i + 2] != ["c", "b"] for i in range(len(words)))
        bound = phrases and ("j" in target.split() or " c b" in f" {target} ")
        hit += bool(bound)
        if not bound:  # the phrases do not bind: the translation is the unbanned one
            assert output == target
    assert hit >= 5  # the test bans what the model would output


def test_terms_refuse_other_options_and_encode_as_target_pieces(micro_translator):
    with pytest.raises(ValueError, match="`banned` must hold one list of phrases per sentence"):
        micro_translator.translate(["a", "b"], banned=[["x"]])
    with pytest.raises(ValueError, match="`constraints` and `banned` work with beam search"):
        micro_translator.translate(["a"], constraints=[["x"]], prefixes=["y"])
    with pytest.raises(ValueError, match="without '\\|\\|\\|'. Received: 'a \\|\\|\\| b'"):
        micro_translator.translate(["a"], constraints=[["a ||| b"]])
    with pytest.raises(ValueError, match="other than spaces. Received: ' '"):
        micro_translator.translate(["a", "b"], constraints=[["a"], [" "]])
    micro_translator.translate(["a"], banned=[[" "]])  # bans nothing, harmlessly
    # Phrases right-aligned, -1 before them; none: one column of -1.
    ids = micro_translator.graph.encode_phrases(tf.constant(["a b |||  c", "", "d"])).numpy()
    pieces = micro_translator.tokenizer.tokenize_target(tf.constant(["a b", "c", "d"])).to_list()
    assert ids.shape == (3, 2, 1 + len(pieces[0]))
    assert ids[0, 0, -len(pieces[0]) :].tolist() == pieces[0]
    assert ids[0, 1, -len(pieces[1]) :].tolist() == pieces[1]
    assert ids[2, 0, -len(pieces[2]) :].tolist() == pieces[2]
    assert (ids[1] == -1).all() and (ids[:, :, 0] == -1).all()
    assert micro_translator.graph.encode_phrases(tf.constant(["", ""])).numpy().shape == (2, 1, 1)


@pytest.mark.large  # uses the trained letter reverser
def test_constraints_appear_in_the_translations(reverser):
    translator = reverser[4]  # at least one more than the constraint tokens
    sources, targets = letter_reversal_corpus(40, seed=23)
    rng = np.random.default_rng(0)
    constraints = []
    for i, source in enumerate(sources):
        absent = [c for c in "abcdefghij" if c not in source.split()]
        constraints.append([] if i % 4 == 0 else [str(rng.choice(absent))])
    constraints[1] = ["j a", "b"]
    result = translator.graph.translate_with_constraints(
        tf.constant(sources),
        tf.constant([" ||| ".join(c) for c in constraints]),
        tf.constant([""] * len(sources)),
    )
    assert result["constraints_met"].numpy().all()
    assert not result["truncated"].numpy().any()  # short sources (cut ones: test_documents)
    outputs = [t.decode() for t in result["translation"].numpy()]
    for output, target, phrases in zip(outputs, targets, constraints, strict=True):
        for phrase in phrases:
            assert f" {phrase} " in f" {output} "
        if not phrases:  # nothing to meet: the unconstrained translation
            assert output == target
    assert translator.translate(sources, constraints=constraints) == outputs


def test_markup_refuses_other_options_and_keeps_every_tag(micro_translator):
    with pytest.raises(ValueError, match="`format` must be one of 'text', 'html', 'markdown'"):
        micro_translator.translate(["a"], format="rtf")
    with pytest.raises(ValueError, match="`format='html'` works with beam search"):
        micro_translator.translate(["a"], format="html", prefixes=["b"])
    with pytest.raises(ValueError, match="`format='markdown'` works with beam search"):
        micro_translator.translate(["a"], format="markdown", return_alignments=True)
    # An untrained model: whatever it writes, the page keeps its markup.
    page = '<p>A <b>dog <i>runs</i></b> <a href="x.html">home</a>.</p><pre>a  b</pre>'
    (found,) = micro_translator.translate([page], format="html")
    for tag in ("<p>", "<b>", "<i>", "</i>", "</b>", '<a href="x.html">', "</a>", "</p>"):
        assert found.count(tag) == 1, (tag, found)
    assert found.endswith("<pre>a  b</pre>")
