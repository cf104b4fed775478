import dataclasses
import json

import pytest

from keras_transformer_runtime import DecodingSettings


def test_defaults_are_the_papers_beam_search():
    settings = DecodingSettings()
    assert (settings.search, settings.beam_size, settings.alpha) == ("beam", 4, 0.6)
    assert settings.max_extra_length == 50  # §6.1: input length + 50
    assert (settings.max_input_length, settings.max_output_length) == (None, None)
    assert settings.split_sentences  # texts are split into sentences


def test_an_export_written_before_split_sentences_existed_splits():
    recorded = {"beam_size": 2, "max_input_length": 64}  # no split_sentences
    assert DecodingSettings.from_dict(recorded).split_sentences
    off = DecodingSettings(split_sentences=False)
    assert DecodingSettings.from_dict(json.loads(json.dumps(off.to_dict()))) == off


@pytest.mark.parametrize(
    "changes, name",
    [
        (dict(search="nucleus"), "search"),
        (dict(beam_size=0), "beam_size"),
        (dict(beam_size=True), "beam_size"),
        (dict(alpha=-1.0), "alpha"),
        (dict(max_extra_length=-1), "max_extra_length"),
        (dict(max_input_length=0), "max_input_length"),
        (dict(max_output_length=2.5), "max_output_length"),
        (dict(temperature=0), "temperature"),
        (dict(top_k=-2), "top_k"),
        (dict(top_p=0.0), "top_p"),
        (dict(top_p=1.5), "top_p"),
        (dict(min_length=-1), "min_length"),
        (dict(no_repeat_ngram_size=1.5), "no_repeat_ngram_size"),
        (dict(repetition_penalty=0.5), "repetition_penalty"),
        (dict(split_sentences=1), "split_sentences"),
        (dict(split_sentences="yes"), "split_sentences"),
    ],
)
def test_bad_values_name_the_setting(changes, name):
    with pytest.raises(ValueError, match=f"Received: {name}="):
        DecodingSettings(**changes)
    with pytest.raises(ValueError, match=f"Received: {name}="):
        DecodingSettings().replace(**changes)


def test_round_trip_through_an_exports_json_file():
    settings = DecodingSettings(beam_size=2, alpha=1, max_input_length=64, top_p=0.9)
    recorded = json.loads(json.dumps({**settings.to_dict(), "quantization": "int8"}))
    assert DecodingSettings.from_dict(recorded) == settings  # other keys are left out
    assert list(settings.to_dict()) == list(DecodingSettings.names())
    # Numbers are written as floats whatever they were given as.
    assert recorded["alpha"] == 1.0 and isinstance(settings.alpha, float)


def test_replace_changes_only_what_it_names_and_refuses_unknown_names():
    settings = DecodingSettings(beam_size=2)
    changed = settings.replace(alpha=0.0, min_length=3)
    assert (changed.beam_size, changed.alpha, changed.min_length) == (2, 0.0, 3)
    assert settings.alpha == 0.6  # frozen: the original is unchanged
    with pytest.raises(ValueError, match=r"Unknown decoding setting\(s\) \['beam'\]"):
        settings.replace(beam=3)
    with pytest.raises(dataclasses.FrozenInstanceError):
        settings.beam_size = 3
