"""The outputs of `Translator`'s signatures as Python results."""

from keras_transformer_runtime.results import AlignedTranslation
from keras_transformer_runtime.results import TargetScore


def _text(value):
    return value.decode("utf-8", errors="replace")


def target_scores(outputs):
    """`score_targets`' outputs as `TargetScore`s, one per pair."""
    outputs = {key: value.numpy() for key, value in outputs.items()}
    results = []
    for row, tokens in enumerate(outputs["target_tokens"]):
        length = int((tokens != b"").sum())
        results.append(
            TargetScore(
                log_prob=float(outputs["log_prob"][row]),
                score=float(outputs["score"][row]),
                tokens=[_text(piece) for piece in tokens[:length]],
                token_scores=outputs["token_scores"][row, :length].tolist(),
            )
        )
    return results


def aligned_translations(outputs):
    """`translate_with_alignments`' outputs as `AlignedTranslation`s."""
    outputs = {key: value.numpy() for key, value in outputs.items()}

    def strings(row):
        return [_text(piece) for piece in row if piece]

    results = []
    for row, translation in enumerate(outputs["translation"]):
        target_tokens = strings(outputs["target_tokens"][row])
        results.append(
            AlignedTranslation(
                translation=_text(translation),
                target_tokens=target_tokens,
                source_tokens=strings(outputs["source_tokens"][row]),
                alignments=outputs["alignments"][row, : len(target_tokens)].tolist(),
                token_scores=outputs["token_scores"][row, : len(target_tokens)].tolist(),
            )
        )
    return results
