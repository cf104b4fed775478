"""The server's HTTP API in process (Starlette's test client) over a
runner that reverses texts: TF Serving's REST API, `/translate`, the
refusals (HTTP 400 naming the problem, never a 500 for bad input), the
page, `/healthz` and `/metrics`."""

import dataclasses
import json
import re

import pytest
from prometheus_client.parser import text_string_to_metric_families
from starlette.testclient import TestClient

from keras_transformer_runtime.serving.app import Server
from keras_transformer_runtime.serving.protocol import Limits
from tests.runtime.serving.reversing import ReversingRunner

PREDICT = "/v1/models/ende:predict"


@pytest.fixture(scope="module")
def client():
    server = Server(
        [ReversingRunner()],
        model_name="ende",
        batch_timeout_ms=1,
        limits=Limits(max_sentences=4, max_tokens=40),
        max_body_bytes=2000,
    )
    with TestClient(server.app) as client:
        yield client


def error_of(response, status=400):
    assert response.status_code == status, response.text
    return response.json()["error"]


def test_predict_in_the_row_format(client):
    response = client.post(PREDICT, json={"instances": ["A dog.", {"text": "Two men."}]})
    assert response.status_code == 200
    assert response.json() == {
        "predictions": [
            {"translation": ".god A", "score": -6.0, "truncated": False},
            {"translation": ".nem owT", "score": -8.0, "truncated": False},
        ]
    }


def test_predict_in_the_columnar_format_and_by_version(client):
    outputs = {"translation": ["ba", "dc"], "score": [-2.0, -2.0], "truncated": [False, False]}
    expected = {"outputs": outputs}
    for body in ({"inputs": ["ab", "cd"]}, {"inputs": {"text": ["ab", "cd"]}}):
        assert client.post(PREDICT, json=body).json() == expected
    response = client.post("/v1/models/ende/versions/1:predict", json={"inputs": ["ab", "cd"]})
    assert response.json() == expected


def test_the_n_best_signature_gives_the_beam(client):
    body = {"signature_name": "n_best", "instances": ["ab"]}
    assert client.post(PREDICT, json=body).json() == {
        "predictions": [
            {
                "translations": ["ba", "ba!", "ba!!"],
                "scores": [-2.0, -3.0, -4.0],
                "truncated": False,
            }
        ]
    }


def test_status_and_metadata_as_tf_serving_gives_them(client):
    status = client.get("/v1/models/ende").json()["model_version_status"]
    assert status == [
        {"version": "1", "state": "AVAILABLE", "status": {"error_code": "OK", "error_message": ""}}
    ]
    metadata = client.get("/v1/models/ende/metadata").json()
    assert metadata["model_spec"] == {"name": "ende", "signature_name": "", "version": "1"}
    signatures = metadata["metadata"]["signature_def"]["signature_def"]
    assert sorted(signatures) == ["n_best", "serving_default"]
    default = signatures["serving_default"]
    assert default["inputs"]["text"]["dtype"] == "DT_STRING"
    assert {k: v["dtype"] for k, v in default["outputs"].items()} == {
        "score": "DT_FLOAT",
        "translation": "DT_STRING",
        "truncated": "DT_BOOL",
    }
    assert len(signatures["n_best"]["outputs"]["translations"]["tensor_shape"]["dim"]) == 2


def test_another_model_or_version_is_not_found(client):
    assert "Latest(deen)" in error_of(client.post("/v1/models/deen:predict", json={}), 404)
    assert "Specific(ende, 7)" in error_of(client.get("/v1/models/ende/versions/7"), 404)
    assert "not served" in error_of(client.post("/v1/models/ende:classify", json={}), 404)
    assert "Specific(ende, 7)" in error_of(
        client.post("/v1/models/ende/versions/7:predict", json={"instances": ["ab"]}), 404
    )
    assert "not served" in error_of(client.post("/v1/models/ende/metadata", json={}), 404)


def test_translate_is_posted(client):
    assert "POST it" in error_of(client.get("/translate"), 405)
    assert client.put("/translate", json={"text": ["ab"]}).status_code == 405
    labelled = client.post("/v1/models/ende/labels/stable:predict", json={"instances": ["ab"]})
    expected = {"predictions": [{"translation": "ba", "score": -2.0, "truncated": False}]}
    assert labelled.json() == expected


def test_translate_for_people(client):
    response = client.post("/translate", json={"text": ["ab cd", "ef"]})
    assert response.json() == {"translations": [{"translation": "dc ba"}, {"translation": "fe"}]}
    # One string is one text.
    assert client.post("/translate", json={"text": "ab"}).json()["translations"] == [
        {"translation": "ba"}
    ]


def test_translate_with_scores_gives_each_words_log_probability(client):
    [item] = client.post("/translate", json={"text": ["ab cd"], "with_scores": True}).json()[
        "translations"
    ]
    assert item["translation"] == "dc ba" and item["score"] == -5.0
    assert item["tokens"] == ["▁d", "c", "▁b", "a", "</s>"]
    assert item["words"] == [["dc", -1.0], ["ba", -1.0]]  # each piece -0.5, EOS in no word


def test_translate_gives_alternatives_on_demand(client):
    body = {"text": ["ab"], "n_best": 2, "with_scores": True}
    [item] = client.post("/translate", json=body).json()["translations"]
    assert item["alternatives"] == [
        {"translation": "ba", "score": -2.0},
        {"translation": "ba!", "score": -3.0},
    ]
    assert "words" not in item  # token scores go with the best alone


@pytest.mark.parametrize(
    "body, message",
    [
        (b"{not json", "not valid JSON"),
        (b'{"text": ["\xff\xfe"]}', "not valid UTF-8"),
        (b'["a list"]', "must be a JSON object; it is a list"),
        (b'{"instances": "a dog"}', "`instances` must be a list of strings; it is a string"),
        (b'{"instances": ["a", 3]}', "`instances[1]` must be a string; it is a number"),
        (b'{"instances": [{"txt": "a"}]}', "Unknown field(s) txt in `instances[0]`"),
        (b'{"inputs": {"source": ["a"]}}', "Unknown field(s) source in `inputs`"),
        (b'{"instances": ["a"], "inputs": ["a"]}', "either `instances` or `inputs`"),
        (b'{"instances": ["\\ud800"]}', "`instances[0]` is not valid Unicode"),
        (b'{"signature_name": "score", "instances": ["a"]}', "serves: serving_default, n_best"),
        (b'{"instances": ["a", "b", "c", "d", "e"]}', "at most max_request_sentences=4 sentences"),
        (b'{"instances": ["' + b"x" * 50 + b'"]}', "at most max_request_tokens=40 source"),
        (b'{"instances": ["REFUSE this"]}', "refused: REFUSE this"),
    ],
)
def test_bad_predict_requests_are_refused_with_a_reason(client, body, message):
    response = client.post(PREDICT, content=body)
    assert message in error_of(response)


@pytest.mark.parametrize(
    "body, message",
    [
        ({"texts": ["a"]}, "Unknown field(s) texts in a request"),
        ({}, "must give `text`"),
        ({"text": [None]}, "`text[0]` must be a string; it is null"),
        ({"text": ["a"], "n_best": 4}, "`n_best` must be an integer from 1 to 3"),
        ({"text": ["a"], "n_best": True}, "`n_best` must be an integer from 1 to 3"),
        ({"text": ["a"], "with_scores": "yes"}, "`with_scores` must be true or false"),
        ({"text": ["a"], "target_lang": "fr"}, "translates into one language"),
        ({"text": ["a"], "target_lang": 3}, "`target_lang` must be a list of strings"),
    ],
)
def test_bad_translate_requests_are_refused_with_a_reason(client, body, message):
    assert message in error_of(client.post("/translate", content=json.dumps(body)))


def test_a_body_over_the_limit_is_refused(client):
    body = json.dumps({"text": ["x" * 3000]})
    assert "over the server's limit of 2000 bytes" in error_of(
        client.post("/translate", content=body), 413
    )


def test_a_crashing_runner_answers_500_and_the_server_keeps_serving(client):
    assert "RuntimeError: the runner crashed" in error_of(
        client.post("/translate", json={"text": ["CRASH"]}), 500
    )
    assert client.post("/translate", json={"text": ["ok"]}).json()["translations"] == [
        {"translation": "ko"}
    ]


def test_page_health_and_info(client):
    page = client.get("/")
    assert page.status_code == 200 and page.headers["content-type"].startswith("text/html")
    assert 'id="source"' in page.text and 'id="translate"' in page.text
    assert client.get("/healthz").json() == {"status": "ok", "model": "ende"}
    assert client.get("/info").json() == {
        "model": "ende",
        "runner": "ReversingRunner",
        "languages": [],
        "max_n_best": 3,
        "token_scores": True,
        "max_sentences": 4,
        "formats": ["text", "html", "markdown"],
    }


def test_metrics_count_requests_sentences_and_batches():
    server = Server([ReversingRunner()], model_name="m", batch_timeout_ms=0)
    with TestClient(server.app) as client:
        for _ in range(3):
            client.post("/translate", json={"text": ["ab", "cd"]})
        client.post("/translate", content=b"{")
        text = client.get("/metrics").text
    samples = {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
    }
    ok = ("translation_requests_total", (("code", "200"), ("endpoint", "translate")))
    refused = ("translation_requests_total", (("code", "400"), ("endpoint", "translate")))
    assert samples[ok] == 3 and samples[refused] == 1
    assert samples[("translation_sentences_total", ())] == 6
    assert samples[("translation_batch_size_count", ())] == 3
    assert samples[("translation_batch_size_sum", ())] == 6
    latency = ("translation_request_seconds_count", (("endpoint", "translate"),))
    assert samples[latency] == 4
    assert samples[("translation_queued_requests", ())] == 0


@pytest.mark.parametrize(
    "arguments, message",
    [
        (dict(runners=[]), "`runners` must hold at least one runner"),
        (dict(model_name="en/de"), "`model_name` must be a non-empty name without '/' or ':'"),
        (dict(model_name=""), "Received: model_name=''"),
        (dict(max_body_bytes=0), "`max_body_bytes` must be a positive integer"),
        (dict(max_batch_size=0), "`max_batch_size` must be a positive integer"),
    ],
)
def test_bad_server_arguments_are_named(arguments, message):
    with pytest.raises(ValueError, match=re.escape(message)):
        Server(**{"runners": [ReversingRunner()], **arguments})


class NaNRunner(ReversingRunner):
    """Scores a text holding "NAN" as NaN, which JSON cannot hold."""

    def _translate_with_scores(self, sentences, n_best, token_scores, batch_size):
        rows = super()._translate_with_scores(sentences, n_best, token_scores, batch_size)
        return [
            [dataclasses.replace(h, score=float("nan")) if "NAN" in s else h for h in row]
            for s, row in zip(sentences, rows, strict=True)
        ]


def test_an_answer_json_cannot_hold_is_a_counted_json_500():
    """The answer was serialized outside the handler's `try`: a non-finite
    score gave uvicorn's plain-text 500, not counted in `/metrics`."""
    server = Server([NaNRunner()], model_name="m", batch_timeout_ms=0)
    with TestClient(server.app, raise_server_exceptions=False) as client:
        response = client.post("/translate", json={"text": ["ab NAN", "cd"], "with_scores": True})
        assert "could not be written as JSON" in error_of(response, 500)
        assert client.post("/translate", json={"text": ["cd"]}).status_code == 200
        text = client.get("/metrics").text
    samples = {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
    }
    failed = ("translation_requests_total", (("code", "500"), ("endpoint", "translate")))
    assert samples[failed] == 1


def test_a_text_translated_in_pieces_says_so_and_is_counted():
    """A sentence over `max_input_length` is translated in pieces; neither
    `/translate` nor `:predict` said so, and only the server's stderr
    had the warning."""
    from tests.runtime.text.test_documents import RuleRunner

    server = Server([RuleRunner(max_input_length=6)], model_name="m", batch_timeout_ms=0)
    with TestClient(server.app) as client:
        found = client.post("/translate", json={"text": ["fits.", "ab cd ef gh. Ok."]}).json()
        predicted = client.post("/v1/models/m:predict", json={"inputs": ["ab cd ef gh ij", "x"]})
        text = client.get("/metrics").text
    assert found["translations"] == [
        {"translation": "FITS."},
        {"translation": "AB CD EF GH. OK.", "truncated": True},
    ]
    assert predicted.json()["outputs"]["truncated"] == [True, False]
    samples = {s.name: s.value for f in text_string_to_metric_families(text) for s in f.samples}
    assert samples["translation_truncated_texts_total"] == 2
    assert samples["translation_workers"] == 1
