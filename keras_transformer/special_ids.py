"""The token ids with a fixed meaning everywhere in the package.

`PAD_ID` pads batches and is masked out of attention and the loss; a
tokenizer's unknown pieces map to `UNK_ID`; targets start with `BOS_ID` on
the decoder input side and every sequence ends with `EOS_ID` (see
`keras_transformer.training.data`). The SentencePiece models this package
trains use exactly these ids.
"""

PAD_ID = 0
UNK_ID = 1
BOS_ID = 2
EOS_ID = 3
