import asyncio
import json

import pytest
from starlette.responses import JSONResponse

from keras_transformer_runtime.serving import asgi


def messages(*bodies, disconnect=False):
    """An ASGI `receive` giving `bodies` as one request's chunks."""
    queue = [
        {"type": "http.request", "body": body, "more_body": i + 1 < len(bodies)}
        for i, body in enumerate(bodies)
    ]
    if disconnect:
        queue[-1] = {"type": "http.disconnect"}

    async def receive():
        return queue.pop(0)

    return receive


def test_a_body_is_read_from_its_chunks():
    assert asyncio.run(asgi.read_body(messages(b'{"a"', b": 1", b"}"), 100)) == b'{"a": 1}'


def test_a_body_past_the_limit_is_refused_without_reading_the_rest():
    receive = messages(b"x" * 6, b"x" * 6, b"never read")
    with pytest.raises(asgi.BodyTooLarge, match="over the server's limit of 10 bytes"):
        asyncio.run(asgi.read_body(receive, 10))
    assert asyncio.run(receive())["body"] == b"never read"


def test_a_client_gone_before_its_body_is_read():
    with pytest.raises(asgi.ClientGone):
        asyncio.run(asgi.read_body(messages(b"x", b"y", disconnect=True), 100))


@pytest.mark.parametrize(
    "body", [{"translation": "Ein Hund läuft.", "score": -1.5}, {"error": "»x«"}, [1, None]]
)
def test_the_json_answer_is_starlettes(body):
    sent = []

    async def send(message):
        sent.append(message)

    asyncio.run(asgi.send_json(send, 400, body))
    reference = JSONResponse(body, status_code=400)
    start, content = sent
    assert start["status"] == 400 and content["body"] == reference.body
    assert dict(start["headers"]) == {
        b"content-type": b"application/json",
        b"content-length": str(len(reference.body)).encode(),
    }
    assert json.loads(content["body"]) == body


def test_nan_is_refused():
    with pytest.raises(ValueError):
        asgi.json_bytes({"score": float("nan")})
