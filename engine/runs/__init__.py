"""Runs: answering one question with any method, batch runs, evaluation and expected scores."""
