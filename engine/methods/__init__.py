"""Reasoning methods: io, cot, sc, rag, tog, tog-r (and later tog2, hydra).

Adding a method touches its own module, its prompts and one line of `registry.py`:

    # engine/methods/mymethod.py
    def run_mymethod(question: Question, ctx: Context, config: dict[str, Any]) -> AnswerRecord: ...
    MYMETHOD = MethodSpec("mymethod", run_mymethod, {"width": 3}, "one line on what it does",
                          (positive_ints("width"),))

A method sees only `Context` (protocols: KnowledgeGraph, DocumentStore, EntityLinker, Embedder,
LLM), shares `common`, `topics`, `prune`, `labels` and `prompts`, and never imports another
method. `engine.runs.answer.answer_question` runs it and stamps cost, config hash and scores.
"""
