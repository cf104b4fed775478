"""The token ids with a fixed meaning everywhere in the package.

`PAD_ID` pads batches and is masked out of attention and the loss; a
tokenizer's unknown pieces map to `UNK_ID`; targets start with `BOS_ID` on
the decoder input side and every sequence ends with `EOS_ID` (see
`keras_transformer.training.data`). The SentencePiece models this package
trains use exactly these ids (`SPECIAL_IDS`), and ids from
`NUM_SPECIAL_IDS` on are ordinary pieces.

These are defaults: a `Transformer(pad_id=...)` and a tokenizer whose model
defines other ids are honoured by `Translator`, and `make_batches` takes
the ids as arguments.
"""

PAD_ID = 0
UNK_ID = 1
BOS_ID = 2
EOS_ID = 3
NUM_SPECIAL_IDS = 4

# The logit bias of an id a model never outputs (an imported Marian
# model's decoder-start id): the loss does not smooth over such ids.
NEVER_LOGIT_BIAS = -1e9

# The keyword arguments of SentencePiece's trainer that fix these ids.
SPECIAL_IDS = {"pad_id": PAD_ID, "unk_id": UNK_ID, "bos_id": BOS_ID, "eos_id": EOS_ID}
