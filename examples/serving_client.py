"""Send sentences to a TF Serving server running an exported translator.

Start TF Serving on an export (see README, "Serving"):

    docker run -p 8500:8500 -p 8501:8501 \\
        -v /path/to/export_dir:/models/ende -e MODEL_NAME=ende tensorflow/serving

then translate over REST (port 8501) or gRPC (port 8500):

    python examples/serving_client.py --protocol rest "A dog runs." "Two men talk."
    echo "A dog runs." | python examples/serving_client.py --protocol grpc

REST posts `{"instances": [...]}` to `/v1/models/NAME:predict` and reads
`predictions[i]["translation"]`; gRPC calls `PredictionService/Predict` with
a string tensor `text` and reads the `translation` and `score` outputs.
`--model` is the name the server gives the model: TF Serving's
`MODEL_NAME`; `kt-serve` prints its own (the export's file or directory
name, e.g. `ende_ct2`, or `--model_name`). A server that answers with an
error, or none, is reported in one line on stderr, with exit code 1.
"""

import argparse
import json
import sys
import urllib.error
import urllib.request


def translate_rest(
    sentences, host="localhost", port=8501, model="ende", signature="serving_default", timeout=60
):
    """Translations and scores from TF Serving's REST API."""
    body = json.dumps({"signature_name": signature, "instances": list(sentences)}).encode("utf-8")
    request = urllib.request.Request(
        f"http://{host}:{port}/v1/models/{model}:predict",
        data=body,
        headers={"Content-Type": "application/json"},
    )
    with urllib.request.urlopen(request, timeout=timeout) as response:
        predictions = json.load(response)["predictions"]
    return [p["translation"] for p in predictions], [p["score"] for p in predictions]


def translate_grpc(
    sentences, host="localhost", port=8500, model="ende", signature="serving_default", timeout=60
):
    """Translations and scores from TF Serving's gRPC `PredictionService`."""
    import grpc
    from tensorflow.core.framework import tensor_pb2
    from tensorflow.core.framework import tensor_shape_pb2
    from tensorflow.core.framework import types_pb2
    from tensorflow_serving.apis import predict_pb2
    from tensorflow_serving.apis import prediction_service_pb2_grpc

    text = tensor_pb2.TensorProto(
        dtype=types_pb2.DT_STRING,
        tensor_shape=tensor_shape_pb2.TensorShapeProto(
            dim=[tensor_shape_pb2.TensorShapeProto.Dim(size=len(sentences))]
        ),
        string_val=[s.encode("utf-8") for s in sentences],
    )
    request = predict_pb2.PredictRequest()
    request.model_spec.name = model
    request.model_spec.signature_name = signature
    request.inputs["text"].CopyFrom(text)
    with grpc.insecure_channel(f"{host}:{port}") as channel:
        response = prediction_service_pb2_grpc.PredictionServiceStub(channel).Predict(
            request, timeout=timeout
        )
    translations = [
        t.decode("utf-8", errors="replace") for t in response.outputs["translation"].string_val
    ]
    return translations, _floats(response.outputs["score"])


def _floats(tensor):
    """The values of a float32 `TensorProto`, in either of its encodings."""
    if tensor.float_val:
        return list(tensor.float_val)
    import array

    values = array.array("f")
    values.frombytes(tensor.tensor_content)  # packed little-endian float32
    return values.tolist()


def failure(error, model, host, port):
    """What went wrong with a request, in one line: the server's own error
    message where it answered, and what to try for the usual causes."""
    if isinstance(error, urllib.error.HTTPError):
        try:
            message = json.loads(error.read()).get("error", "")
        except (ValueError, AttributeError):
            message = ""
        finally:
            error.close()
        text = f"the server answered HTTP {error.code}" + (f": {message}" if message else "")
        if error.code == 404:
            text += (
                f". It serves no model named {model!r}: pass --model with the name it serves "
                "(kt-serve prints it when it starts, e.g. 'ende_ct2' for a directory ende_ct2)"
            )
        return text + "."
    if isinstance(error, urllib.error.URLError):
        return f"no server answers on {host}:{port} ({error.reason})."
    return f"{type(error).__name__}: {error}"


def main(argv=None):
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("sentences", nargs="*", help="sentences (default: one per line on stdin)")
    parser.add_argument("--protocol", choices=("rest", "grpc"), default="rest")
    parser.add_argument("--host", default="localhost")
    parser.add_argument("--port", type=int, help="default 8501 for REST, 8500 for gRPC")
    parser.add_argument("--model", default="ende", help="TF Serving's MODEL_NAME")
    parser.add_argument(
        "--scores", action="store_true", help="print the score before each translation"
    )
    args = parser.parse_args(argv)
    sentences = args.sentences or [line.rstrip("\n") for line in sys.stdin]
    try:
        if args.protocol == "rest":
            port = args.port or 8501
            translations, scores = translate_rest(sentences, args.host, port, args.model)
        else:
            port = args.port or 8500
            translations, scores = translate_grpc(sentences, args.host, port, args.model)
    except Exception as error:  # noqa: BLE001 (reported in one line, whatever failed)
        print(f"error: {failure(error, args.model, args.host, port)}", file=sys.stderr)
        return 1
    for translation, score in zip(translations, scores, strict=True):
        print(f"{score:.4f}\t{translation}" if args.scores else translation)
    return 0


if __name__ == "__main__":
    sys.exit(main())
