"""HydraRAG (Tan et al., 2025): `hydra`, `hydra-e` and `hydra-s` (method.py), with its config,
state, path search, document paths, pruning scores, phases, answer step, prompts and record."""
