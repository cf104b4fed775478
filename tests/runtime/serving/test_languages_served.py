"""A multilingual model served: `/info` lists its languages for the page,
`/translate` and TF Serving's predict take `target_lang` (one for all or
one per text), requests for different languages share a batch with each
sentence tagged with its own, and an unknown language is a 400 naming the
model's."""

import concurrent.futures

import pytest
from starlette.testclient import TestClient

from keras_transformer_runtime.serving.app import Server
from tests.runtime.text.test_languages import TaggedReverser

PREDICT = "/v1/models/many:predict"


@pytest.fixture
def served():
    runner = TaggedReverser()
    server = Server([runner], model_name="many", batch_timeout_ms=300)
    with TestClient(server.app) as client:
        yield client, runner


def reversed_tagged(text, code):
    return f">>{code}<< {text}"[::-1]


def test_the_page_is_given_the_languages(served):
    client, _ = served
    assert client.get("/info").json()["languages"] == ["cs", "de", "fr"]
    inputs = client.get("/v1/models/many/metadata").json()["metadata"]["signature_def"]
    assert set(inputs["signature_def"]["serving_default"]["inputs"]) == {"text", "target_lang"}


def test_translate_takes_one_language_or_one_per_text(served):
    client, runner = served
    body = {"text": ["A dog. A cat.", "A cow."], "target_lang": "fr"}
    found = [t["translation"] for t in client.post("/translate", json=body).json()["translations"]]
    assert found == [
        reversed_tagged("A dog.", "fr") + " " + reversed_tagged("A cat.", "fr"),
        reversed_tagged("A cow.", "fr"),
    ]
    body = {"text": ["A dog.", "A cow."], "target_lang": ["de", "cs"]}
    found = [t["translation"] for t in client.post("/translate", json=body).json()["translations"]]
    assert found == [reversed_tagged("A dog.", "de"), reversed_tagged("A cow.", "cs")]


def test_predict_takes_target_lang_per_instance_or_as_a_column(served):
    client, _ = served
    rows = {"instances": [{"text": "ab", "target_lang": "de"}, {"text": "cd", "target_lang": "fr"}]}
    columns = {"inputs": {"text": ["ab", "cd"], "target_lang": ["de", "fr"]}}
    expected = [reversed_tagged("ab", "de"), reversed_tagged("cd", "fr")]
    assert [p["translation"] for p in client.post(PREDICT, json=rows).json()["predictions"]] == (
        expected
    )
    assert client.post(PREDICT, json=columns).json()["outputs"]["translation"] == expected


def test_requests_for_different_languages_share_a_batch(served):
    client, runner = served
    bodies = [{"text": [f"s{i}"], "target_lang": code} for i, code in enumerate("de fr cs".split())]
    with concurrent.futures.ThreadPoolExecutor(3) as pool:
        answers = list(pool.map(lambda body: client.post("/translate", json=body), bodies))
    assert [a.json()["translations"][0]["translation"] for a in answers] == [
        reversed_tagged(f"s{i}", code) for i, code in enumerate("de fr cs".split())
    ]
    assert sorted(map(len, runner.calls)) != [1, 1, 1]  # fewer batches than requests


@pytest.mark.parametrize(
    "path, body, message",
    [
        ("/translate", {"text": ["a"], "target_lang": "es"}, "knows: 'cs', 'de', 'fr'"),
        ("/translate", {"text": ["a"]}, "pass `target_lang`"),
        ("/translate", {"text": ["a", "b"], "target_lang": ["de"]}, "1 languages for 2"),
        (PREDICT, {"instances": [{"text": "a", "target_lang": "es"}]}, "target_lang='es'"),
        (PREDICT, {"instances": [{"text": "a", "target_lang": "de"}, "b"]}, "it is null"),
        (PREDICT, {"inputs": {"text": ["a"], "target_lang": [1]}}, "must be a string"),
    ],
)
def test_a_language_the_model_does_not_know_is_a_400(served, path, body, message):
    client, runner = served
    response = client.post(path, json=body)
    assert response.status_code == 400 and message in response.json()["error"], response.text
    assert runner.calls == []


def test_an_empty_text_among_others_translates_to_an_empty_text(served):
    """With `target_lang` and one empty text, the server answered 400
    "pass `target_lang`", though it was passed."""
    client, _ = served
    body = {"text": ["A dog.", "", "A cow."], "target_lang": "fr"}
    response = client.post("/translate", json=body)
    assert response.status_code == 200, response.text
    found = [t["translation"] for t in response.json()["translations"]]
    assert found == [reversed_tagged("A dog.", "fr"), "", reversed_tagged("A cow.", "fr")]
    instances = [{"text": "", "target_lang": "de"}, {"text": "A dog.", "target_lang": "de"}]
    response = client.post(PREDICT, json={"instances": instances})
    assert response.status_code == 200, response.text
