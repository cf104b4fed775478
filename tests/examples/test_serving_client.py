"""The serving client against local stand-ins for TF Serving's REST and
gRPC APIs (no Docker here), each backed by a real export."""

import json
import threading
from concurrent import futures
from http.server import BaseHTTPRequestHandler
from http.server import ThreadingHTTPServer

import grpc
import pytest
import tensorflow as tf
from tensorflow_serving.apis import predict_pb2
from tensorflow_serving.apis import prediction_service_pb2_grpc

from tests.examples.helpers import load_example

# TensorFlow by design; every test serves a SavedModel.
pytestmark = [pytest.mark.tensorflow_only, pytest.mark.large]

client = load_example("serving_client")

SENTENCES = ["A dog runs.", "", "Zwei Hunde spielen im Schnee."]


@pytest.fixture
def served(exported_translator):
    translator, path = exported_translator
    signature = tf.saved_model.load(path).signatures["serving_default"]
    return translator, signature


def test_rest(served):
    translator, signature = served
    seen = {}

    class PredictHandler(BaseHTTPRequestHandler):
        def do_POST(self):
            seen["path"] = self.path
            body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
            seen["body"] = body
            out = signature(text=tf.constant(body["instances"]))
            predictions = [
                {"translation": t.decode(), "score": float(s)}
                for t, s in zip(out["translation"].numpy(), out["score"].numpy(), strict=True)
            ]
            payload = json.dumps({"predictions": predictions}).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(payload)))
            self.end_headers()
            self.wfile.write(payload)

        def log_message(self, *args):
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), PredictHandler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        translations, scores = client.translate_rest(
            SENTENCES, "127.0.0.1", server.server_port, model="ende"
        )
    finally:
        server.shutdown()
        server.server_close()
    assert seen["path"] == "/v1/models/ende:predict"
    assert seen["body"] == {"signature_name": "serving_default", "instances": SENTENCES}
    assert translations == translator.translate(SENTENCES)
    assert len(scores) == 3


def test_grpc(served):
    translator, signature = served
    seen = {}

    class Servicer(prediction_service_pb2_grpc.PredictionServiceServicer):
        def Predict(self, request, context):
            seen["model"] = request.model_spec.name
            seen["signature"] = request.model_spec.signature_name
            out = signature(text=tf.make_ndarray(request.inputs["text"]))
            response = predict_pb2.PredictResponse()
            response.outputs["translation"].CopyFrom(
                tf.make_tensor_proto(out["translation"].numpy())
            )
            response.outputs["score"].CopyFrom(tf.make_tensor_proto(out["score"].numpy()))
            return response

    server = grpc.server(futures.ThreadPoolExecutor(max_workers=2))
    prediction_service_pb2_grpc.add_PredictionServiceServicer_to_server(Servicer(), server)
    port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    try:
        translations, scores = client.translate_grpc(SENTENCES, "127.0.0.1", port, model="ende")
    finally:
        server.stop(None)
    assert (seen["model"], seen["signature"]) == ("ende", "serving_default")
    assert translations == translator.translate(SENTENCES)
    assert len(scores) == 3
