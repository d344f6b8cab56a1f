"""``python -m harness models ...``: generate, convert and inspect qwen35 GGUF models.

The harness command line calls `add_arguments` on its ``models`` sub-parser and `run` with the
parsed arguments (exit status returned).
"""

from __future__ import annotations

import argparse
import sys
import time
from collections import Counter
from pathlib import Path

from harness.contract.config import load_config
from harness.contract.project import NoProject, locate

from .convert import convert
from .gen import ensure_model, generate
from .quant import GGML_TYPES
from .recipes import list_recipes, load_recipe

DESCRIPTION = "generate random-weight qwen35 GGUFs from recipes, convert Hugging Face checkpoints"


def add_arguments(p: argparse.ArgumentParser) -> None:
    sub = p.add_subparsers(dest="models_command", metavar="COMMAND", help="what to do with models")
    sub.required = True
    types = list(GGML_TYPES)

    g = sub.add_parser("gen", help="write a deterministic random-weight GGUF from a recipe",
                       description="Write the recipe's random-weight model. Without --out it goes to "
                                   "the model cache (models/, or --models-dir) under a digest name and "
                                   "is reused when already there; the path is printed.")
    g.add_argument("recipe", metavar="RECIPE", help="recipe name (the project's configs/models/NAME.yaml, else a "
                                                    "built-in one) or a YAML path")
    g.add_argument("--type", choices=types, default=None, help="tensor type (default: the recipe's)")
    g.add_argument("--out", type=Path, default=None, help="output file (written even if it exists)")
    g.add_argument("--seed", type=int, default=None, help="random seed (default: the recipe's)")
    g.add_argument("--models-dir", type=Path, default=None,
                   help="cache folder (default: the project's models folder, outside a project ./models)")

    c = sub.add_parser("convert", help="convert a Hugging Face Qwen3.5 checkpoint to GGUF",
                       description="Convert config.json + model.safetensors with llama.cpp's qwen35 "
                                   "conventions (names, shapes, +1 norms, ssm_a = -exp(A_log), value-head "
                                   "reorder, per-tensor types).")
    c.add_argument("hf_dir", metavar="HF_DIR", type=Path, help="folder holding config.json and model.safetensors")
    c.add_argument("--out", type=Path, required=True, help="GGUF file to write")
    c.add_argument("--type", choices=types, default="f32", help="tensor type of the matrices (default f32)")
    c.add_argument("--tokenizer-pre", default="qwen35", help="tokenizer.ggml.pre value (default qwen35)")

    sub.add_parser("list", help="list the recipes with their sizes")

    i = sub.add_parser("info", help="summarise a GGUF file (shapes, types, bytes read per token)")
    i.add_argument("gguf", type=Path, help="the GGUF file")
    i.add_argument("--json", action="store_true", help="print the summary as JSON")


def run(args: argparse.Namespace) -> int:
    try:
        return _COMMANDS[args.models_command](args)
    except (ValueError, OSError) as e:  # RecipeError and ConvertError are ValueErrors: bad input, status 2
        print(f"models {args.models_command}: error: {e}", file=sys.stderr)
        return 2


def _project_models(args: argparse.Namespace) -> tuple[list[Path], Path | None]:
    """The project's recipe folder and model cache when run inside a project (or with --root);
    outside one, the built-in recipes and ./models."""
    root, config = getattr(args, "root", None), getattr(args, "config", None)
    try:
        project = locate(Path(root) if root else None)
    except NoProject:
        return [], None
    cfg = load_config(project.root, Path(config).resolve() if config else project.config)
    return [cfg.recipe_dir], cfg.root / cfg.models_dir


def _gen(args: argparse.Namespace) -> int:
    t0 = time.perf_counter()
    search, models_dir = _project_models(args)
    if args.out is not None:
        r = load_recipe(args.recipe, search)
        path = generate(r, args.out, args.type, args.seed)
    else:
        path = ensure_model(args.recipe, args.models_dir or models_dir, args.type, seed=args.seed, search=search)
    dt = time.perf_counter() - t0
    print(f"{path}  ({path.stat().st_size / 1e6:.1f} MB, {dt:.1f} s)", file=sys.stderr)
    print(path)
    return 0


def _convert(args: argparse.Namespace) -> int:
    t0 = time.perf_counter()
    path = convert(args.hf_dir, args.out, args.type, args.tokenizer_pre)
    print(f"wrote {path} ({path.stat().st_size / 1e6:.1f} MB, {time.perf_counter() - t0:.1f} s)")
    return 0


def _list(args: argparse.Namespace) -> int:
    search, _ = _project_models(args)
    print(f"{'recipe':<16} {'params':>12} {'layers':>7} {'hidden':>7} {'vocab':>8} {'type':>6}  pattern")
    for name in list_recipes(search):
        r = load_recipe(name, search)
        c = r.config
        pat = "".join("L" if t == "linear" else "F" for t in c.layer_types)
        print(f"{name:<16} {c.n_params():>12,} {c.num_hidden_layers:>7} {c.hidden_size:>7} "
              f"{c.vocab_size:>8} {r.type:>6}  {pat}")
    return 0


def gguf_summary(path: Path) -> dict:
    """Facts about a qwen35 GGUF, including the weight bytes one decode step reads: every layer
    matrix and vector, the final norm and the LM head, plus one embedding row."""
    import gguf

    try:
        r = gguf.GGUFReader(path)
        arch = r.fields["general.architecture"].contents()
    except (ValueError, KeyError, IndexError) as e:  # gguf-py's errors on a truncated or foreign file
        raise ValueError(f"{path}: not a readable GGUF file ({type(e).__name__}: {e})") from None
    small = ("tokenizer.ggml.model", "tokenizer.ggml.pre")
    kv = {k: f.contents() for k, f in r.fields.items()
          if not k.startswith("tokenizer.ggml.") or k.endswith("_id") or k in small}
    tensors = {t.name: t for t in r.tensors}
    types = Counter(t.tensor_type.name.lower() for t in r.tensors)
    emb = tensors["token_embd.weight"]
    n_vocab = int(emb.shape[1])
    head = tensors.get("output.weight", emb)
    per_token = sum(int(t.n_bytes) for n, t in tensors.items() if n != "token_embd.weight")
    per_token += int(emb.n_bytes) // n_vocab  # one embedding row
    if "output.weight" not in tensors:
        per_token += int(head.n_bytes)  # tied: the embedding matrix is the LM head
    return {
        "path": str(path), "bytes": Path(path).stat().st_size, "arch": arch,
        "n_layer": kv.get(f"{arch}.block_count"), "n_embd": kv.get(f"{arch}.embedding_length"),
        "n_vocab": n_vocab, "n_params": sum(int(t.n_elements) for t in r.tensors),
        "types": dict(types), "weight_bytes": sum(int(t.n_bytes) for t in r.tensors),
        "bytes_per_token": per_token, "metadata": kv,
    }


def _info(args: argparse.Namespace) -> int:
    import json

    s = gguf_summary(args.gguf)
    if args.json:
        print(json.dumps(s, indent=1, default=str))
        return 0
    for k in ("path", "bytes", "arch", "n_layer", "n_embd", "n_vocab", "n_params", "types",
              "weight_bytes", "bytes_per_token"):
        print(f"{k:>16}: {s[k]}")
    for k, v in s["metadata"].items():
        if not k.startswith("GGUF."):
            print(f"{k:>40} = {v}")
    return 0


_COMMANDS = {"gen": _gen, "convert": _convert, "list": _list, "info": _info}
