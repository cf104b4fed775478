"""Word alignments from a matrix of cross-attention between the words of a
translation (rows) and of its source (columns), as `word_alignment` uses
when a runner gives the whole attention (`AlignedTranslation.attention`).

The argmax of each row is a poor alignment: a few source words (the first,
punctuation) draw attention from every target word. Measured on the README
model (`benchmarks/markup_placement.py`; the settings below chosen on
Multi30k val, then checked on test_2016): the row argmax placed 44% of
tagged nouns on their translation; this module's matching 89% on val and
88% on test. In order:

1. **Balance** (Sinkhorn): the rows and the columns are normalized in turn,
   `BALANCING_ROUNDS` times, so that no source word outweighs the others
   because it draws attention from every target word.
2. **A position prior**: each weight is multiplied by
   `exp(-|t / (T - 1) - s / (S - 1)| / POSITION_SCALE)`, which breaks ties
   between words the attention cannot tell apart (two "a") in favour of
   those at the same relative place. It is weak (words at opposite ends
   keep `exp(-1)` of their weight), so that reorderings the attention
   shows are kept: a scale of 0.2 placed 1-2 points more on Multi30k,
   whose word order is close, but misplaced the trained letter
   reverser's tags (`tests/export/test_markup_runners.py`).
3. **One-to-one matching** (the assignment of greatest total weight, as
   SimAlign's "Match", Jalili Sabet et al., 2020): each target word gets a
   different source word, while there are source words left.
4. A target word without a match (more target words than source words, or
   a match of negligible weight, as across the sentences of a document) is
   aligned to the source word of its row's greatest weight.

Example:

>>> import numpy as np
>>> matched_alignment(np.array([[0.6, 0.4], [0.7, 0.3]]))
[0, 1]

The row argmax would align both target words to the first source word.
"""

import math

import numpy as np

BALANCING_ROUNDS = 5
POSITION_SCALE = 1.0
# A match whose weight is less than this share of its row's greatest is not
# taken (the row's greatest is), so that words of one sentence of a
# document are never matched to another's.
NEGLIGIBLE = 0.01


def matched_alignment(attention):
    """For each row of `attention` (target words x source words, each
    weight the attention of a target word's pieces on a source word's), the
    column it is aligned to, or `None` for a row of no weight (see the
    module's docstring).

    Args:
        attention: a 2-D array of non-negative weights.

    Returns:
        A list with one column index (or `None`) per row.
    """
    attention = np.asarray(attention, dtype=np.float64)
    alignment = [None] * attention.shape[0]
    # Rows of no weight stay None, and columns of none take no row: balanced,
    # their nothing would become as much as any other's.
    rows = np.flatnonzero(attention.sum(axis=1) > 0)
    columns = np.flatnonzero(attention.sum(axis=0) > 0)
    if rows.size == 0:
        return alignment
    weights = _balanced(attention[np.ix_(rows, columns)])
    weights *= _position_prior(rows, columns, attention.shape)
    for row, column in enumerate(_best_assignment(weights)):
        if column is None or weights[row, column] < NEGLIGIBLE * weights[row].max():
            column = int(np.argmax(weights[row]))
        alignment[rows[row]] = int(columns[column])
    return alignment


def _balanced(attention):
    """`attention` with its rows and columns normalized in turn."""
    weights = attention + 1e-6  # an empty row or column stays defined
    for _ in range(BALANCING_ROUNDS):
        weights = weights / weights.sum(axis=1, keepdims=True)
        weights = weights / weights.sum(axis=0, keepdims=True)
    return weights


def _position_prior(rows, columns, shape):
    """`exp(-|relative row - relative column| / POSITION_SCALE)` for the
    `rows` and `columns` (indices) of a matrix of `shape`."""
    row_places = rows[:, None] / max(shape[0] - 1, 1)
    column_places = columns[None, :] / max(shape[1] - 1, 1)
    return np.exp(-np.abs(row_places - column_places) / POSITION_SCALE)


def _best_assignment(weights):
    """For each row of `weights`, its column in the one-to-one assignment of
    greatest total weight (`None` for rows left over when there are more
    rows than columns)."""
    if weights.shape[0] > weights.shape[1]:
        by_column = _best_assignment(weights.T)
        assignment = [None] * weights.shape[0]
        for column, row in enumerate(by_column):
            assignment[row] = column
        return assignment
    return _least_cost_assignment(-weights)


def _least_cost_assignment(cost):
    """The assignment of each row of `cost` (rows <= columns) to a distinct
    column of least total cost: the Hungarian method with potentials, one
    row added at a time along a shortest augmenting path (O(rows² ·
    columns)). Returns the column of each row. Plain Python lists: on a
    sentence's few dozen words they are several times faster than NumPy's
    calls on small arrays."""
    rows, columns = cost.shape
    cost = cost.tolist()
    row_potential = [0.0] * (rows + 1)
    column_potential = [0.0] * (columns + 1)
    owner = [0] * (columns + 1)  # column -> its row + 1 (0: none)
    for row in range(1, rows + 1):
        owner[0] = row  # column 0 is the path's start
        previous = [0] * (columns + 1)
        slack = [math.inf] * (columns + 1)
        visited = [False] * (columns + 1)
        column = 0
        while owner[column] != 0:
            visited[column] = True
            current = owner[column]
            costs, potential = cost[current - 1], row_potential[current]
            delta, nearest = math.inf, 0
            for j in range(1, columns + 1):
                if visited[j]:
                    continue
                reduced = costs[j - 1] - potential - column_potential[j]
                if reduced < slack[j]:
                    slack[j], previous[j] = reduced, column
                if slack[j] < delta:
                    delta, nearest = slack[j], j
            for j in range(columns + 1):
                if visited[j]:
                    row_potential[owner[j]] += delta
                    column_potential[j] -= delta
                else:
                    slack[j] -= delta
            column = nearest
        while column != 0:  # flip the path
            before = previous[column]
            owner[column] = owner[before]
            column = before
    assignment = [None] * rows
    for column in range(1, columns + 1):
        if owner[column]:
            assignment[owner[column] - 1] = column - 1
    return assignment
