"""Looking at runs: a self-contained offline HTML report of one or more batch runs
(`report.html_report`), and one question's evidence in the terminal (`report.terminal`).

Data flows runs -> `loading` (records, transcripts and `eval`'s scores per run) -> `extract`
(compact per-question JSON: prediction, right/wrong, calls, evidence graph) -> `plots` (SVG)
and `html_report` (the page). Nothing here scores answers itself: right/wrong and every metric
come from `engine.runs.method_scores` / `engine.questions.answer_match`.
"""
