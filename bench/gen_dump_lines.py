"""Generated dump lines shaped like the real ones, for the ingest benchmark (bench/bench_ingest_profiles.py).

`wikidata`: Wikidata truthy N-Triples (`latest-truthy.nt`): per entity, `wdt:` edges to other
entities, `wdt:` literals with datatypes (dates, quantities, coordinates, monolingual text in
several languages), external ids with their `wdtn:` normalised values, labels (rdfs:label,
skos:prefLabel, schema:name) and descriptions and aliases in several languages, sitelinks (some
percent-encoded) with their inLanguage / isPartOf / name lines; property entities with labels
and `wikibase:propertyType` first.

`freebase`: Freebase RDF dump lines (`freebase-rdf-latest`, tab-separated, `\\t.` at the end):
per entity (`m.`), names, aliases and descriptions in several languages, types and keys (dropped
predicates), entity-entity facts, literals with datatypes, CVT nodes (`g.`), `key:` namespace
facts, notable types and value notations; a share of schema-section lines (non-entity subjects).

Seeded: the same (kind, lines, seed) writes the same bytes. No line is malformed (the benchmark
measures the fast path); tests add their own awkward lines.

    python -m bench.gen_dump_lines wikidata 2000000 /tmp/wd.nt --seed 0
"""

from __future__ import annotations

import argparse
import random
from collections.abc import Callable, Iterator
from pathlib import Path

WD, WDT, WDTN = "http://www.wikidata.org/entity/", "http://www.wikidata.org/prop/direct/", "http://www.wikidata.org/prop/direct-normalized/"
RDFS_LABEL = "http://www.w3.org/2000/01/rdf-schema#label"
SKOS_PREF, SKOS_ALT = "http://www.w3.org/2004/02/skos/core#prefLabel", "http://www.w3.org/2004/02/skos/core#altLabel"
SCHEMA = "http://schema.org/"
XSD = "http://www.w3.org/2001/XMLSchema#"
FB = "http://rdf.freebase.com/ns/"
LANGUAGES = ["en", "de", "fr", "es", "it", "nl", "pl", "ru", "ja", "zh", "pt", "sv", "ar", "en-gb", "en-ca", "zh-hans",
             "be-tarask", "sr-el", "de-ch", "pt-br"]
WORDS = ["river", "castle", "Douglas", "Adams", "Müller", "São", "Paulo", "école", "北京", "東京", "Москва", "station",
         "church", "film", "album", "park", "bridge", "valley", "O'Brien", "lake", "novel", "team", "village", "Łódź"]
ITEM_PROPS = [31, 17, 131, 279, 106, 27, 19, 20, 161, 57, 495, 136, 361, 527, 150, 47, 36, 138, 40, 26, 22, 39, 69, 108,
              463, 166, 800, 50, 1412, 103]
# External-identifier properties: with a `wdtn:` form (VIAF, GND, Freebase, ISNI) or without (X username).
EXTERNAL = {214: "http://viaf.org/viaf/", 227: "https://d-nb.info/gnd/", 646: "http://g.co/kg", 213: "http://isni.org/isni/"}
EXTERNAL_PLAIN = [2002, 4033]
FB_RELATIONS = ["people.person.nationality", "people.person.place_of_birth", "film.film.directed_by",
                "film.performance.actor", "location.location.containedby", "music.artist.genre",
                "organization.organization.headquarters", "sports.sports_team.location", "book.written_work.author",
                "film.film.country", "people.person.profession", "location.country.capital"]
FB_DROPPED = ["type.object.type", "type.object.key", "common.topic.notable_types", "common.topic.topic_equivalent_webpage",
              "freebase.valuenotation.is_reviewed", "kg.object_profile.prominent_type", "user.robert.default_domain.x"]


def _text(rng: random.Random, words: int) -> str:
    text = " ".join(rng.choice(WORDS) for _ in range(words))
    return text.replace("\\", "\\\\").replace('"', '\\"') if rng.random() > 0.02 else f'{text} \\"quoted\\"'


def _wikidata_entity(rng: random.Random, q: int, entities: int) -> Iterator[str]:
    s = f"<{WD}Q{q}>"
    for _ in range(rng.randint(2, 8)):
        yield f"{s} <{WDT}P{rng.choice(ITEM_PROPS)}> <{WD}Q{rng.randrange(1, entities)}> .\n"
    yield f'{s} <{WDT}P569> "{rng.randint(1800, 2020)}-0{rng.randint(1, 9)}-1{rng.randint(0, 9)}T00:00:00Z"^^<{XSD}dateTime> .\n'
    if rng.random() < 0.5:
        yield f'{s} <{WDT}P1082> "+{rng.randint(10, 10**7)}"^^<{XSD}decimal> .\n'
    if rng.random() < 0.3:
        yield f'{s} <{WDT}P625> "Point({rng.uniform(-180, 180):.6f} {rng.uniform(-90, 90):.6f})"^^<http://www.opengis.net/ont/geosparql#wktLiteral> .\n'
    if rng.random() < 0.4:
        yield f'{s} <{WDT}P1476> "{_text(rng, 3)}"@{rng.choice(LANGUAGES[:6])} .\n'
    if rng.random() < 0.2:
        yield f"{s} <{WDT}P856> <https://example.org/site/{q}> .\n"
    if rng.random() < 0.2:
        yield f"{s} <{WDT}P18> <http://commons.wikimedia.org/wiki/Special:FilePath/Photo%20{q}.jpg> .\n"
    for prop, base in EXTERNAL.items():
        if rng.random() < 0.3:
            value = f"{rng.randrange(10**8)}"
            yield f'{s} <{WDT}P{prop}> "{value}" .\n'
            yield f"{s} <{WDTN}P{prop}> <{base}{value}> .\n"
    if rng.random() < 0.2:
        yield f'{s} <{WDT}P{rng.choice(EXTERNAL_PLAIN)}> "user{q}" .\n'
    for lang in rng.sample(LANGUAGES, rng.randint(2, 9)):
        label = _text(rng, rng.randint(1, 3))
        yield f'{s} <{RDFS_LABEL}> "{label}"@{lang} .\n'
        yield f'{s} <{SKOS_PREF}> "{label}"@{lang} .\n'
        yield f'{s} <{SCHEMA}name> "{label}"@{lang} .\n'
    for lang in rng.sample(LANGUAGES, rng.randint(1, 4)):
        yield f'{s} <{SCHEMA}description> "{_text(rng, rng.randint(2, 6))}"@{lang} .\n'
    for lang in rng.sample(LANGUAGES, rng.randint(0, 3)):
        yield f'{s} <{SKOS_ALT}> "{_text(rng, 2)}"@{lang} .\n'
    for lang in rng.sample(LANGUAGES[:10], rng.randint(0, 3)):
        title = f"Page_{q}" if rng.random() < 0.8 else f"Caf%C3%A9_{q}_%28place%29"
        page = f"<https://{lang}.wikipedia.org/wiki/{title}>"
        yield f"{page} <{SCHEMA}about> {s} .\n"
        yield f'{page} <{SCHEMA}inLanguage> "{lang}" .\n'
        yield f"{page} <{SCHEMA}isPartOf> <https://{lang}.wikipedia.org/> .\n"
        yield f'{page} <{SCHEMA}name> "Page {q}"@{lang} .\n'


def _wikidata_properties() -> Iterator[str]:
    for prop in ITEM_PROPS:
        yield f'<{WD}P{prop}> <{RDFS_LABEL}> "property {prop}"@en .\n'
        yield f"<{WD}P{prop}> <http://wikiba.se/ontology#propertyType> <http://wikiba.se/ontology#WikibaseItem> .\n"
    for prop in [*EXTERNAL, *EXTERNAL_PLAIN]:
        yield f'<{WD}P{prop}> <{RDFS_LABEL}> "identifier {prop}"@en .\n'
        yield f"<{WD}P{prop}> <http://wikiba.se/ontology#propertyType> <http://wikiba.se/ontology#ExternalId> .\n"


def _mid(rng: random.Random, entities: int) -> str:
    return f"m.0{rng.randrange(entities):x}"


def _freebase_entity(rng: random.Random, i: int, entities: int) -> Iterator[str]:
    s = f"<{FB}m.0{i:x}>"
    for lang in rng.sample(LANGUAGES[:12], rng.randint(1, 5)):
        yield f'{s}\t<{FB}type.object.name>\t"{_text(rng, rng.randint(1, 3))}"@{lang}\t.\n'
    if rng.random() < 0.5:
        yield f'{s}\t<{RDFS_LABEL}>\t"{_text(rng, 2)}"@en\t.\n'
    for lang in rng.sample(LANGUAGES[:12], rng.randint(0, 3)):
        yield f'{s}\t<{FB}common.topic.alias>\t"{_text(rng, 2)}"@{lang}\t.\n'
    if rng.random() < 0.6:
        yield f'{s}\t<{FB}common.topic.description>\t"{_text(rng, 12)}"@{rng.choice(["en", "en", "de", "fr"])}\t.\n'
    for _ in range(rng.randint(1, 4)):
        yield f"{s}\t<{FB}{rng.choice(FB_DROPPED)}>\t<{FB}{_mid(rng, entities)}>\t.\n"
    yield f'{s}\t<{FB}type.object.key>\t"/wikipedia/en/Page_{i}"\t.\n'
    yield f"{s}\t<http://www.w3.org/1999/02/22-rdf-syntax-ns#type>\t<{FB}people.person>\t.\n"
    for _ in range(rng.randint(2, 7)):
        yield f"{s}\t<{FB}{rng.choice(FB_RELATIONS)}>\t<{FB}{_mid(rng, entities)}>\t.\n"
    if rng.random() < 0.5:
        yield f'{s}\t<{FB}people.person.date_of_birth>\t"{rng.randint(1800, 2010)}-0{rng.randint(1, 9)}-1{rng.randint(0, 9)}"^^<{XSD}date>\t.\n'
    if rng.random() < 0.3:
        yield f'{s}\t<{FB}architecture.structure.height_meters>\t"{rng.uniform(1, 500):.1f}"^^<{XSD}float>\t.\n'
    if rng.random() < 0.2:
        yield f'{s}\t<{FB}film.film.tagline>\t"{_text(rng, 4)}"@{rng.choice(LANGUAGES[:5])}\t.\n'
    if rng.random() < 0.3:
        yield f'{s}\t<http://rdf.freebase.com/key/wikipedia.en>\t"Page_{i}"\t.\n'
    if rng.random() < 0.2:
        yield f"{s}\t<{FB}people.person.gender>\t<{FB}type.gender.male>\t.\n"
    if rng.random() < 0.25:
        cvt = f"<{FB}g.11{i:x}>"
        yield f"{s}\t<{FB}location.statistical_region.population>\t{cvt}\t.\n"
        yield f'{cvt}\t<{FB}measurement_unit.dated_integer.number>\t"{rng.randrange(10**6)}"^^<{XSD}int>\t.\n'
        yield f'{cvt}\t<{FB}measurement_unit.dated_integer.year>\t"{rng.randint(1900, 2015)}"^^<{XSD}gYear>\t.\n'
    if rng.random() < 0.05:  # a schema-section line: a type or property as subject
        yield f'<{FB}{rng.choice(FB_RELATIONS)}>\t<{FB}type.object.name>\t"{_text(rng, 2)}"@en\t.\n'


def _entities(lines: int) -> int:
    return max(lines // 20, 10)


def dump_lines(kind: str, lines: int, seed: int = 0) -> Iterator[str]:
    """`lines` generated lines of `kind` ("wikidata" or "freebase")."""
    rng = random.Random(seed)
    entities = _entities(lines)
    head: Iterator[str] = _wikidata_properties() if kind == "wikidata" else iter(())
    block: Callable[[random.Random, int, int], Iterator[str]] = _wikidata_entity if kind == "wikidata" else _freebase_entity
    if kind not in ("wikidata", "freebase"):
        raise ValueError(f"unknown kind {kind!r}")
    written = 0
    for line in head:
        yield line
        written += 1
    i = 1
    while True:
        for line in block(rng, i, entities):
            if written == lines:
                return
            yield line
            written += 1
        i += 1


def write_dump(kind: str, lines: int, path: Path, seed: int = 0) -> Path:
    """Write `lines` generated lines of `kind` to `path` (UTF-8); return `path`."""
    with path.open("w", encoding="utf-8") as out:
        chunk: list[str] = []
        for line in dump_lines(kind, lines, seed):
            chunk.append(line)
            if len(chunk) == 100_000:
                out.write("".join(chunk))
                chunk.clear()
        out.write("".join(chunk))
    return path


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("kind", choices=["wikidata", "freebase"])
    parser.add_argument("lines", type=int)
    parser.add_argument("out", type=Path)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    write_dump(args.kind, args.lines, args.out, args.seed)


if __name__ == "__main__":
    main()
