"""The final evaluation of a `wmt_ende.py` run: the test and valid sets
translated (within what is left of a budget) and scored, per direction for
a multilingual run, with the translations recorded so that a rerun only
reports."""

import hashlib
import json
import os
import random
import time

from wmt_corpora import CORPORA

from keras_transformer import training
from keras_transformer.training.checkpoints import write_json_atomically
from keras_transformer_runtime.text import files as text_files

from bleu import bleu_scores

# Batches translated at a time under a budget, which may end the test set
# between chunks.
CHUNK_BATCHES = 4


def evaluation_stage(config, translator, data, weights_marker=None, seconds_left=None):
    """Translates the test and valid sets; returns `(scores, hypotheses,
    left_out)`, the first two keyed by set name. A multilingual run scores
    each direction (`directions`, with its off-target rate) and reports
    their means. A set translated before by the same weights and settings
    (`weights_marker`, recorded in `model_dir/hypotheses.NAME.json`) is
    scored from that record: a finished run's rerun only reports.

    Under a budget (`seconds_left()`, the seconds it has left), the run
    ends within it: the test set is translated `CHUNK_BATCHES` batches at
    a time while the next chunk fits (a barely trained model's outputs run
    on to the length limit, which no estimate before the end knows), and
    scored on the sentences translated; the valid set only if it fits
    whole at the test set's time per sentence. `left_out` says what the
    budget left out of each set, and why (and a rerun says it again)."""
    scores, hypotheses, left_out = {}, {}, {}
    identifier = language_identifier(config) if config.multilingual else None
    per_sentence = None  # the test set's
    for name, split in (("test", data.test), ("valid", data.valid)):
        if not split or not split[0]:
            continue
        sources, references = split
        target_lang = data.languages_of(name)
        record = os.path.join(config.model_dir, f"hypotheses.{name}.json")
        marker = {"weights": weights_marker, "sources": _digest(sources)}
        recorded = _recorded(record, marker) if weights_marker else {}
        needed = None if per_sentence is None else per_sentence * len(sources)
        if not recorded and needed and seconds_left and needed > seconds_left():
            recorded = {
                "left_out": f"not translated: about {needed:.0f} s at the test set's "
                f"{1000 * per_sentence:.1f} ms per sentence, {max(0.0, seconds_left()):.0f} s "
                "of the budget left"
            }
            # A rerun reports what this run did, and translates nothing.
            write_json_atomically(record, {**marker, **recorded})
        if "hypotheses" in recorded:
            hypotheses[name] = recorded["hypotheses"]
            print(f"{name}: {len(hypotheses[name])} translations of the same weights (recorded)")
        elif not recorded:
            started = time.perf_counter()
            rows, hypotheses[name] = _translated_in_time(
                config, translator, sources, target_lang, f"translating {name}", seconds_left
            )
            per_sentence = (time.perf_counter() - started) / len(rows)
            recorded = {"hypotheses": hypotheses[name]}
            if len(rows) < len(sources):
                recorded["rows"] = rows
                recorded["left_out"] = (
                    f"{len(rows):,} of {len(sources):,} sentences translated and scored (a "
                    f"sample of the whole set), at {1000 * per_sentence:.1f} ms per sentence: "
                    "the rest did not fit the budget"
                )
            write_json_atomically(record, {**marker, **recorded})
        if "left_out" in recorded:
            left_out[name] = recorded["left_out"]
            print(f"{name}: {left_out[name]}")
        if "hypotheses" not in recorded:
            continue
        if "rows" in recorded:  # what the budget left of the set
            references = [references[row] for row in recorded["rows"]]
            if isinstance(target_lang, (list, tuple)):
                target_lang = [target_lang[row] for row in recorded["rows"]]
        # One line per sentence, whatever a translation holds.
        lines = [" ".join(h.splitlines()) for h in hypotheses[name]]
        with open(os.path.join(config.model_dir, f"hypotheses.{name}.txt"), "w") as f:
            f.write("\n".join(lines) + "\n")
        if target_lang:
            scores[name] = direction_scores(hypotheses[name], references, target_lang, identifier)
        else:
            scores[name] = bleu_scores(hypotheses[name], references)
        result = scores[name]
        mean = "mean of the directions' " if target_lang else ""
        print(
            f"{name}: {mean}sacreBLEU {result['sacrebleu']:.2f} ({result['signature']}); chrF "
            f"{result['chrf']:.2f} ({result['chrf_signature']}); tokenized compound-split BLEU "
            f"(the paper's measure) {result['tokenized_compound_split_bleu']:.2f}"
        )
        for code, each in result.get("directions", {}).items():
            print(
                f"  {config.source_lang}->{code}: sacreBLEU {each['sacrebleu']:.2f}, chrF "
                f"{each['chrf']:.2f}, off-target {100 * each['off_target']:.1f}% "
                f"({each['sentences']} sentences)"
            )
    return scores, hypotheses, left_out


def _translated_in_time(config, translator, sources, target_lang, progress, seconds_left):
    """`(rows, hypotheses)`: `sources` translated `CHUNK_BATCHES` batches
    at a time while the time the last chunk took is left (`seconds_left()`;
    all of them at once without it), at least one chunk. The chunks take
    the rows in an order shuffled with a fixed seed, so that those
    translated are a sample of the whole set (each direction of a
    multilingual set, one after the other, has its share)."""
    order, size = list(range(len(sources))), len(sources)
    if seconds_left is not None:
        size = CHUNK_BATCHES * config.eval_batch_size
        random.Random(0).shuffle(order)
    done, last = {}, 0.0
    for start in range(0, len(order), size):
        if done and seconds_left is not None and last > seconds_left():
            break
        rows = order[start : start + size]
        started = time.perf_counter()
        languages = target_lang
        if isinstance(target_lang, (list, tuple)):
            languages = [target_lang[row] for row in rows]
        translated = translator.translate(
            [sources[row] for row in rows],
            config.eval_batch_size,
            progress=f"{progress} ({len(done) + len(rows):,} of {len(sources):,})",
            target_lang=languages,
        )
        done.update(zip(rows, translated, strict=True))
        last = time.perf_counter() - started
    rows = sorted(done)
    return rows, [done[row] for row in rows]


def _digest(texts):
    """The SHA-256 of `texts`, one per line."""
    return hashlib.sha256("\n".join(texts).encode("utf-8", "replace")).hexdigest()


def _recorded(path, marker):
    """What `path` records for `marker`: `{"hypotheses": [...]}` (with
    `"rows"` and `"left_out"` for a set the budget cut short, the rows
    translated and why), or `{"left_out": why}` for a set the budget left
    out; `{}` for nothing."""
    if not os.path.exists(path):
        return {}
    with open(path, encoding="utf-8") as f:
        recorded = json.load(f)
    if {k: recorded.get(k) for k in marker} != marker:
        return {}
    return {k: recorded[k] for k in ("hypotheses", "rows", "left_out") if k in recorded}


def weights_marker(translator, trained, weights):
    """What a set's translations depend on: the weights (the final step
    and the checkpoints, by name) and the decoding settings."""
    return {
        "step": trained["final_step"],
        "checkpoints": weights["checkpoints"],
        "settings": translator.settings.to_dict(),
    }


def language_identifier(config, sentences=5000):
    """The identifier of off-target outputs: character n-grams of the first
    `sentences` training lines of the source and each target language."""
    corpus = CORPORA[config.data]
    codes = (config.source_lang, *config.target_codes)
    texts = {}
    for code in codes:
        path = os.path.join(config.data_dir, corpus.file_name("train", code))
        lines = text_files.iter_lines(path, errors="replace")
        texts[code] = [line for _, line in zip(range(sentences), lines, strict=False)]
    return training.LanguageIdentifier.train(texts)


def direction_scores(hypotheses, references, target_lang, identifier):
    """A multilingual set's scores: each direction's `bleu_scores` and its
    `off_target` rate (`identifier`), and the means of the directions'."""
    directions = {}
    for code in dict.fromkeys(target_lang):
        rows = [i for i, lang in enumerate(target_lang) if lang == code]
        found = [hypotheses[i] for i in rows]
        directions[code] = {
            **bleu_scores(found, [references[i] for i in rows]),
            "off_target": identifier.off_target_rate(found, code),
        }
    first = next(iter(directions.values()))
    means = {
        key: sum(d[key] for d in directions.values()) / len(directions)
        for key in ("sacrebleu", "chrf", "tokenized_compound_split_bleu", "off_target")
    }
    return {
        **means,
        "signature": first["signature"],
        "chrf_signature": first["chrf_signature"],
        "sentences": len(hypotheses),
        "directions": directions,
    }
