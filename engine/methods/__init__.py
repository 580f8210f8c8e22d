"""Reasoning methods: io, cot, sc, rag, tog, tog-r (and later tog2, hydra)."""
