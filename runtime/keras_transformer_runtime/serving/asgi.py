"""The translating requests' way through ASGI, without Starlette's
request and response objects: a request's body read from `receive`, a
JSON answer given to `send`. Under load every request takes this way, so
it is kept to what HTTP needs; the server's other pages go through
Starlette (`serving.app`).

Example (an ASGI application that echoes a JSON body):

>>> async def echo(scope, receive, send):
...     body = await read_body(receive, max_bytes=2**20)
...     await send_json(send, 200, json.loads(body))
"""

import json


class BodyTooLarge(Exception):
    """A request body over the server's limit (HTTP 413)."""


class ClientGone(Exception):
    """The client disconnected before its request's body was read."""


async def read_body(receive, max_bytes):
    """The request's body (bytes), read from the ASGI `receive`.

    Raises:
        BodyTooLarge: past `max_bytes`, the rest left unread.
        ClientGone: the client disconnected first.
    """
    chunks, size = [], 0
    while True:
        message = await receive()
        if message["type"] == "http.disconnect":
            raise ClientGone()
        chunk = message.get("body", b"")
        size += len(chunk)
        if size > max_bytes:
            raise BodyTooLarge(f"The request body is over the server's limit of {max_bytes} bytes.")
        chunks.append(chunk)
        if not message.get("more_body", False):
            return b"".join(chunks)


def json_bytes(body):
    """`body` in compact UTF-8 JSON, as Starlette's `JSONResponse` writes it
    (NaN refused)."""
    text = json.dumps(body, ensure_ascii=False, allow_nan=False, separators=(",", ":"))
    return text.encode("utf-8")


async def send_json(send, status, body):
    """Answers with HTTP `status` and `body` in JSON through the ASGI `send`."""
    await send_content(send, status, json_bytes(body))


async def send_content(send, status, content):
    """Answers with HTTP `status` and `content`, JSON already serialized
    (`json_bytes`), through the ASGI `send`."""
    headers = [(b"content-type", b"application/json"), (b"content-length", b"%d" % len(content))]
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": content})
