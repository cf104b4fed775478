from setuptools import find_packages
from setuptools import setup

# What runs the exports (runtime/pyproject.toml): its own distribution,
# with no TensorFlow or Keras in its base. Installed from ./runtime in
# development: `pip install -e ./runtime -e ".[test]"` (README.md).
RUNTIME = "keras-transformer-runtime==0.2.0"


def runtime(*extras):
    """The runtime with `extras` (its pyproject.toml's)."""
    return f"keras-transformer-runtime[{','.join(extras)}]==0.2.0"


INSTALL_REQUIRES = [
    # tensorflow-text pulls `tensorflow`; never mix in `tensorflow-cpu`.
    "tensorflow>=2.21,<2.22",
    "tensorflow-text>=2.21,<2.22",
    "keras>=3.15,<4",
    "tensorflow-datasets",
    "tensorboard",  # TF 2.21 no longer installs it; `train` writes logs
    "tensorflow-serving-api>=2.21,<2.22",  # warm-up records, gRPC client
    "sacrebleu>=2.4",
    "sentencepiece",
    "numpy",
    RUNTIME,
]

setup(
    name="keras_transformer",
    version="0.2.0",
    description=(
        'The Transformer of "Attention Is All You Need" as serializable Keras 3 layers and a model.'
    ),
    long_description=open("README.md", encoding="utf-8").read(),
    long_description_content_type="text/markdown",
    packages=find_packages(include=["keras_transformer", "keras_transformer.*"]),
    python_requires=">=3.10",
    install_requires=INSTALL_REQUIRES,
    extras_require={
        # ruff is pinned: `ruff format --check` must not change with its releases.
        # ctranslate2: the CTranslate2 export's tests run in CI (and its
        # converter of Marian models is the second oracle of the import).
        # jax and torch: CI also runs the backend-portable tests on them.
        "test": [
            "pytest",
            "pytest-xdist",  # the tiers run on two workers (-n 2)
            "matplotlib",
            "ruff==0.17.6",
            "ctranslate2>=4.8",
            "jax>=0.10",
            "torch==2.13.0",
            # The Marian import's oracle: Hugging Face's MarianMTModel and
            # MarianTokenizer (PyTorch, pinned above).
            "transformers>=5.0,<6",
            # The on-device exports' runtimes and converter: their tests run in CI.
            "ai-edge-litert>=2.0",
            "tf2onnx>=1.17",
            "onnxruntime>=1.20",
            # The server (`[serve]`), its tests' HTTP client, and the
            # driver of headless Chromium for its page's test; corpus
            # translation (`[beam]`): its pipeline's tests run in CI; eflomal
            # (`[alignment]`): the word links' tests.
            runtime("serve", "beam", "markup", "alignment"),
            "httpx",  # the server tests' own HTTP client
            "httpx2",  # starlette.testclient's (its httpx is deprecated)
            "selenium>=4.20",
        ],
        # KERAS_BACKEND=jax or torch for the layers and the model. torch is
        # pinned to the CPU build that this project's machines carry (an
        # unpinned `torch` pulls the newest CUDA build, several GB).
        "jax": ["jax>=0.10"],
        "torch": ["torch==2.13.0"],
        "examples": ["matplotlib"],
        # Downloading OPUS-MT models (keras_transformer never downloads itself).
        "pretrained": ["huggingface_hub"],
        # export.export_ctranslate2 and `translate --ctranslate2_dir`.
        "ctranslate2": [runtime("ctranslate2")],
        # export.export_litert needs TensorFlow only; LiteRTTranslator and
        # `translate --litert_model` run the file with LiteRT's interpreter.
        "litert": [runtime("litert")],
        # export.export_onnx (tf2onnx) and ONNXTranslator (ONNX Runtime).
        "onnx": ["tf2onnx>=1.17", runtime("onnx")],
        # kt-serve and kt-translate-corpus, the runtime's (no TensorFlow needed).
        "serve": [runtime("serve")],
        "beam": [runtime("beam")],
        # Guided alignment training's word links (training.align_words).
        "alignment": [runtime("alignment")],
        # The peers of benchmarks/compare.py (torch pinned as above).
        "bench": ["keras-hub>=0.32", "torch==2.13.0", "ctranslate2>=4.8"],
    },
    classifiers=[
        "Programming Language :: Python :: 3",
        "Topic :: Scientific/Engineering :: Artificial Intelligence",
    ],
)
