"""The summary of a `wmt_ende.py` run: a table on stdout, `summary.md`
and `summary.json` in the run directory."""

import os

from keras_transformer.training.checkpoints import write_json_atomically


def summary_stage(config, run):
    """Prints the summary table and writes `summary.md` and `summary.json`."""
    trained, scores = run["training"], run["results"]
    steps = f"{trained['final_step']:,}"
    rows = [
        ("data", config.data_source),
        *([("training pairs", run["training_pairs"])] if run.get("training_pairs") else []),
        ("test / valid sentences", f"{run['test_sentences']} / {run['valid_sentences']}"),
        ("vocabulary", f"{run['vocabulary']:,} shared SentencePiece pieces"),
        ("parameters", f"{run['parameters']:,}"),
        ("precision", run.get("precision", "float32")),
        ("steps", steps + (" (time budget reached)" if trained.get("out_of_time") else "")),
        ("training wall time", f"{trained.get('seconds', 0) / 60:.1f} min (this run of training)"),
        ("training tokens/s", f"{trained.get('tokens_per_sec', 0):,.0f} target tokens/s"),
        ("batch shapes", batch_shapes(trained.get("batch_shapes"))),
    ]
    evaluations = [e for e in trained.get("evaluations", []) if "val_bleu" in e]
    if evaluations:
        evaluation_seconds = trained.get("evaluation_seconds", 0.0)
        share = evaluation_seconds / max(trained.get("seconds", 0.0) - evaluation_seconds, 1e-9)
        curve = ", ".join(f"{e['step']}: {e['val_bleu']:.1f}" for e in evaluations)
        rows += [
            ("validation BLEU by step", curve),
            ("evaluation time", f"{evaluation_seconds:.0f} s, {100 * share:.1f}% of training"),
        ]
    budget = trained.get("budget")
    if budget and "warmup_updates" in budget:  # budget.json before 2026-11-30: no warm-up
        rows.append(
            (
                "schedule over the budget",
                f"warm-up {budget['warmup_updates']:,} updates, linear decay to zero at "
                f"{budget['total_steps']:,}; averaging window from update "
                f"{budget['averaging_from']:,}",
            )
        )
    dropout = trained.get("dropout")
    if dropout:
        rows.append(
            (
                "dropout by passes",
                f"{dropout['rate']} for {dropout['passes']} passes over the training data, "
                f"from update {dropout['step']:,}",
            )
        )
    if trained.get("stopped_early"):
        rows.append(("early stopping", f"stopped at step {trained['final_step']:,}"))
    weights = run["weights"]
    rows.append(("exported weights", f"{weights['name']}: {', '.join(weights['checkpoints'])}"))
    rows.append(("chosen because", weights["reason"]))
    for name, result in scores.items():
        name = f"{name} (mean of the directions)" if "directions" in result else name
        rows.append((f"{name} sacreBLEU", f"{result['sacrebleu']:.2f}"))
        rows.append((f"{name} chrF", f"{result['chrf']:.2f}"))
        compound_split = result["tokenized_compound_split_bleu"]
        rows.append((f"{name} tokenized compound-split BLEU", f"{compound_split:.2f}"))
    for name, why in run.get("left_out", {}).items():
        rows.append((f"{name} set", why))
    stages = run.get("stage_seconds", {})
    if stages:
        by_stage = ", ".join(f"{name} {seconds / 60:.1f}" for name, seconds in stages.items())
        rows.append(("wall time by stage (min)", by_stage))
    rows.append(("total wall time", f"{run['minutes']:.1f} min" + budget_margin(config, run)))
    table = "| | |\n| --- | --- |\n" + "\n".join(f"| {k} | {v} |" for k, v in rows)
    table += direction_table(config, scores)
    print("\n" + table)
    with open(os.path.join(config.model_dir, "summary.md"), "w") as f:
        f.write(table + "\n")
    summary = {"config": config.to_json(), **run}
    # In the order of the run (the stages' times).
    path = os.path.join(config.model_dir, "summary.json")
    write_json_atomically(path, summary, sort_keys=False)


def direction_table(config, scores):
    """A multilingual run's scores per direction, as a Markdown table after
    a blank line (`""` for a run of one direction)."""
    sets = [name for name in ("test", "valid") if "directions" in scores.get(name, {})]
    if not sets:
        return ""
    header = ["direction"]
    for name in sets:
        header += [f"{name} sacreBLEU", f"{name} chrF", f"{name} off-target"]
    lines = ["| " + " | ".join(header) + " |", "|" + " --- |" * len(header)]
    for code in scores[sets[0]]["directions"]:
        cells = [f"{config.source_lang}→{code}"]
        for name in sets:
            each = scores[name]["directions"][code]
            cells += [f"{each['sacrebleu']:.2f}", f"{each['chrf']:.2f}"]
            cells.append(f"{100 * each['off_target']:.1f}%")
        lines.append("| " + " | ".join(cells) + " |")
    return "\n\n" + "\n".join(lines)


def budget_margin(config, run):
    """How the run's wall time compares with --budget_minutes, as text:
    the minutes to spare, or over."""
    budget = config.budget_minutes
    if not budget:
        return ""
    margin = budget - run["minutes"]
    if margin >= 0:
        return f" (budget {budget:g} min: {margin:.1f} min to spare)"
    return f" (budget {budget:g} min: over by {-margin:.1f} min)"


def batch_shapes(shapes):
    """The training batches' shapes, as `training_done.json` records them."""
    if not shapes:
        return "dynamic: each batch padded to its own longest sentence"
    return (
        f"{len(shapes['lengths'])} (lengths {shapes['lengths'][0]} to {shapes['lengths'][-1]}); "
        f"padding {100 * shapes['source_padding']:.1f}% of source and "
        f"{100 * shapes['target_padding']:.1f}% of target positions"
    )
