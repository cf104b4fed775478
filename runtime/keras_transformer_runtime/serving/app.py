"""The server's ASGI application (Starlette): TF Serving's REST API,
`/translate`, the web page, `/healthz` and `/metrics`, over a `Batcher`.

    GET  /                                  the web page
    POST /translate                         {"text": [...], "n_best"?, "with_scores"?,
                                             "target_lang"?, "format"?}
    GET  /info                              what the page needs to know of the model
    POST /v1/models/NAME[/versions/V]:predict   TF Serving's predict
    GET  /v1/models/NAME[/versions/V]           TF Serving's model status
    GET  /v1/models/NAME[/versions/V]/metadata  TF Serving's signatures
    GET  /healthz                           200 while the server runs
    GET  /metrics                           Prometheus's text format

The translating requests (`POST /translate`, `:predict`) take a short
way through ASGI (`serving.asgi`); the other pages go through Starlette.
A request the server refuses (malformed JSON, wrong types, invalid
UTF-8, over a limit, an input the runner refuses) is answered with HTTP
400 and `{"error": message}`; the worker threads keep running.
"""

import asyncio
import contextlib
import importlib.resources
import re
import time
import warnings

from keras_transformer_runtime import validation
from keras_transformer_runtime.serving import asgi
from keras_transformer_runtime.serving import protocol
from keras_transformer_runtime.serving.batcher import Batcher
from keras_transformer_runtime.serving.metrics import Metrics
from keras_transformer_runtime.serving.translate_request import TranslateRequest
from keras_transformer_runtime.text import formats
from keras_transformer_runtime.text.documents import LongInputWarning

MODEL_PATH = re.compile(
    r"^(?P<name>[^/:]+)(?:/versions/(?P<version>[0-9]+)|/labels/(?P<label>[^/:]+))?"
    r"(?P<action>/metadata|:[a-z]+)?$"
)
DEFAULT_MAX_BODY_BYTES = 16 * 2**20
MODELS_PREFIX = "/v1/models/"  # TF Serving's REST paths


def import_starlette():
    """Starlette's modules the app uses, or an `ImportError` that says how
    to get them."""
    try:
        import starlette.applications  # noqa: F401
        import starlette.responses  # noqa: F401
        import starlette.routing  # noqa: F401
    except ImportError:
        raise ImportError(
            "The server needs starlette and uvicorn, an optional extra of the runtime: "
            "pip install 'keras-transformer-runtime[serve]'."
        ) from None
    return starlette


class Server:
    """The model served: its runners behind a `Batcher`, its limits, its
    metrics, and the ASGI application (`app`).

    Args:
        runners: one runner per worker thread, all of the same model.
        model_name: the name TF Serving clients give (`/v1/models/NAME`).
        version: the version the status and metadata report.
        max_batch_size: the most sentences the batcher runs together.
        batch_timeout_ms: how long a request waits for others to join it.
        limits: what one request may hold (`protocol.Limits`; default:
            the export's, else 256 sentences and 16,384 tokens).
        max_body_bytes: the largest request body accepted (HTTP 413 above).

    Example:

    >>> server = Server([LiteRTTranslator("ende.tflite")], model_name="ende")
    >>> uvicorn.run(server.app, port=8501)
    """

    def __init__(
        self,
        runners,
        model_name="model",
        version=1,
        max_batch_size=64,
        batch_timeout_ms=5.0,
        limits=None,
        max_body_bytes=DEFAULT_MAX_BODY_BYTES,
    ):
        runners = list(runners)
        if not runners:
            raise ValueError("`runners` must hold at least one runner. Received: runners=[]")
        if not isinstance(model_name, str) or not re.fullmatch(r"[^/:]+", model_name):
            raise ValueError(
                "`model_name` must be a non-empty name without '/' or ':'. "
                f"Received: model_name={model_name!r}"
            )
        validation.check_positive_int(max_body_bytes=max_body_bytes)
        # Each answer says which texts were translated in pieces (`truncated`)
        # and /metrics counts them: the runners' warning would only repeat
        # it, request after request, on the server's stderr.
        warnings.filterwarnings("ignore", category=LongInputWarning)
        self.runner = runners[0]
        self.model_name = model_name
        self.version = str(version)
        self.limits = limits or protocol.Limits.of(self.runner)
        self.max_body_bytes = max_body_bytes
        self.signatures = protocol.signatures_of(self.runner.max_n_best)
        self._page = importlib.resources.files(__package__).joinpath("page.html").read_text("utf-8")
        self.languages = self.runner.languages
        self.metrics = Metrics(
            max_batch_size,
            queued=lambda: self.batcher.queued(),
            workers=lambda: self.batcher.running_workers(),
        )
        self.batcher = Batcher(
            runners, max_batch_size, batch_timeout_ms, on_batch=self.metrics.batch
        )
        self.app = self._application()

    def _application(self):
        import_starlette()
        from starlette.applications import Starlette
        from starlette.routing import Route

        routes = [
            Route("/", self.page),
            Route("/info", self.info),
            Route("/healthz", self.healthz),
            Route("/metrics", self.prometheus),
            Route("/translate", self.not_allowed, methods=["GET"]),
            Route(MODELS_PREFIX + "{path:path}", self.tf_serving, methods=["GET", "POST"]),
        ]
        pages = Starlette(routes=routes, lifespan=self._lifespan)

        async def app(scope, receive, send):
            endpoint = self._translating(scope)
            if endpoint is None:
                await pages(scope, receive, send)
            else:
                await self._answer(endpoint, receive, send)

        return app

    def _translating(self, scope):
        """`(name, answer)` of a translating request's endpoint (`POST
        /translate`, or `:predict` of this model and version), else `None`."""
        if scope["type"] != "http" or scope["method"] != "POST":
            return None
        path = scope["path"]
        if path == "/translate":
            return "translate", self._translation
        if not path.startswith(MODELS_PREFIX):
            return None
        match = MODEL_PATH.match(path[len(MODELS_PREFIX) :])
        if (
            match is not None
            and match["name"] == self.model_name
            and match["version"] in (None, self.version)
            and match["action"] == ":predict"
        ):
            return "predict", self._prediction
        return None

    @contextlib.asynccontextmanager
    async def _lifespan(self, app):
        yield
        # The queued requests are answered before the workers stop.
        await asyncio.get_running_loop().run_in_executor(None, self.batcher.close)

    async def page(self, request):
        """The web page (`page.html`)."""
        from starlette.responses import HTMLResponse

        return HTMLResponse(self._page)

    async def info(self, request):
        """What the page shows and asks: the model's name, languages,
        n-best and token scores."""
        return _json(
            {
                "model": self.model_name,
                "runner": self.runner.name,
                "languages": list(self.languages.codes),
                "max_n_best": self.runner.max_n_best,
                "token_scores": self.runner.has_token_scores,
                "max_sentences": self.limits.max_sentences,
                "formats": formats.available(),
            }
        )

    async def healthz(self, request):
        """200 while the server runs."""
        return _json({"status": "ok", "model": self.model_name})

    async def prometheus(self, request):
        """The metrics in Prometheus's text format."""
        from starlette.responses import Response

        return Response(self.metrics.text(), media_type=Metrics.content_type)

    async def not_allowed(self, request):
        """`/translate` other than POST."""
        return _json({"error": f"{request.method} /translate is not served; POST it."}, 405)

    async def _translation(self, body):
        """`POST /translate` (`translate_request.TranslateRequest`): the
        answer, and how many texts it holds and were truncated."""
        parsed = TranslateRequest.parse(protocol.json_body(body), self.runner.max_n_best)
        task = parsed.task(self.runner.has_token_scores)
        found = await self._run(task, parsed.inputs(self.languages), parsed.texts)
        return parsed.answer(found), parsed.counted(found)

    async def _prediction(self, body):
        """TF Serving's `:predict` (`protocol.Predict`): the answer, and how
        many texts it holds and were truncated."""
        parsed = protocol.Predict.parse(protocol.json_body(body), self.signatures)
        texts = protocol.tagged_texts(parsed.texts, parsed.target_lang, self.languages)
        task = parsed.signature.task(self.runner.max_n_best)
        found = await self._run(task, texts, texts)
        return parsed.answer(found), (
            len(found),
            sum(bool(row and row[0].truncated) for row in found),
        )

    async def tf_serving(self, request):
        """TF Serving's `/v1/models/...`: status, metadata, and an unknown
        model or version (`:predict` of this model: `_prediction`)."""
        match = MODEL_PATH.match(request.path_params["path"])
        if match is None or match["name"] != self.model_name:
            name = match["name"] if match else request.path_params["path"]
            return _json({"error": f"Servable not found for request: Latest({name})"}, 404)
        if match["version"] not in (None, self.version):
            message = f"Servable not found for request: Specific({self.model_name}, "
            return _json({"error": message + f"{match['version']})"}, 404)
        action = match["action"]
        if request.method == "GET" and action is None:
            return _json(self._status())
        if request.method == "GET" and action == "/metadata":
            return _json(self._metadata())
        return _json({"error": f"{request.method} {request.url.path} is not served."}, 404)

    def _status(self):
        state = {"error_code": "OK", "error_message": ""}
        return {
            "model_version_status": [
                {"version": self.version, "state": "AVAILABLE", "status": state}
            ]
        }

    def _metadata(self):
        multilingual = bool(self.languages)
        definitions = {name: s.metadata(multilingual) for name, s in self.signatures.items()}
        return {
            "model_spec": {"name": self.model_name, "signature_name": "", "version": self.version},
            "metadata": {"signature_def": {"signature_def": definitions}},
        }

    async def _run(self, task, items, texts):
        """The runner's results for `items` (what `task` takes of `texts`),
        through the batcher, after the request's limits are checked on
        `texts`."""
        self.limits.check(texts, self.runner.source_lengths)
        if not items:
            return []
        return await asyncio.wrap_future(self.batcher.submit(task, items))

    async def _answer(self, endpoint, receive, send):
        """Answers a translating request (`endpoint`: its name and its
        answer of the body), or the error it raised; the request counted
        in the metrics."""
        name, answer = endpoint
        start = time.perf_counter()
        counted = (0, 0)  # texts answered, and of them translated in pieces
        try:
            body, counted = await answer(await asgi.read_body(receive, self.max_body_bytes))
            status, content = 200, _answer_json(body)
        except asgi.ClientGone:
            return
        except asgi.BodyTooLarge as error:
            status, content = 413, asgi.json_bytes({"error": str(error)})
        except UnwritableAnswer as error:
            status, content = 500, asgi.json_bytes({"error": str(error)})
        except (ValueError, NotImplementedError) as error:  # BadRequest, RefusedRequestError
            status, content = 400, asgi.json_bytes({"error": str(error)})
        except Exception as error:  # noqa: BLE001 (answered, the server keeps running)
            status, content = 500, asgi.json_bytes({"error": f"{type(error).__name__}: {error}"})
        await asgi.send_content(send, status, content)
        self.metrics.request(name, status, time.perf_counter() - start, *counted)


class UnwritableAnswer(Exception):
    """An answer JSON cannot hold (a non-finite score): the server's
    fault, answered 500 and counted as such."""


def _answer_json(body):
    """`body` as JSON bytes; `UnwritableAnswer` where JSON refuses it."""
    try:
        return asgi.json_bytes(body)
    except (ValueError, TypeError) as error:
        raise UnwritableAnswer(f"The answer could not be written as JSON: {error}") from None


def _json(body, status=200):
    from starlette.responses import JSONResponse

    return JSONResponse(body, status_code=status)
