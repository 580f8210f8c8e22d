"""Questions and answers: dataset readers, the per-question record, answer checking and metrics, the terminal view of a record."""
