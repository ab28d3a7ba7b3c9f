"""Retrieval: the context builder, its cache, embedders and the instruction-like check."""
