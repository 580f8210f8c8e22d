"""The shared kernel below every layer: what ingest, index, engine and the CLI all use.

- `errors`: the exceptions whose message is shown to the user as is (file, line or field named);
- `progress`: progress bars and the quiet switch for long work;
- `home`: the user-level folders (`$LOCALKG_HOME`, the models and embedding-export folders);
- `hashing`: sha256 of a file, read in blocks.

It imports nothing of the project (tests/test_import_structure.py checks it), so every layer can
import it without an arrow back.
"""
