"""`chains` (ours): plan once, the graph executes, read once (method.py, prompts.py); its chain
plans and scoring are in engine/methods/shared, which hydra-s uses too."""
