"""Tokenizer blocks for qwen35 GGUFs.

- `byte_level_vocab`: the generator's minimal byte-level BPE (gpt2 style), for recipes (vocab >= 258)
  and for checkpoints without a tokenizer.json: the 256 byte tokens, then merges of pairs (two
  bytes, then a two-byte token and a byte), then one
  end-of-text control token. Enough for llama.cpp to load the file; kite feeds token ids directly.
- `hf_vocab`: the converter's vocab step for a Hugging Face ``tokenizer.json`` (BPE), following
  llama.cpp's ``get_vocab_base`` (token list by id, token types, ``[PAD{i}]`` fillers) and gguf-py's
  ``SpecialVocab`` (merges, special token ids), without needing transformers.
"""

from __future__ import annotations

import logging
from pathlib import Path

import gguf

from .gguf_out import Vocab
from .hfjson import ConvertError, expect_object, fail, is_int, read_json, show

log = logging.getLogger(__name__)

END_TOKEN = "<|endoftext|>"


def bytes_to_unicode() -> list[tuple[int, str]]:
    """GPT-2's reversible byte -> printable character map, in its canonical order."""
    bs = (list(range(ord("!"), ord("~") + 1)) + list(range(ord("¡"), ord("¬") + 1))
          + list(range(ord("®"), ord("ÿ") + 1)))
    cs = bs[:]
    n = 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + n)
            n += 1
    return [(b, chr(c)) for b, c in zip(bs, cs, strict=True)]


def byte_level_vocab(vocab_size: int, eos_id: int | None = None, pre: str = "qwen35") -> Vocab:
    if vocab_size < 2:
        raise ValueError(f"vocab_size must be >= 2, got {vocab_size}")
    eos = vocab_size - 1 if eos_id is None else eos_id
    byte_tok = [c for _, c in bytes_to_unicode()]
    if vocab_size < 258:  # too small for every byte: a prefix of them, and one (unreachable) merge
        tokens = byte_tok[:vocab_size - 1]
        toktypes = [int(gguf.TokenType.NORMAL)] * len(tokens)
        tokens.insert(eos, END_TOKEN)
        toktypes.insert(eos, int(gguf.TokenType.CONTROL))
        return Vocab(tokens=tokens, toktypes=toktypes, pre=pre, merges=[f"{byte_tok[0]} {byte_tok[1]}"],
                     special_ids={"eos": eos, "pad": eos})
    n_merge = vocab_size - 1 - 256
    tokens = list(byte_tok)
    merges: list[str] = []
    # two-byte merges, then (two-byte token, byte): every result string is distinct
    level2 = min(n_merge, 256 * 256)
    for k in range(level2):
        a, b = byte_tok[k // 256], byte_tok[k % 256]
        merges.append(f"{a} {b}")
        tokens.append(a + b)
    k = 0
    while len(merges) < n_merge:
        left, b = tokens[256 + k // 256], byte_tok[k % 256]
        merges.append(f"{left} {b}")
        tokens.append(left + b)
        k += 1
    toktypes = [int(gguf.TokenType.NORMAL)] * len(tokens)
    # the end token sits at eos; the token there moves to the last slot
    tokens.insert(eos, END_TOKEN)
    toktypes.insert(eos, int(gguf.TokenType.CONTROL))
    assert len(tokens) == vocab_size
    return Vocab(tokens=tokens, toktypes=toktypes, pre=pre, merges=merges,
                 special_ids={"eos": eos, "pad": eos})


def _looks_special(t: str) -> bool:
    # llama.cpp convert_hf_to_gguf.py: TextModel.does_token_look_special
    return (t in ("<pad>", "<mask>", "<2mass>", "[@BOS@]")
            or (t.startswith("<|") and t.endswith("|>"))
            or (t.startswith("<｜") and t.endswith("｜>"))
            or (t.startswith("<unused") and t.endswith(">")))


def hf_vocab(hf_dir: Path, vocab_size: int, pre: str = "qwen35") -> Vocab | None:
    """The converter's gpt2 vocab block from ``tokenizer.json``; None when there is none."""
    tj_path = Path(hf_dir) / "tokenizer.json"
    if not tj_path.is_file():
        return None
    tj = expect_object(read_json(tj_path), str(tj_path))
    model = expect_object(tj.get("model") or {}, f"{tj_path}: model")
    if model.get("type") != "BPE":
        raise ConvertError(f"{tj_path}: only BPE tokenizers are supported, got {show(model.get('type'))}")
    vocab: dict[str, int] = dict(expect_object(model.get("vocab") or {}, f"{tj_path}: model.vocab"))
    added_list = tj.get("added_tokens", [])
    if not isinstance(added_list, list):
        raise fail(f"{tj_path}: added_tokens", "a list", added_list)
    added = {}
    for k, t in enumerate(added_list):
        if not (isinstance(t, dict) and isinstance(t.get("content"), str)):
            raise fail(f"{tj_path}: added_tokens[{k}]", 'an object with a string "content" and an integer "id"', t)
        added[t["content"]] = t
    for content, t in added.items():
        vocab[content] = t.get("id")
    for tok, i in vocab.items():
        if not is_int(i) or not 0 <= i < vocab_size:
            where = f"added_tokens {show(tok, 200)}" if tok in added else f"model.vocab[{show(tok, 200)}]"
            raise ConvertError(f"{tj_path}: {where}: token id must be an integer in [0, vocab_size = {vocab_size}), "
                               f"got {show(i)}")
    reverse = {i: t for t, i in vocab.items()}
    tokens: list[str] = []
    toktypes: list[int] = []
    for i in range(vocab_size):
        if i not in reverse:
            tokens.append(f"[PAD{i}]")
            toktypes.append(int(gguf.TokenType.UNUSED))
            continue
        tok = reverse[i]
        if tok in added:
            # llama.cpp re-decodes non-normalized added tokens through the tokenizer; for BPE
            # added tokens that round trip is the identity, so the content is kept as it is.
            if added[tok].get("special") or _looks_special(tok):
                toktypes.append(int(gguf.TokenType.CONTROL))
            else:
                tok = tok.replace("\u2581", " ")
                toktypes.append(int(gguf.TokenType.USER_DEFINED))
        else:
            toktypes.append(int(gguf.TokenType.NORMAL))
        tokens.append(tok)
    return Vocab(tokens=tokens, toktypes=toktypes, pre=pre, special_vocab=_special_vocab(Path(hf_dir)))


def _special_vocab(hf_dir: Path) -> gguf.SpecialVocab:
    """gguf-py's SpecialVocab (merges, special token ids, chat template from tokenizer.json,
    tokenizer_config.json, config.json, chat_template.*), as the converter builds it (no n_vocab),
    with what it read checked: it indexes those files without looking at their types, and the GGUF
    writer packs the ids as uint32."""
    where = f"{hf_dir}: tokenizer files (tokenizer.json, tokenizer_config.json, config.json, chat_template.*)"
    try:
        sv = gguf.SpecialVocab(hf_dir, load_merges=True)
    except RecursionError:
        raise ConvertError(f"{where}: JSON nested too deeply") from None
    except (ValueError, TypeError, AttributeError, KeyError, IndexError) as e:
        # the third-party reader's failures on malformed (but valid JSON) content, and bad JSON / UTF-8
        raise ConvertError(f"{where}: cannot be read: {type(e).__name__}: {' '.join(str(e).split())[:200]}") from None
    if not all(isinstance(m, str) for m in sv.merges):
        raise ConvertError(f"{where}: merges must be strings or pairs of strings")
    for typ, tid in sv.special_token_ids.items():
        if not is_int(tid) or not 0 <= tid < 2**32:
            raise ConvertError(f"{where}: {typ} token id must be an integer in [0, 2^32), got {show(tid)}")
    ct = sv.chat_template
    if ct is not None and not isinstance(ct, str) and not all(
            isinstance(x, dict) and isinstance(x.get("name", ""), str) and isinstance(x.get("template"), (str, type(None)))
            for x in ct):
        raise ConvertError(f"{where}: chat_template must be a string or a list of {{name, template}} strings")
    return sv
