"""How `wmt_ende.py`'s settings become flags: each field of its settings
dataclass is made by `setting` (its help, `--help` section, choices, and
whether it is a model argument or frozen in a run directory), and
`build_parser` makes one flag of each, its help naming the default and
what each preset sets."""

import argparse
import dataclasses
import inspect
import re
import types

from wmt_presets import DATA_PRESETS
from wmt_presets import RUN_PRESETS


def setting(default, help, group, choices=None, shown=None, model_argument=False, frozen=False):
    """A `RunConfig` field.

    Args:
        default: the value of the paper's base run.
        help: the flag's help text.
        group: the `--help` section.
        choices: the accepted values, if limited.
        shown: how `--help` names the default when it is `None`.
        model_argument: passed to `Transformer.from_preset` when set.
        frozen: decides the vocabulary or the weights, so a rerun in the
            same model_dir may not change it.
    """
    metadata = dict(help=help, group=group, choices=choices, shown=shown)
    metadata.update(model_argument=model_argument, frozen=frozen)
    return dataclasses.field(default=default, metadata=metadata)


def model_setting(help, choices=None, frozen=True):
    """A `Transformer` argument; unset, the model preset's value holds."""
    shown = "the model preset's"
    return setting(None, help, "model", choices, shown, model_argument=True, frozen=frozen)


def data_file(split, side):
    """A local corpus file: one sentence a line, plain or .gz, aligned."""
    help = f"{split} {side}, one sentence a line, plain or .gz"
    return setting(None, help, "data", shown="--data's, else none: TFDS is read")


def settings_fields(settings_class, group, left_out=()):
    """The fields of a settings dataclass of the package (e.g.
    `TrainingSettings`) that are one flag each, for `make_dataclass`:
    every field of one plain value (a number, a string, a switch), not in
    `left_out`, with the class's default and, as help, the class
    docstring's `Attributes:` line for it.

    >>> [name for name, _, _ in settings_fields(TrainingSettings, "training")][:2]
    ['train_steps', 'steps_per_checkpoint']
    """
    described = _attribute_docs(settings_class)
    fields = []
    for field in dataclasses.fields(settings_class):
        if field.name in left_out or _flag_type(field.type) not in (int, float, str, bool):
            continue
        shown = "none" if field.default is None else None
        help = described[field.name]
        fields.append((field.name, field.type, setting(field.default, help, group, shown=shown)))
    return fields


def _attribute_docs(cls):
    """{name: text} of the `Attributes:` section of `cls`'s Google-style
    docstring, each text on one line."""
    section = inspect.cleandoc(cls.__doc__).split("Attributes:\n", 1)[1]
    section = re.split(r"\n\S", section, maxsplit=1)[0]  # up to the next heading
    entries = re.findall(r"^    (\w+): (.*?)(?=^    \w+: |\Z)", section, re.M | re.S)
    return {name: " ".join(text.split()).rstrip(".") for name, text in entries}


def _flag_type(annotation):
    """`int` for `int` and for `int | None`; likewise for other types."""
    if isinstance(annotation, types.UnionType):
        return next(a for a in annotation.__args__ if a is not type(None))
    return annotation


def _default_text(field):
    shown = field.metadata["shown"] if field.default is None else field.default
    by_preset = [f"{name}: {p[field.name]}" for name, p in RUN_PRESETS.items() if field.name in p]
    if field.name == "data":
        by_preset += [
            f"{name} sets " + " ".join(f"--{k} {v}" for k, v in p.items())
            for name, p in DATA_PRESETS.items()
        ]
    return f"default: {shown}" + (f"; {', '.join(by_preset)}" if by_preset else "")


class _Former(argparse.Action):
    """A flag that was renamed: stops with what to use instead."""

    def __init__(self, option_strings, dest, why=None, **kwargs):
        super().__init__(option_strings, dest, **kwargs)
        self.why = why

    def __call__(self, parser, namespace, values, option_string=None):
        parser.error(f"{option_string}: {self.why}")


def build_parser(config_class, description=None, former=None):
    """The command line: one flag per field of `config_class` (a dataclass
    of `setting` fields), with its default; each of `former` ({flag: what
    to use instead}) is refused with its message."""
    parser = argparse.ArgumentParser(
        description=description, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    for flag, why in (former or {}).items():
        parser.add_argument(f"--{flag}", action=_Former, why=why, help=argparse.SUPPRESS)
    groups = {}
    for field in dataclasses.fields(config_class):
        if field.metadata["group"] not in groups:
            groups[field.metadata["group"]] = parser.add_argument_group(field.metadata["group"])
        group = groups[field.metadata["group"]]
        options = dict(default=None, help=f"{field.metadata['help']} ({_default_text(field)})")
        if _flag_type(field.type) is bool:
            options["action"] = argparse.BooleanOptionalAction
        else:
            options["type"] = _flag_type(field.type)
        choices = RUN_PRESETS if field.name == "preset" else field.metadata["choices"]
        if choices:
            options["choices"] = sorted(choices)
        group.add_argument(f"--{field.name}", **options)
    return parser
