"""Streaming readers: RDF dumps, Freebase/Wikidata profiles, TSV/ID-dict triples, documents."""
