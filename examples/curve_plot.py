"""The validation curve of a run: BLEU and chrF by update step.

from curve_plot import plot_validation_curve
plot_validation_curve(training.read_evaluations("runs/base"), "runs/base")
"""

import os


def plot_validation_curve(evaluations, directory):
    """Writes `validation_curve.png` into `directory` (steps on x, BLEU and
    chrF on y) and returns its path; `None` without evaluations or without
    matplotlib."""
    points = [e for e in evaluations if "val_bleu" in e]
    if not points:
        return None
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("validation curve: skipped (pip install matplotlib)")
        return None
    steps = [e["step"] for e in points]
    figure, axis = plt.subplots(figsize=(7, 4))
    axis.plot(steps, [e["val_bleu"] for e in points], marker="o", label="sacreBLEU")
    if all("val_chrf" in e for e in points):
        axis.plot(steps, [e["val_chrf"] for e in points], marker="s", label="chrF")
    axis.set_xlabel("update step")
    axis.set_ylabel("validation score")
    axis.set_title("Validation scores during training")
    axis.grid(alpha=0.3)
    axis.legend()
    figure.tight_layout()
    path = os.path.join(directory, "validation_curve.png")
    figure.savefig(path + ".tmp.png", dpi=100)
    plt.close(figure)
    os.replace(path + ".tmp.png", path)
    return path
