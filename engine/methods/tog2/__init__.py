"""Think-on-Graph 2.0 (Ma et al., ICLR 2025): `tog2` (method.py) with its config, context
retrieval, prompts, entity scoring, search step and state."""
