"""Question answering over a built index: KG/doc access, LLMs, linking, methods, evaluation."""
