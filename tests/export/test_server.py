"""`python -m keras_transformer_runtime.serve` as users run it: a process
on a loopback port over the trained letter reverser's exports (beam 3),
asked by TF Serving's REST client (examples/serving_client.py), by plain
HTTP calls, by eight clients at once, and through its page in headless
Chromium; its answers are the runner's own, called directly."""

import concurrent.futures
import contextlib
import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time

import httpx
import pytest

from keras_transformer_runtime import CTranslate2Translator
from keras_transformer_runtime import LiteRTTranslator
from keras_transformer_runtime import SavedModelTranslator
from tests.conftest import free_port
from tests.examples.helpers import load_example
from tests.training.helpers import letter_reversal_corpus

pytestmark = [pytest.mark.tensorflow_only, pytest.mark.large]  # starts server processes

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SENTENCES = letter_reversal_corpus(24, seed=33)[0]


@contextlib.contextmanager
def served(model, *flags, name="ende", without_tensorflow=True):
    """The base URL of a server of `model` named `name`, started with
    `flags`; with `without_tensorflow`, in a process where TensorFlow and
    Keras cannot be imported."""
    port = free_port()
    module = (
        "tests.export.serve_without_tensorflow"
        if without_tensorflow
        else "keras_transformer_runtime.serve"
    )
    command = [sys.executable, "-m", module, "--model", os.fspath(model), "--port", str(port)]
    with tempfile.TemporaryFile("w+") as log:
        process = subprocess.Popen(
            [*command, "--model_name", name, *flags],
            cwd=ROOT,
            stdout=log,
            stderr=subprocess.STDOUT,
            env={**os.environ, "TF_CPP_MIN_LOG_LEVEL": "3"},
        )
        url = f"http://127.0.0.1:{port}"
        try:
            deadline = time.time() + 120
            while True:
                if process.poll() is not None:
                    log.seek(0)
                    raise AssertionError(f"the server stopped:\n{log.read()[-3000:]}")
                assert time.time() < deadline, "the server did not start in 120 s"
                try:
                    if httpx.get(f"{url}/healthz", timeout=5).status_code == 200:
                        break
                except httpx.TransportError:
                    time.sleep(0.2)
            yield url
        finally:
            process.terminate()
            try:
                process.wait(timeout=20)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
        assert process.returncode in (0, -15), process.returncode


def metric(url, name):
    """The value of an unlabelled sample of the server's metrics."""
    for line in httpx.get(f"{url}/metrics").text.splitlines():
        if line.startswith(name + " "):
            return float(line.split()[1])
    raise AssertionError(f"no {name} in the metrics")


def test_a_litert_server_answers_as_the_runner_without_tensorflow(reverser_export):
    path = reverser_export("LiteRTTranslator")
    direct = [h[0] for h in LiteRTTranslator(path).translate_with_scores(SENTENCES)]
    client = load_example("serving_client")
    with served(path, "--max_batch_size", "8", "--batch_timeout_ms", "20") as url:
        port = int(url.rsplit(":", 1)[1])
        translations, scores = client.translate_rest(SENTENCES, "127.0.0.1", port, "ende")
        assert translations == [h.translation for h in direct]
        assert scores == pytest.approx([h.score for h in direct], abs=1e-5)
        # The reverser really reverses: the outputs are not merely alike.
        reversed_ = [t == s[::-1] for t, s in zip(translations, SENTENCES, strict=True)]
        assert sum(reversed_) >= 0.9 * len(SENTENCES)
        answer = httpx.post(f"{url}/translate", json={"text": SENTENCES[:3]}).json()
        assert [t["translation"] for t in answer["translations"]] == translations[:3]

        # Bad input is refused with a reason, and the server keeps serving.
        refused = httpx.post(f"{url}/v1/models/ende:predict", content=b'{"instances": [1]}')
        assert refused.status_code == 400 and "instances[0]" in refused.json()["error"]
        assert httpx.post(f"{url}/translate", content=b"\xff").status_code == 400
        n_best = httpx.post(f"{url}/translate", json={"text": ["ab"], "n_best": 2})
        assert "from 1 to 1" in n_best.json()["error"]  # the model returns the best only

        # Eight clients at once, one sentence a request: each gets its own
        # translation, and requests were batched together.
        def ask(index):
            body = {"instances": [SENTENCES[index % len(SENTENCES)]]}
            response = httpx.post(f"{url}/v1/models/ende:predict", json=body, timeout=60)
            return response.json()["predictions"][0]["translation"]

        before = metric(url, "translation_batch_size_count")
        with concurrent.futures.ThreadPoolExecutor(8) as pool:
            answers = list(pool.map(ask, range(96)))
        assert answers == [translations[i % len(SENTENCES)] for i in range(96)]
        batches = metric(url, "translation_batch_size_count") - before
        assert batches < 96  # 24 + 3 sentences before, 96 now
        assert metric(url, "translation_batch_size_sum") == 24 + 3 + 96


def test_a_ctranslate2_server_gives_the_beam_and_word_scores(reverser_export):
    pytest.importorskip("ctranslate2")
    path = reverser_export("CTranslate2Translator")
    runner = CTranslate2Translator(path)
    sentences = SENTENCES[:6]
    with served(path) as url:
        body = {"signature_name": "n_best", "inputs": sentences}
        outputs = httpx.post(f"{url}/v1/models/ende:predict", json=body).json()["outputs"]
        direct = runner.translate_with_scores(sentences, n_best=3)
        assert outputs["translations"] == [[h.translation for h in row] for row in direct]
        body = {"text": sentences, "with_scores": True}
        items = httpx.post(f"{url}/translate", json=body).json()["translations"]
        scored = runner.translate_with_scores(sentences, token_scores=True)
        for item, [hypothesis] in zip(items, scored, strict=True):
            assert item["translation"] == hypothesis.translation
            assert [w for w, _ in item["words"]] == [w for w, _ in hypothesis.word_scores]
            assert [p for _, p in item["words"]] == pytest.approx(
                [p for _, p in hypothesis.word_scores], abs=1e-5
            )


def test_a_saved_model_is_served_with_its_limits(reverser_export):
    path = reverser_export("SavedModelTranslator")
    runner = SavedModelTranslator(path)
    with served(path, without_tensorflow=False) as url:
        body = {"instances": SENTENCES[:5]}
        predictions = httpx.post(f"{url}/v1/models/ende:predict", json=body).json()["predictions"]
        assert [p["translation"] for p in predictions] == runner.translate(SENTENCES[:5])
        limit = runner.limits["max_batch_size"]
        body = {"instances": ["a"] * (limit + 1)}
        refused = httpx.post(f"{url}/v1/models/ende:predict", json=body, timeout=60)
        assert refused.status_code == 400
        assert f"at most max_batch_size={limit} sentences" in refused.json()["error"]


def chromium():
    """The paths of Chromium and its WebDriver, or a skip naming what is missing."""
    pytest.importorskip("selenium")
    browser = shutil.which("chromium") or shutil.which("chromium-browser")
    driver = shutil.which("chromedriver")
    if not browser or not driver:
        pytest.skip("headless Chromium and chromedriver (Debian: apt-get install chromium-driver)")
    return browser, driver


def test_the_page_translates_texts_and_web_pages(reverser_export, tmp_path):
    """Texts with word shading and alternatives, then a web page shown
    rendered. Also writes the page's screenshots (PNGs) to
    $SERVE_PAGE_SCREENSHOT (and `_html` beside it), else into the test's
    directory. $SERVE_PAGE_MODEL (a CTranslate2
    directory) and $SERVE_PAGE_TEXT serve and type another model and text:
    docs/serve_page.png is the README's Multi30k model's page."""
    pytest.importorskip("ctranslate2")
    browser, driver = chromium()
    from selenium import webdriver
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import Select
    from selenium.webdriver.support.ui import WebDriverWait

    path = os.environ.get("SERVE_PAGE_MODEL") or reverser_export("CTranslate2Translator")
    text = os.environ.get("SERVE_PAGE_TEXT") or SENTENCES[0]
    runner = CTranslate2Translator(path)
    [[best]] = runner.translate_with_scores([text], token_scores=True)
    options = webdriver.ChromeOptions()
    options.binary_location = browser
    for flag in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage"):
        options.add_argument(flag)
    for flag in ("--window-size=900,640", "--hide-scrollbars"):
        options.add_argument(flag)
    with served(path) as url:
        page = webdriver.Chrome(options=options, service=webdriver.ChromeService(driver))
        try:
            page.get(url + "/")
            wait = WebDriverWait(page, 30)
            wait.until(lambda p: p.find_element(By.TAG_NAME, "body").get_attribute("data-ready"))
            page.find_element(By.ID, "source").send_keys(text)
            page.find_element(By.ID, "translate").click()
            line = wait.until(lambda p: p.find_elements(By.CSS_SELECTOR, "#output p.translation"))
            assert line[0].get_attribute("data-text") == best.translation
            words = line[0].find_elements(By.CSS_SELECTOR, "span.word")
            assert [w.text for w in words] == [w for w, _ in best.word_scores]
            shown = [float(w.get_attribute("data-probability")) for w in words]
            expected = [2.718281828**p for _, p in best.word_scores]
            assert shown == pytest.approx(expected, abs=1e-3)
            page.find_element(By.ID, "show-alternatives").click()
            options_shown = wait.until(
                lambda p: p.find_elements(By.CSS_SELECTOR, "ol.alternatives li")
            )
            assert len(options_shown) == runner.max_n_best == runner.settings.beam_size
            assert options_shown[0].text.startswith(best.translation)
            screenshot = os.environ.get("SERVE_PAGE_SCREENSHOT") or str(tmp_path / "page.png")
            saved_screenshot(page, screenshot)
            # A web page: translated whole, its tags around the reversed
            # words, shown rendered, its markup a click away; copyable.
            assert (
                page.find_element(By.CSS_SELECTOR, "link[rel=icon]")
                .get_attribute("href")
                .startswith("data:image/svg+xml")
            )
            Select(page.find_element(By.ID, "format")).select_by_value("html")
            source = page.find_element(By.ID, "source")
            source.clear()
            source.send_keys(os.environ.get("SERVE_PAGE_HTML") or "<p><b>a b</b> c d</p>")
            page.find_element(By.ID, "translate").click()
            frame = wait.until(lambda p: p.find_element(By.ID, "rendered").get_attribute("srcdoc"))
            if not os.environ.get("SERVE_PAGE_HTML"):
                assert frame == "<p>d c <b>b a</b></p>"
            assert page.find_element(By.ID, "copy").is_displayed()
            assert not page.find_element(By.ID, "busy").is_displayed()
            saved_screenshot(page, screenshot.replace(".png", "_html.png"))
        finally:
            page.quit()


def saved_screenshot(page, path):
    """Writes the page's screenshot to `path`, a PNG of some substance."""
    assert page.save_screenshot(path)
    with open(path, "rb") as image:
        assert image.read(8) == b"\x89PNG\r\n\x1a\n"
    assert os.path.getsize(path) > 10_000


def test_the_server_keeps_every_worker_when_a_fifth_of_its_clients_leave(reverser_export):
    """Issue 77's load target: 12 clients at once, one in five of whose
    requests goes away mid-request (sent whole, the connection closed
    while it waits in the batcher). Every other request gets its own
    translation, no request is lost or hangs, and `/metrics` still counts
    both workers, with nothing left queued."""
    path = reverser_export("CTranslate2Translator")
    expected = CTranslate2Translator(path).translate(SENTENCES)
    flags = ("--workers", "2", "--threads", "1", "--max_batch_size", "8")
    with served(path, *flags, "--batch_timeout_ms", "30") as url:
        port = int(url.rsplit(":", 1)[1])

        def leave(index):
            """A request sent whole, its connection closed before the answer."""
            body = json.dumps({"instances": [SENTENCES[index % len(SENTENCES)]]}).encode()
            head = (
                "POST /v1/models/ende:predict HTTP/1.1\r\nHost: 127.0.0.1\r\n"
                f"Content-Type: application/json\r\nContent-Length: {len(body)}\r\n\r\n"
            )
            with socket.create_connection(("127.0.0.1", port), timeout=30) as connection:
                connection.sendall(head.encode() + body)
                time.sleep(0.005)
            return None

        def ask(index):
            if index % 5 == 4:
                return leave(index)
            body = {"instances": [SENTENCES[index % len(SENTENCES)]]}
            response = httpx.post(f"{url}/v1/models/ende:predict", json=body, timeout=60)
            assert response.status_code == 200, response.text
            return response.json()["predictions"][0]["translation"]

        with concurrent.futures.ThreadPoolExecutor(12) as pool:
            answers = list(pool.map(ask, range(300)))
        for index, answer in enumerate(answers):
            if index % 5 != 4:
                assert answer == expected[index % len(SENTENCES)], index
        deadline = time.time() + 10
        while metric(url, "translation_queued_requests") and time.time() < deadline:
            time.sleep(0.1)
        assert metric(url, "translation_queued_requests") == 0
        assert metric(url, "translation_workers") == 2
        # Both workers still take batches: a second round is answered whole.
        with concurrent.futures.ThreadPoolExecutor(12) as pool:
            again = list(pool.map(lambda i: ask(5 * i), range(48)))
        assert again == [expected[(5 * i) % len(SENTENCES)] for i in range(48)]
