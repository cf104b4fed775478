"""The runtime's layout: it imports nothing of the training package, its
modules import each other without a cycle, and each imports only the
standard library and what its extra installs (the CI round without
TensorFlow, Keras, JAX or PyTorch runs these tests too)."""

import ast
import pathlib
import sys

import keras_transformer_runtime

RUNTIME_DIR = pathlib.Path(keras_transformer_runtime.__file__).parent
PACKAGE = "keras_transformer_runtime"
# What each part may import besides the standard library and the runtime:
# the base needs NumPy and SentencePiece; the rest, their extras.
BASE = {"numpy", "sentencepiece"}
EXTRAS = {
    "runners/ctranslate2.py": {"ctranslate2"},
    "runners/litert.py": {"ai_edge_litert"},
    "runners/onnx.py": {"onnxruntime"},
    "runners/saved_model.py": {"tensorflow", "tensorflow_text"},  # [saved_model]
    "serve.py": {"starlette", "uvicorn", "prometheus_client"},
    "serving": {"starlette", "uvicorn", "prometheus_client"},
    "corpus/pipeline.py": {"apache_beam"},
    "corpus/inputs.py": {"apache_beam"},
    "corpus/output.py": {"apache_beam"},
    "text/html.py": {"selectolax"},  # [markup]
    "text/markdown.py": {"markdown_it"},  # [markup]
    "text/word_links.py": {"eflomal"},  # [alignment]
}
MAX_MODULE_LINES = 400


def modules():
    return sorted(p for p in RUNTIME_DIR.rglob("*.py") if "__pycache__" not in p.parts)


def name_of(path):
    """`keras_transformer_runtime.runners.ctranslate2` for its file."""
    parts = path.relative_to(RUNTIME_DIR.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def imports(path, top_level_only=False):
    """The modules `path` imports (`from a import b`: `a.b` where that is a
    module, else `a`); with `top_level_only`, those imported when it is
    (not inside a function)."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    nodes = tree.body if top_level_only else ast.walk(tree)
    names = set()
    for node in nodes:
        if isinstance(node, ast.Import):
            names |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            for alias in node.names:
                candidate = f"{node.module}.{alias.name}"
                names.add(candidate if candidate in MODULES else node.module)
    return names


MODULES = {name_of(p) for p in modules()}


def test_the_runtime_imports_only_the_standard_library_and_its_extras():
    for path in modules():
        relative = path.relative_to(RUNTIME_DIR).as_posix()
        extra = EXTRAS.get(relative, EXTRAS.get(relative.split("/")[0], set()))
        allowed = set(sys.stdlib_module_names) | {PACKAGE} | BASE | extra
        assert {name.split(".")[0] for name in imports(path)} <= allowed, relative


def test_the_runtime_imports_nothing_of_the_training_package():
    for path in modules():
        assert not {n for n in imports(path) if n.split(".")[0] == "keras_transformer"}, path


def first_cycle(graph):
    """A cycle of `graph` (`{node: the nodes it points to}`) as a list of
    nodes that starts and ends with the same one, or `None` (depth-first
    search)."""
    state = {}

    def visit(name, path):
        state[name] = "open"
        for other in sorted(graph[name]):
            if state.get(other) == "open":
                return [*path[path.index(other) :], other]
            if other not in state and (cycle := visit(other, [*path, other])):
                return cycle
        state[name] = "done"
        return None

    for name in sorted(graph):
        if name not in state and (cycle := visit(name, [name])):
            return cycle
    return None


def test_first_cycle_finds_cycles_and_only_cycles():
    assert first_cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert first_cycle({"a": {"b", "c"}, "b": {"c"}, "c": set()}) is None


def test_the_runtime_has_no_import_cycle():
    """Among the imports a module makes when it is imported."""
    graph = {
        name_of(p): {n for n in imports(p, top_level_only=True) if n in MODULES} for p in modules()
    }
    assert first_cycle(graph) is None


def test_modules_stay_under_the_line_limit():
    long = {
        str(p.relative_to(RUNTIME_DIR)): n
        for p in modules()
        if (n := len(p.read_text(encoding="utf-8").splitlines())) > MAX_MODULE_LINES
    }
    assert long == {}
