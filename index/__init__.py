"""What `make index` builds: Oxigraph store, entity/relation tables, chunks, vectors, manifest."""
