"""Web pages and Markdown through `/translate` (`"format"`), over a runner
that reverses the order of the words: the markup comes back around the
aligned words, the answer says which pages were repaired, and requests
that do not go with documents are refused by name."""

import json

import pytest
from prometheus_client.parser import text_string_to_metric_families
from starlette.testclient import TestClient

from keras_transformer_runtime.serving.app import Server
from tests.runtime.text.test_formats import WordReversingRunner


@pytest.fixture(scope="module")
def client():
    server = Server([WordReversingRunner()], model_name="m", batch_timeout_ms=1)
    with TestClient(server.app) as client:
        yield client


def test_pages_come_back_with_their_markup_and_say_if_it_was_repaired(client):
    body = {"text": ["<p><b>a b</b> c</p>", "<b>a <i>b</b> c"], "format": "html"}
    assert client.post("/translate", json=body).json() == {
        "translations": [
            {"translation": "<p>C <b>B A</b></p>", "repaired": False},
            # Repaired as `<b>a <i>b</i></b><i> c</i>`; the siblings follow
            # their words, so the second `<i>` goes first, around "C".
            {"translation": "<i>C</i> <b><i>B</i> A</b>", "repaired": True},
        ]
    }


def test_markdown_comes_back_with_its_markup_and_rendered_on_demand(client):
    body = {"text": "# a [b c](http://x.org)\n", "format": "markdown"}
    assert client.post("/translate", json=body).json() == {
        "translations": [{"translation": "# [C B](http://x.org) A\n", "repaired": False}]
    }
    (answer,) = client.post("/translate", json={**body, "rendered": True}).json()["translations"]
    assert answer["html"] == '<h1><a href="http://x.org">C B</a> A</h1>\n'
    body = {"text": "<p>a <b>b</b></p>", "format": "html", "rendered": True}
    (answer,) = client.post("/translate", json=body).json()["translations"]
    assert answer["html"] == answer["translation"] == "<p><b>B</b> A</p>"


@pytest.mark.parametrize(
    "body, message",
    [
        ({"text": ["a"], "format": "pdf"}, '`format` must be one of "text", "html", "markdown"'),
        ({"text": ["a"], "format": "html", "n_best": 2}, "one translation of each document"),
        ({"text": ["a"], "format": "html", "with_scores": True}, "with_scores=true"),
        ({"text": ["a"], "format": "html", "target_lang": "fr"}, "translates into one language"),
        ({"text": ["a", "b"], "format": "html", "target_lang": ["fr"]}, "one per text"),
        ({"text": ["a"], "rendered": True}, '`rendered` (true or false) goes with "format"'),
        ({"text": ["a"], "format": "html", "rendered": 1}, "Received: rendered=1"),
    ],
)
def test_requests_that_do_not_go_with_documents_are_refused(client, body, message):
    response = client.post("/translate", content=json.dumps(body))
    assert response.status_code == 400 and message in response.json()["error"]


def test_documents_are_counted_in_the_metrics():
    server = Server([WordReversingRunner()], model_name="m", batch_timeout_ms=0)
    with TestClient(server.app) as client:
        client.post("/translate", json={"text": ["<p>a</p>", "<p>b</p>"], "format": "html"})
        text = client.get("/metrics").text
    samples = {s.name: s.value for f in text_string_to_metric_families(text) for s in f.samples}
    assert samples["translation_sentences_total"] == 2


def test_a_server_without_the_markup_extra_says_so(monkeypatch):
    import importlib.util

    find_spec = importlib.util.find_spec
    monkeypatch.setattr(
        importlib.util, "find_spec", lambda name: None if name == "selectolax" else find_spec(name)
    )
    server = Server([WordReversingRunner()], model_name="m", batch_timeout_ms=0)
    with TestClient(server.app) as client:
        assert client.get("/info").json()["formats"] == ["text", "markdown"]
        response = client.post("/translate", json={"text": ["<p>a</p>"], "format": "html"})
    assert response.status_code == 400
    assert "pip install 'keras-transformer-runtime[markup]'" in response.json()["error"]
