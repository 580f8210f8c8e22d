"""Reasoning methods, one sub-package per family: `baselines` (io, cot, sc, rag), `tog` (tog,
tog-r), `tog2`, `hydra` (hydra, hydra-e, hydra-s) and `chains` (ours); `shared` holds what
several families use. This folder itself holds the framework: the registry, `MethodSpec`, the
typed configs and the `Context` a method sees.

Adding a method touches its own module (or sub-package), its prompts and one line of
`registry.py`:

    # engine/methods/mymethod.py
    @dataclass(frozen=True)
    class MyConfig(MethodConfig):  # one field per key: default, check, help, paper reference
        width: int = option(3, "beam width", "Paper §4.1", low=1)

    def run_mymethod(question: Question, ctx: Context, config: dict[str, Any]) -> AnswerRecord:
        cfg = MyConfig.from_config(config)  # cfg.width is an int
        ...
    MYMETHOD = MethodSpec.typed("mymethod", run_mymethod, MyConfig, "one line on what it does")

A method sees only `Context` (protocols: KnowledgeGraph, DocumentStore, EntityLinker, Embedder,
LLM), shares `engine.methods.shared` (`common`, `topics`, `prune`, `labels`, `prompts`, ...), and
never imports another method. `engine.runs.answer.answer_question` runs it and stamps cost,
config hash and scores.
"""
