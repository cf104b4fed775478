"""The settings of `wmt_ende.py`: one dataclass, its presets, its flags.

Every field of `RunConfig` is one command-line flag, with its type, help
and default read from the field (`wmt_fields`); `RUN_PRESETS` change
several defaults at once; `parse_config` applies the defaults, then the
preset, then the flags.

    config = parse_config(["--preset", "small", "--train_steps", "500"])
"""

import dataclasses
import os

from wmt_checks import check_flags
from wmt_corpora import CORPORA
from wmt_presets import DATA_PRESETS
from wmt_presets import RUN_PRESETS

import keras_transformer as kt
from keras_transformer import training
from keras_transformer.training.devices import MIXED_PRECISION
from keras_transformer.training.devices import STRATEGIES
from keras_transformer.training.settings import LEARNING_RATE_SCHEDULES

from wmt_fields import build_parser
from wmt_fields import data_file
from wmt_fields import model_setting
from wmt_fields import setting
from wmt_fields import settings_fields

KEEP_BEST = ("val_bleu", "val_chrf", "none")
# average_last: the paper's average of the last checkpoints; best: the
# checkpoint with the best `keep_best` score; average_best: the average of
# the best `average_last` checkpoints by it.
EXPORT_WEIGHTS = ("auto", "average_last", "best", "average_best")
# --static_shapes: make_batches' static_shapes.
STATIC_SHAPES = {"auto": "auto", "yes": True, "no": False}


@dataclasses.dataclass
class _RunSettings:
    """The flags of `RunConfig` up to its training flags of its own."""

    preset: str = setting("base", "run preset: sets the values it names below", "run")
    model_dir: str | None = setting(None, "checkpoints, logs, results", "run", shown="runs/PRESET")
    export_dir: str | None = setting(None, "TF Serving base directory", "run", shown="no export")
    verbose: bool = setting(
        False,
        "show the native libraries' start-up and INFO lines (TensorFlow, absl, oneDNN, "
        "SentencePiece), which are filtered out of stderr otherwise",
        "run",
    )
    ctranslate2_dir: str | None = setting(
        None,
        "also write an int8 CTranslate2 export here, which the runtime runs without TensorFlow "
        "(the [ctranslate2] extra)",
        "run",
        shown="none",
    )
    budget_minutes: float | None = setting(
        None,
        "wall-time budget of the whole command (vocabulary, training, averaging, evaluation, "
        "export): training gets what is left after the estimated time of the stages after it",
        "run",
        shown="none",
    )
    data: str | None = setting(
        None,
        "a named corpus, downloaded into --data_dir when missing, and its run settings; "
        "the file flags below override its files",
        "data",
        tuple(CORPORA),
        shown="none, TFDS or the files below are read",
    )
    data_dir: str | None = setting(None, "where --data's files are", "data", shown="data/DATA")
    data_url: str | None = setting(
        None, "where --data's missing files are downloaded from", "data", shown="the corpus's URL"
    )
    data_digests: bool = setting(
        True,
        "check each --data file's text against the corpus's SHA-256 (off: a mirror's "
        "files, used knowingly)",
        "data",
    )
    train_src: str | None = data_file("training", "sources")
    train_tgt: str | None = data_file("training", "targets")
    valid_src: str | None = data_file("validation", "sources")
    valid_tgt: str | None = data_file("validation", "references")
    test_src: str | None = data_file("test", "sources")
    test_ref: str | None = data_file("test", "references")
    tfds_name: str = setting("wmt14_translate/de-en", "TFDS data set", "data")
    tfds_data_dir: str | None = setting(None, "TFDS data directory", "data", shown="TFDS's")
    source_lang: str = setting("en", "source language: TFDS feature, or --data's", "data")
    target_langs: str = setting(
        "de",
        "target language: TFDS feature, or --data's; with --data, several comma-separated "
        "(de,fr,cs) train one multilingual model, each source tagged with its target (>>fr<<)",
        "data",
        frozen=True,
    )
    temperature: float = setting(
        5.0,
        "several --target_langs: each pair is drawn from a language's corpus with probability "
        "proportional to its size^(1/temperature) (1: proportional; larger: more uniform)",
        "data",
    )
    max_eval_sentences: int | None = setting(None, "sentences evaluated", "data", shown="all")
    tokenizer_sentences: int = setting(
        2_000_000, "pairs the vocabulary is trained on", "data", frozen=True
    )
    monolingual_tgt: str | None = setting(
        None,
        "back-translation: target-language text to translate into the source language and "
        "train on, comma-separated file patterns (plain or .gz)",
        "synthetic data",
        shown="none",
        frozen=True,
    )
    backtranslate_with: str | None = setting(
        None,
        "back-translation: the reverse model: a run's --model_dir, an export, or an OPUS-MT "
        "directory",
        "synthetic data",
        shown="none",
        frozen=True,
    )
    bt_search: str = setting(
        "beam", "back-translation: beam search or one random draw", "synthetic data",
        ("beam", "sample"), frozen=True,
    )  # fmt: skip
    bt_tag: bool = setting(
        False, "back-translation: mark synthetic sources with <BT>", "synthetic data", frozen=True
    )
    bt_ratio: float | None = setting(
        None, "back-translation: synthetic pairs drawn per real pair", "synthetic data",
        shown="their numbers' ratio",
    )  # fmt: skip
    distill_from: str | None = setting(
        None,
        "distillation: train on this teacher's beam translations of the training sources "
        "(a run's --model_dir, an export, or an OPUS-MT directory)",
        "synthetic data",
        shown="none",
        frozen=True,
    )
    synthetic_workers: int | None = setting(
        None, "processes translating synthetic data", "synthetic data", shown="the cores"
    )
    strategy: str = setting("auto", "tf.distribute strategy", "devices", STRATEGIES)
    mixed_precision: str = setting(
        "auto",
        "dtype policy (auto: bf16 on GPUs and on CPUs with native bf16, else none)",
        "devices",
        ("auto", *MIXED_PRECISION),
    )
    model: str = setting(
        "base", "Transformer preset", "model", tuple(kt.models.PRESETS), frozen=True
    )
    vocab_size: int = setting(37000, "shared SentencePiece vocabulary size", "model", frozen=True)
    num_layers: int | None = model_setting("layers N of the encoder and the decoder")
    num_encoder_layers: int | None = model_setting(
        "encoder depth where it differs from --num_layers (a deep encoder and a shallow "
        "decoder translate faster: the search runs the decoder once a token)"
    )
    num_decoder_layers: int | None = model_setting(
        "decoder depth where it differs from --num_layers"
    )
    d_model: int | None = model_setting("model width")
    num_heads: int | None = model_setting("attention heads")
    d_ff: int | None = model_setting("feed-forward inner size")
    dropout: float | None = model_setting("P_drop", frozen=False)
    attention_dropout: float | None = model_setting("dropout on attention weights", frozen=False)
    relu_dropout: float | None = model_setting("dropout inside the feed-forward", frozen=False)
    dropout_by_passes: str | None = setting(
        None,
        "P_drop from the passes over the training data the run makes, as PASSES:RATE points "
        "linear between (e.g. 9:0.1,14:0.2), chosen after the warm-up under a time budget; "
        "none: --dropout throughout (a --dropout given means none)",
        "model",
        shown="none",
    )
    norm_first: bool | None = model_setting("pre-norm instead of the paper's post-norm")
    position_encoding: str | None = model_setting("positions", ("sinusoidal", "learned"))
    alignment_heads: int | None = model_setting(
        "heads of the last decoder layer's cross-attention averaged into word alignments "
        "(markup placement), the first ones (default all; 1 with --guided_alignment)"
    )
    max_length: int = setting(
        256, "longest sequence in tokens", "model", model_argument=True, frozen=True
    )
    init_from: str | None = setting(
        None,
        "fine-tune: start from this model and keep its vocabulary: a Hugging Face Marian "
        "(OPUS-MT) directory or the --model_dir of a finished run (the model flags above "
        "are then the starting model's)",
        "fine-tuning",
        shown="none: a new model",
        frozen=True,
    )
    freeze: str | None = setting(
        None,
        "fine-tune: parts that do not train, comma-separated: embeddings, encoder, decoder",
        "fine-tuning",
        shown="none",
        frozen=True,
    )
    lora_rank: int | None = setting(
        None,
        "fine-tune: train LoRA factors of this rank (Keras's Dense.enable_lora) on every "
        "attention and feed-forward layer and nothing else; merged before evaluation and export",
        "fine-tuning",
        shown="none",
        frozen=True,
    )
    lora_alpha: float | None = setting(
        None, "fine-tune: LoRA's scale numerator", "fine-tuning", shown="lora_rank", frozen=True
    )
    batch_tokens: int = setting(4096, "tokens per micro-batch and replica", "training")
    update_tokens: int = setting(25000, "tokens per update, by accumulation", "training")
    static_shapes: str = setting(
        "auto",
        "pad batches to at most --max_shapes shapes fitted to the corpus, so that XLA compiles "
        "the training step once per shape (auto: where the step is XLA-compiled: GPUs)",
        "training",
        tuple(STATIC_SHAPES),
    )
    max_shapes: int = setting(24, "batch shapes under --static_shapes", "training")
    learning_rate_schedule: str = setting(
        "auto",
        "paper: warm-up then inverse square root; budget: warm-up for --warmup_fraction of the "
        "updates, then linear decay to zero at the end of the time budget or of --train_steps; "
        "auto: budget under a time budget, else paper",
        "training",
        LEARNING_RATE_SCHEDULES,
    )
    warmup_fraction: float = setting(
        0.1, "budget schedule: part of the updates warming up", "training"
    )
    keep_checkpoints: int | None = setting(
        None, "checkpoints kept", "training", shown="max(5, average_last)"
    )
    average_last: int = setting(5, "checkpoints averaged at the end", "training")
    averaging_fraction: float = setting(
        0.2, "budget schedule: last part of the updates the averaged checkpoints come from",
        "training",
    )  # fmt: skip
    max_train_minutes: float | None = setting(
        None, "wall-time budget of training", "training", shown="none"
    )
    seed: int = setting(0, "seed of the vocabulary, weights and dropout", "training")
    guided_alignment: bool = setting(
        False,
        "guided alignment training (Garg et al., 2019): the alignment heads learn eflomal's "
        "word links of the training pairs (pip install eflomal), so that markup lands on the "
        "right words; weighted by --guided_alignment_weight",
        "training",
        frozen=True,
    )
    sampling_alpha: float | None = setting(
        None, "subword regularization of the training data (e.g. 0.1)", "training", shown="none"
    )


# The run sets these settings from its own flags: accumulation from
# --update_tokens, precision from --mixed_precision, the best checkpoints
# and early stopping from --keep_best, --average_last and
# --early_stopping_patience, evaluations from --eval_every.
SET_BY_THE_RUN = (
    "accumulation_steps", "precision", "keep_best", "best_monitor", "patience", "min_delta",
    "restore_best_weights", "evaluate_every", "validation_steps", "tensorboard",
)  # fmt: skip
# The other `TrainingSettings` of one value are flags of the same name, their
# defaults and help the package's (--train_steps, --label_smoothing, ...).
_TrainingFlags = dataclasses.make_dataclass(
    "_TrainingFlags",
    settings_fields(
        training.TrainingSettings,
        "training",
        left_out={*SET_BY_THE_RUN, *(field.name for field in dataclasses.fields(_RunSettings))},
    ),
    bases=(_RunSettings,),
)


@dataclasses.dataclass
class RunConfig(_TrainingFlags):
    """Every setting of a run. Each field is a command-line flag; the
    defaults are the paper's base run, and `RUN_PRESETS` change some."""

    eval_every: int | None = setting(
        None, "updates between validation BLEU evaluations (0: none)", "evaluation",
        shown="steps_per_checkpoint",
    )  # fmt: skip
    eval_sentences: int = setting(1000, "validation sentences each evaluation", "evaluation")
    eval_beam_size: int = setting(1, "beam width of those evaluations (1: greedy)", "evaluation")
    eval_max_extra_length: int = setting(
        10, "output tokens beyond the source length in those evaluations", "evaluation"
    )
    keep_best: str = setting(
        "val_bleu", "score the best checkpoints are kept by", "evaluation", KEEP_BEST
    )
    early_stopping_patience: int | None = setting(
        None, "evaluations without improvement before stopping", "evaluation", shown="none"
    )
    export_weights: str = setting(
        "auto",
        "weights evaluated and exported (auto: the best on validation of the others)",
        "evaluation",
        EXPORT_WEIGHTS,
    )
    beam_size: int = setting(4, "beam width", "decoding")
    alpha: float = setting(0.6, "length penalty", "decoding")
    max_extra_length: int = setting(50, "output tokens beyond the source length", "decoding")
    eval_batch_size: int = setting(64, "sentences per translation batch", "decoding")

    def __post_init__(self):
        self.model_dir = self.model_dir or os.path.join("runs", self.preset)
        self.keep_checkpoints = self.keep_checkpoints or max(5, self.average_last)
        if self.eval_every is None:
            self.eval_every = self.steps_per_checkpoint
        if self.data:
            self.data_dir = self.data_dir or os.path.join("data", self.data)
            corpus, languages = CORPORA[self.data], (self.source_lang, self.target_codes[0])
            for role, names in (("train", ("train_src", "train_tgt")),
                                ("valid", ("valid_src", "valid_tgt")),
                                ("test", ("test_src", "test_ref"))):  # fmt: skip
                for name, language in zip(names, languages, strict=True):
                    if getattr(self, name) is None:
                        path = os.path.join(self.data_dir, corpus.file_name(role, language))
                        setattr(self, name, path)

    @property
    def target_codes(self):
        """`--target_langs`, one code each, in order."""
        return tuple(code.strip() for code in self.target_langs.split(","))

    @property
    def multilingual(self):
        """Whether the run trains one model for several target languages."""
        return len(self.target_codes) > 1

    @property
    def local_files(self):
        return [self.train_src, self.train_tgt, self.test_src, self.test_ref]

    @property
    def uses_tfds(self):
        return not self.multilingual and not all(self.local_files)

    @property
    def data_source(self):
        if self.data:
            return f"{self.data} ({self.data_dir})"
        return f"tfds:{self.tfds_name}" if self.uses_tfds else "local files"

    def model_arguments(self):
        """The `Transformer.from_preset` overrides that are set."""
        return model_arguments_of(dataclasses.asdict(self))

    @classmethod
    def frozen_settings(cls):
        """The settings a rerun in the same model_dir may not change."""
        return tuple(f.name for f in dataclasses.fields(cls) if f.metadata["frozen"])

    def to_json(self):
        return {**dataclasses.asdict(self), "data": self.data_source}


def model_arguments_of(settings):
    """The `Transformer.from_preset` overrides set in `settings`, a
    `RunConfig` as a dict (e.g. a finished run's stored configuration)."""
    names = [f.name for f in dataclasses.fields(RunConfig) if f.metadata["model_argument"]]
    arguments = {name: settings[name] for name in names if settings.get(name) is not None}
    if settings.get("guided_alignment"):  # one head learns the links, as Garg et al.
        arguments.setdefault("alignment_heads", 1)
    return arguments


# Flags renamed, refused with what to use (not taken as abbreviations).
FORMER_FLAGS = {
    "target_lang": "the languages a run trains into are --target_langs (de, or de,fr,cs); "
    "--target_lang is kt-translate's, the one language to translate into",
}


def parse_config(argv=None, description=None):
    """The `RunConfig` of a command line: the defaults, then the run
    preset, then the `--data` corpus's `DATA_PRESETS`, then the flags
    given. Exits with a usage error for incomplete local data or a
    language the corpus lacks."""
    parser = build_parser(RunConfig, description, FORMER_FLAGS)
    given = {k: v for k, v in vars(parser.parse_args(argv)).items() if v is not None}
    data = DATA_PRESETS.get(given.get("data"), {})
    preset = given.get("preset", data.get("preset", RunConfig.preset))
    config = RunConfig(**{**RUN_PRESETS[preset], **data, **given})
    if "dropout" in given and "dropout_by_passes" not in given:
        config.dropout_by_passes = None  # the rate asked for, throughout
    check_flags(parser, config)
    return config
