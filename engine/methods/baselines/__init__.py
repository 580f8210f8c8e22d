"""The baselines without graph exploration: `io`, `cot` (io_cot.py), `sc` (sc.py) and `rag` (rag.py)."""
