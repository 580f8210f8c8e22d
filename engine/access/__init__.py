"""Access to what an index holds: the KG (embedded or over SPARQL), documents, entity linking, question subgraphs and paths, retrieval."""
