"""The serving client's errors: a server's HTTP error and a server that
is not there are each one line on stderr and exit code 1, not a
traceback."""

import json
import socket
import threading
from http.server import BaseHTTPRequestHandler
from http.server import ThreadingHTTPServer

from tests.examples.helpers import load_example

client = load_example("serving_client")


class NoSuchModel(BaseHTTPRequestHandler):
    """Answers every request as TF Serving does for an unknown model."""

    def do_POST(self):
        self.rfile.read(int(self.headers["Content-Length"]))
        payload = json.dumps({"error": "Servable not found for request: Latest(ende)"}).encode()
        self.send_response(404)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(payload)))
        self.end_headers()
        self.wfile.write(payload)

    def log_message(self, *args):
        pass


def test_an_unknown_model_is_one_line_naming_the_fix(capsys):
    server = ThreadingHTTPServer(("127.0.0.1", 0), NoSuchModel)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        code = client.main(["--port", str(server.server_address[1]), "A dog runs."])
    finally:
        server.shutdown()
        server.server_close()
    out, err = capsys.readouterr()
    assert code == 1 and out == ""
    assert err.count("\n") == 1 and err.startswith("error: the server answered HTTP 404: ")
    assert "Servable not found" in err and "It serves no model named 'ende'" in err
    assert "pass --model" in err


def test_no_server_is_one_line(capsys):
    with socket.socket() as s:  # a port nothing listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    code = client.main(["--port", str(port), "A dog runs."])
    out, err = capsys.readouterr()
    assert code == 1 and out == ""
    assert (
        err.startswith(f"error: no server answers on localhost:{port} (") and err.count("\n") == 1
    )
