import io

import numpy as np
import pytest

from keras_transformer_runtime import in_length_order
from keras_transformer_runtime import length_penalty


@pytest.mark.parametrize("length, alpha", [(1, 0.6), (7, 0.6), (30, 1.0), (12, 0.0)])
def test_length_penalty_is_gnmts_formula(length, alpha):
    np.testing.assert_allclose(length_penalty(length, alpha), ((5 + length) / 6) ** alpha)


def test_batches_hold_items_of_similar_size_and_results_come_back_in_order(monkeypatch):
    rng = np.random.default_rng(0)
    sizes = rng.integers(1, 50, 23).tolist()
    batches = []

    def run(chunk):
        batches.append(list(chunk))
        return [f"item {i}" for i in chunk]

    stderr = io.StringIO()
    monkeypatch.setattr("sys.stderr", stderr)
    results = in_length_order(len(sizes), sizes.__getitem__, run, 5, progress="working")
    assert results == [f"item {i}" for i in range(len(sizes))]
    assert [len(b) for b in batches] == [5, 5, 5, 5, 3]
    # Sorted by size: no batch holds an item smaller than one before it.
    flat = [sizes[i] for batch in batches for i in batch]
    assert flat == sorted(sizes)
    assert "working: 23/23 sentences" in stderr.getvalue()
    with pytest.raises(ValueError, match="Received: batch_size=0"):
        in_length_order(3, sizes.__getitem__, run, 0)


def test_parallel_batches_run_at_once_and_come_back_in_order():
    import threading

    sizes = [7, 1, 5, 3, 9, 2, 8, 4]

    def meeting(timeout):
        """A `run` whose batch waits for another to start: only batches
        run at once pass."""
        barrier = threading.Barrier(2, timeout=timeout)

        def run(chunk):
            barrier.wait()
            return [f"item {i}" for i in chunk]

        return run

    results = in_length_order(len(sizes), sizes.__getitem__, meeting(10), 2, parallel=2)
    assert results == [f"item {i}" for i in range(len(sizes))]
    with pytest.raises(threading.BrokenBarrierError):  # in turn, the first waits alone
        in_length_order(len(sizes), sizes.__getitem__, meeting(0.2), 2)
    run = meeting(10)
    with pytest.raises(ValueError, match="Received: parallel=0"):
        in_length_order(3, sizes.__getitem__, run, 1, parallel=0)


def test_word_scores_sum_each_words_pieces():
    from keras_transformer_runtime.runners.results import word_scores

    tokens = ["▁Ein", "▁Hund", ".", "▁läuft", "</s>"]
    assert word_scores(tokens, [-1.0, -2.0, -0.5, -0.25, -0.125]) == [
        ("Ein", -1.0),
        ("Hund.", -2.5),
        ("läuft", -0.25),
    ]
    # A first piece without the boundary starts a word; EOS alone: no word.
    assert word_scores(["Hund", "▁x", "</s>"], [-1.0, -2.0, -3.0]) == [("Hund", -1.0), ("x", -2.0)]
    assert word_scores(["</s>"], [-0.5]) == []


def test_a_hypothesis_without_token_scores_has_no_word_scores():
    from keras_transformer_runtime import Hypothesis

    # A SavedModel's serving_default gives text and score only.
    assert Hypothesis(translation="Ein Hund.", score=-0.5).word_scores == []
    scored = Hypothesis("Ein Hund.", -0.5, -0.6, ["▁Ein", "▁Hund", ".", "</s>"], [-1, -2, -3, -4])
    assert scored.word_scores == [("Ein", -1.0), ("Hund.", -5.0)]


def test_words_are_the_detokenized_texts_with_byte_pieces_decoded(tmp_path):
    """With a byte-fallback vocabulary, "Café" and "München" are spelled
    partly in byte pieces; the words are the detokenized text's."""
    import sentencepiece

    from keras_transformer_runtime.runners.results import word_scores

    corpus = tmp_path / "corpus.txt"
    corpus.write_text("Ein Hund in Berlin.\nEin Mann im Park.\nZwei Kinder spielen.\n" * 20)
    prefix = str(tmp_path / "spm")
    sentencepiece.SentencePieceTrainer.train(
        input=str(corpus), model_prefix=prefix, vocab_size=300, byte_fallback=True,
        character_coverage=1.0, hard_vocab_limit=False,
    )  # fmt: skip
    processor = sentencepiece.SentencePieceProcessor(model_file=prefix + ".model")
    for text in ("Ein Café in München.", "Zwei 😀 im Park!", "Ünd ä."):
        pieces = processor.encode(text, out_type=str)
        assert any(p.startswith("<0x") for p in pieces)  # the case at hand
        scores = [-1.0] * (len(pieces) + 1)
        words = word_scores([*pieces, "</s>"], scores)
        assert [word for word, _ in words] == processor.decode(pieces).split(" "), pieces
        assert sum(score for _, score in words) == -len(pieces)
