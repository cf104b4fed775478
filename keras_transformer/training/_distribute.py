"""Small `tf.distribute` helpers shared by the training modules."""

import tensorflow as tf


def sum_over_replicas(value):
    """`value` summed over all replicas when called inside a replica
    context (as a train step under a strategy is); `value` otherwise."""
    context = tf.distribute.get_replica_context()
    if context is None or context.num_replicas_in_sync == 1:
        return value
    return context.all_reduce(tf.distribute.ReduceOp.SUM, value)


def read_int(variable):
    """A variable's value as an int, also for a variable mirrored by a
    strategy (where `int(variable)` fails)."""
    return int(tf.convert_to_tensor(variable).numpy())


def worker_id(strategy):
    """`(task_type, task_id)` of this process in a multi-worker cluster;
    `(None, 0)` when there is no cluster."""
    resolver = getattr(strategy, "cluster_resolver", None)
    return getattr(resolver, "task_type", None), getattr(resolver, "task_id", 0) or 0


def is_chief(strategy):
    """Whether this process is the chief of `strategy`: the only worker of
    a one-process strategy, the `"chief"` task, or worker 0 of a cluster
    without one. Only the chief keeps checkpoints, evaluates and exports.

    Example:

    >>> if training.is_chief(model.distribute_strategy):
    ...     export_saved_model(translator, "/models/ende")
    """
    task_type, task_id = worker_id(strategy)
    return task_type in (None, "chief") or (task_type == "worker" and task_id == 0)


def in_multi_worker_cluster(strategy):
    """Whether `strategy` spans more than one process."""
    resolver = getattr(strategy, "cluster_resolver", None)
    if resolver is None:
        return False
    return sum(len(tasks) for tasks in resolver.cluster_spec().as_dict().values()) > 1


def broadcast_from_chief(strategy, values):
    """The chief's `values` (a list of floats), on every worker.

    Across the workers of a `MultiWorkerMirroredStrategy` each replica adds
    `(values, 1)` on the chief and zeros elsewhere, and the sum is divided
    by the count; every worker then holds the same numbers, so decisions
    taken from them (early stopping) agree. A no-op for one process. The
    other workers wait here while the chief computes `values`.
    """
    if not in_multi_worker_cluster(strategy):
        return list(values)
    chief = 1.0 if is_chief(strategy) else 0.0
    contribution = tf.constant([float(v) * chief for v in values] + [chief], tf.float64)

    @tf.function
    def reduce():
        def step():
            context = tf.distribute.get_replica_context()
            return context.all_reduce(tf.distribute.ReduceOp.SUM, contribution)

        return strategy.run(step)

    total = strategy.experimental_local_results(reduce())[0].numpy()
    return [float(v) for v in total[:-1] / total[-1]]
