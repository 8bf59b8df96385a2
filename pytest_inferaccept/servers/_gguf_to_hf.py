"""Convert SmolLM2's GGUF to a Hugging Face directory vLLM can load.

Run with the tools venv's interpreter (torch + transformers 4.57), never imported by the
plugin: ``python _gguf_to_hf.py MODEL.gguf OUT_DIR``.  transformers rebuilds the tokenizer
from GGUF metadata in a shape vLLM decodes wrongly (raw ``Ġ``/``Ċ``), so it is rewritten as a
plain byte-level GPT-2 tokenizer with ChatML special tokens.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

BOS = "<|im_start|>"
EOS = "<|im_end|>"


def _load_json(path: Path) -> dict[str, Any]:
    data: dict[str, Any] = json.loads(path.read_text())
    return data


def _dump_json(path: Path, data: dict[str, Any]) -> None:
    path.write_text(json.dumps(data, indent=2, ensure_ascii=False) + "\n")


def fix_tokenizer(out: Path) -> None:
    """Rewrite the saved tokenizer files into a byte-level GPT-2 tokenizer without BOS."""
    (out / "tokenizer.model").unlink(missing_ok=True)

    tok_json = _load_json(out / "tokenizer.json")
    vocab = {t["content"]: t["id"] for t in tok_json.get("added_tokens", [])}
    byte_level = {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": False}
    tok_json["post_processor"] = {**byte_level, "use_regex": False}
    tok_json["decoder"] = {**byte_level, "use_regex": True}
    _dump_json(out / "tokenizer.json", tok_json)

    cfg = _load_json(out / "tokenizer_config.json")
    cfg.update(
        tokenizer_class="GPT2Tokenizer",
        add_bos_token=False,
        add_eos_token=False,
        add_prefix_space=False,
        bos_token=BOS,
        eos_token=EOS,
        pad_token=EOS,
        unk_token=None,
    )
    cfg["clean_up_tokenization_spaces"] = False
    for stale in ("legacy", "bos_token_id", "eos_token_id", "pad_token_id", "unk_token_id"):
        cfg.pop(stale, None)  # ids carried over from the GGUF reader, some of them wrong
    _dump_json(out / "tokenizer_config.json", cfg)
    _dump_json(
        out / "special_tokens_map.json",
        {"bos_token": BOS, "eos_token": EOS, "pad_token": EOS},
    )

    for name in ("config.json", "generation_config.json"):
        path = out / name
        if not path.exists():
            continue
        data = _load_json(path)
        if BOS in vocab:
            data["bos_token_id"] = vocab[BOS]
        if EOS in vocab:
            data["eos_token_id"] = vocab[EOS]
            data["pad_token_id"] = vocab[EOS]
        _dump_json(path, data)


def main(argv: list[str]) -> int:
    """Convert ``argv[0]`` (a .gguf file) into the HF directory ``argv[1]``."""
    gguf, out = Path(argv[0]).resolve(), Path(argv[1]).resolve()
    import torch  # type: ignore[import-not-found]  # only inside the tools venv
    from transformers import (  # type: ignore[import-not-found]
        AutoModelForCausalLM,
        AutoTokenizer,
    )

    tokenizer = AutoTokenizer.from_pretrained(str(gguf.parent), gguf_file=gguf.name)
    model = AutoModelForCausalLM.from_pretrained(str(gguf.parent), gguf_file=gguf.name, dtype=torch.bfloat16)
    out.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(str(out))
    tokenizer.save_pretrained(str(out))
    fix_tokenizer(out)

    # Round-trip check with the rewritten files: ChatML markers must survive decoding.
    fixed = AutoTokenizer.from_pretrained(str(out))
    ids = fixed("<|im_start|>user\nHello world<|im_end|>")["input_ids"]
    text = fixed.decode(ids)
    if "Ġ" in text or "Ċ" in text or "Hello world" not in text:
        print(f"tokenizer round trip failed: {text!r}", file=sys.stderr)
        return 1
    print(f"converted {gguf.name} -> {out} (round trip {text!r})")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
