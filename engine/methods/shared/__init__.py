"""Helpers that several method families share: prompts and schemas, topic entities, the prune
tools, labels, answer spans, and the LLM-free chain plans and scoring (with the question shape
and word forms they read). No method runs here."""
