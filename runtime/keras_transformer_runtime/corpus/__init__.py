"""Corpus translation on Apache Beam: the pipeline, its shards and the
manifest that lets a rerun resume."""
