"""Sums over the replicas of a `tf.distribute` strategy, in one place."""

import tensorflow as tf


def sum_over_replicas(value):
    """`value` summed over all replicas when called inside a replica
    context (as a train step under a strategy is); `value` otherwise."""
    context = tf.distribute.get_replica_context()
    if context is None or context.num_replicas_in_sync == 1:
        return value
    return context.all_reduce(tf.distribute.ReduceOp.SUM, value)
