"""The Markdown table of a comparison run, with same-run ratios and the
performance targets."""

import statistics

from comparison.peer_ctranslate2 import setting_name
from comparison.workload import BEAM

# The peers each of our rows is compared with, and the target ratio where one
# is set.
TARGETS = {
    ("train", "fp32"): [("keras_hub", "fp32", 1.15), ("torch", "fp32", None)],
    ("train", "bf16"): [("keras_hub", "bf16", 1.3), ("torch", "bf16", None)],
    ("greedy", "fp32"): [
        ("keras_hub", "fp32", 1.2),
        ("ctranslate2", "fp32", 1.1),
        ("ctranslate2", "int8", None),
    ],
    ("beam4", "fp32"): [("ctranslate2", "fp32", 1.15), ("ctranslate2", "int8", None)],
    ("beam4_single", "fp32"): [("ctranslate2", "fp32", 1.0)],
}

# The served SavedModel against CTranslate2 float32, per decoding task: the
# target ratio of sentences (tokens) per second.
SERVED_TARGET = 1.0

# Beam search decodes `BEAM` rows for each output token: its rows per second
# against the same implementation's greedy rows per second, and the target.
BEAM_ROWS_TARGET = 1.5


def setting_text(setting):
    """A row's setting as the table prints it, e.g. `inter 2 x intra 1,
    batches of 32`."""
    if not setting:
        return ""
    if "inter" in setting:
        text = setting_name(setting["inter"], setting["threads"])
        return text + f", batches of {setting['max_batch_size']}"
    return f"{setting['threads']} thread{'s' * (setting['threads'] > 1)}"


def _ceiling(report, precision):
    values = [
        report["ceilings"].get(f"{precision}_{when}", {}).get("gflops") for when in ("start", "end")
    ]
    values = [v for v in values if v]
    return statistics.mean(values) if values else None


def _verdict(ratio, target):
    """` (target 1.15x: met)` or `... missed`: whether `ratio` reaches `target`."""
    return f" (target {target}x: {'met' if ratio >= target else 'missed'})"


def _beam_rows_lines(rows):
    """For each implementation and precision with a beam-4 and a greedy row:
    beam search's decoder rows per second (`BEAM` per output token) against
    greedy search's, the gain of decoding `BEAM` rows per sentence at once."""
    found = []
    for (task, impl, precision), beam in rows.items():
        greedy = rows.get(("greedy", impl, precision), {})
        if task == "beam4" and "tokens_per_s" in beam and "tokens_per_s" in greedy:
            gain = BEAM * beam["tokens_per_s"] / greedy["tokens_per_s"]
            text = f"{impl} {precision} {gain:.2f}x"
            if impl == "ours":
                text += _verdict(gain, BEAM_ROWS_TARGET)
            found.append(text)
    if not found:
        return []
    title = f"beam {BEAM} decoder rows/s against greedy rows/s, same implementation"
    return [f"\n{title}: " + ", ".join(found)]


def _served_lines(rows):
    """Our served rows (session loader, `tf.saved_model.load`) against
    CTranslate2 float32 on the same task."""
    found = []
    for (task, impl, _), row in rows.items():
        peer = rows.get((task, "ctranslate2", "fp32"), {})
        if impl.startswith("served") and "tokens_per_s" in row and "tokens_per_s" in peer:
            ratio = row["tokens_per_s"] / peer["tokens_per_s"]
            text = f"{task} {impl} {ratio:.2f}x"
            found.append(text + (_verdict(ratio, SERVED_TARGET) if impl == "served" else ""))
    if not found:
        return []
    return ["\nserved SavedModel against CTranslate2 float32, same run: " + ", ".join(found)]


def _rounds_text(rounds):
    """What the header says of `--rounds`: nothing for one round."""
    if rounds == 1:
        return ""
    return (
        f"; every row measured in {rounds} rounds, in turn: the median of the rounds' "
        "medians (their range in brackets)"
    )


def _settings_lines(rows):
    """Every setting a peer's row ran at, with its median ms (the row keeps
    the fastest)."""
    lines = []
    for (task, impl, precision), row in rows.items():
        if row.get("by_setting"):
            medians = "; ".join(f"{k} {1000 * t:,.1f}" for k, t in row["by_setting"].items())
            lines.append(f"{task} {impl} {precision}, median ms by setting: {medians}")
    return ["", *lines] if lines else []


def format_report(report):
    cfg = report["config"]
    lines = [
        f"config {cfg['name']}: vocab {cfg['vocab']:,}, d_model {cfg['d_model']}, "
        f"{cfg['layers']}+{cfg['layers']} layers, {cfg['heads']} heads, d_ff {cfg['d_ff']:,}; "
        f"median of {report['steps']} steps after {report['warmup']} warm-up"
        + _rounds_text(report.get("rounds", 1)),
    ]
    c = report["ceilings"]
    lines.append(
        "matmul ceiling GFLOP/s, start / end: fp32 "
        + " / ".join(
            f"{c.get(f'fp32_{w}', {}).get('gflops', float('nan')):.0f}" for w in ("start", "end")
        )
        + ", bf16 "
        + " / ".join(
            f"{c.get(f'bf16_{w}', {}).get('gflops', float('nan')):.0f}" for w in ("start", "end")
        )
    )
    lines += [
        "",
        "| task | implementation | precision | setting | tokens/s | median ms | % ceiling "
        "| peak MiB | ours / this |",
        "| --- | --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    rows = {(r["task"], r["impl"], r["precision"]): r for r in report["rows"]}
    for (task, impl, precision), row in rows.items():
        if "tokens_per_s" not in row:
            lines.append(
                f"| {task} | {impl} | {precision} | | failed: {row.get('error', '')[:120]} "
                "| | | | |"
            )
            continue
        ceiling = _ceiling(report, "bf16" if precision == "bf16" else "fp32")
        percent = f"{100 * row['gflops'] / ceiling:.0f}%" if ceiling and precision != "int8" else ""
        ratio = ""
        ours = rows.get((task, "ours", "bf16" if precision == "bf16" else "fp32"))
        if impl != "ours" and ours and "tokens_per_s" in ours:
            ratio = f"{ours['tokens_per_s'] / row['tokens_per_s']:.2f}x"
            for peer, peer_precision, target in TARGETS.get((task, ours["precision"]), []):
                if (peer, peer_precision) == (impl, precision) and target:
                    ratio += _verdict(ours["tokens_per_s"] / row["tokens_per_s"], target)
        median = f"{1000 * row['median_s']:,.1f}" if "median_s" in row else ""
        if len(row.get("round_medians_s", ())) > 1:
            spread = [1000 * t for t in row["round_medians_s"]]
            median += f" ({min(spread):,.0f}–{max(spread):,.0f})"
        lines.append(
            f"| {task} | {impl} | {precision} | {setting_text(row.get('setting'))} "
            f"| {row['tokens_per_s']:,.0f} | {median} | "
            f"{percent} | {row['peak_rss_mib']:,.0f} | {ratio} |"
        )
    lines += _beam_rows_lines(rows)
    lines += _served_lines(rows)
    lines += _settings_lines(rows)
    copy = report.get("bf16_copy_task")
    if copy and all("final_loss" in copy[p] for p in ("fp32", "bf16")):
        a, b = copy["fp32"]["final_loss"], copy["bf16"]["final_loss"]
        lines.append(
            f"\nbf16 sanity, copy task (loss at step 1: {copy['fp32']['first_loss']:.3f}), "
            f"mean loss of the last 10 of {copy['fp32']['steps']} steps: "
            f"fp32 {a:.4f}, bf16 {b:.4f} ({100 * (b - a) / a:+.2f}%; target within 2%)"
        )
    elif copy:
        lines.append(f"\nbf16 sanity failed: {copy}")
    memory = report.get("memory")
    if memory and "growth_mib" in memory:
        lines.append(
            f"memory over {memory['calls']:,} decoding calls: "
            f"RSS {memory['rss_after_100_mib']:,.1f} MiB after 100, "
            f"{memory['rss_after_all_mib']:,.1f} MiB after all ({memory['growth_mib']:+.1f} MiB)"
        )
    elif memory:
        lines.append(f"memory check failed: {memory}")
    if report.get("bf16_skipped"):
        lines.append(report["bf16_skipped"])
    if report["skipped"]:
        lines.append("not installed, skipped: " + ", ".join(report["skipped"]))
    return "\n".join(lines)
