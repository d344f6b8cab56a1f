"""Writing qwen35 GGUF files the way llama.cpp's converter does (same gguf-py writer, same key order).

Tensors are streamed: each tensor's float32 data is produced, encoded and written, then dropped,
so peak memory is about one tensor (plus its encoding), whatever the model size. The file is
written under a temporary name in the destination folder and renamed into place at the end.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path

import gguf
import numpy as np
from gguf import GGMLQuantizationType as QT

from .quant import FILE_TYPES, encode, nbytes, tensor_type
from .recipes import ARCH, Qwen35Config, TensorSpec


@dataclass
class Vocab:
    """The tokenizer block: tokens, their types, the BPE merges and special token ids."""

    tokens: list[str]
    toktypes: list[int]
    pre: str = "qwen35"
    model: str = "gpt2"
    merges: list[str] = field(default_factory=list)
    special_ids: dict[str, int] = field(default_factory=dict)  # in gguf-py SpecialVocab order
    add_special: dict[str, bool] = field(default_factory=dict)
    chat_template: str | None = None
    special_vocab: gguf.SpecialVocab | None = None  # when set, it writes merges and special ids

    def add_to(self, w: gguf.GGUFWriter) -> None:
        w.add_tokenizer_model(self.model)
        w.add_tokenizer_pre(self.pre)
        w.add_token_list(self.tokens)
        w.add_token_types(self.toktypes)
        if self.special_vocab is not None:
            self.special_vocab.add_to_gguf(w, quiet=True)
            return
        # same order as gguf.SpecialVocab.add_to_gguf
        if self.merges:
            w.add_token_merges(self.merges)
        for typ, tokid in self.special_ids.items():
            getattr(w, f"add_{typ}_token_id")(tokid)
        for typ, value in self.add_special.items():
            getattr(w, f"add_add_{typ}_token")(value)
        if self.chat_template is not None:
            w.add_chat_template(self.chat_template)


def add_hparams(w: gguf.GGUFWriter, c: Qwen35Config, outtype: str) -> None:
    """The qwen35 hyper-parameter keys, in the converter's order (file_type sits among them)."""
    w.add_block_count(c.num_hidden_layers)
    w.add_context_length(c.context_length)
    w.add_embedding_length(c.hidden_size)
    w.add_feed_forward_length(c.intermediate_size)
    w.add_head_count(c.num_attention_heads)
    w.add_head_count_kv(c.num_key_value_heads)
    w.add_rope_dimension_sections(list(c.rope_sections))
    w.add_rope_freq_base(c.rope_theta)
    w.add_layer_norm_rms_eps(c.rms_norm_eps)
    w.add_key_length(c.head_dim)
    w.add_value_length(c.head_dim)
    w.add_file_type(FILE_TYPES[outtype])
    w.add_ssm_conv_kernel(c.linear_conv_kernel_dim)
    w.add_ssm_state_size(c.linear_key_head_dim)
    w.add_ssm_group_count(c.linear_num_key_heads)
    w.add_ssm_time_step_rank(c.linear_num_value_heads)
    w.add_ssm_inner_size(c.linear_value_head_dim * c.linear_num_value_heads)
    w.add_array(f"{ARCH}.attention.recurrent_layers", [bool(x) for x in c.recurrent_layers])
    w.add_full_attention_interval(c.full_attention_interval)
    w.add_rope_dimension_count(c.n_rot)
    w.add_quantization_version(gguf.GGML_QUANT_VERSION)


def _numpy_shape(ne: tuple[int, ...]) -> tuple[int, ...]:
    return tuple(reversed(ne))


def write_gguf(
    path: Path,
    c: Qwen35Config,
    outtype: str,
    metadata: gguf.Metadata,
    vocab: Vocab,
    tensors: Iterable[tuple[TensorSpec, Callable[[], np.ndarray]]],
) -> Path:
    """Write a qwen35 GGUF atomically. ``tensors`` yields (spec, producer); a producer returns the
    tensor's float32 values with numpy shape = reversed(ne) (HF layout)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tensors = list(tensors)
    fd, tmp_name = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    os.close(fd)
    tmp = Path(tmp_name)
    w: gguf.GGUFWriter | None = None
    try:
        w = gguf.GGUFWriter(tmp, ARCH)
        w.add_type(gguf.GGUFType.MODEL)
        if metadata.size_label is None:
            n = sum(s.n_elements for s, _ in tensors)
            metadata.size_label = gguf.size_label(n, n, 0, 0)
        metadata.set_gguf_meta_model(w)
        add_hparams(w, c, outtype)
        vocab.add_to(w)

        plan = []
        for spec, producer in tensors:
            qt = tensor_type(spec.name, spec.ne, outtype)
            nb = nbytes(spec.ne, qt)
            shape = _numpy_shape(spec.ne)
            if qt == QT.F32:
                w.add_tensor_info(spec.name, shape, np.dtype(np.float32), nb)
            elif qt == QT.F16:
                w.add_tensor_info(spec.name, shape, np.dtype(np.float16), nb)
            else:
                bshape = (*shape[:-1], nb // int(np.prod(shape[:-1], dtype=np.int64)))
                w.add_tensor_info(spec.name, bshape, np.dtype(np.uint8), nb, raw_dtype=qt)
            plan.append((spec, producer, qt, nb))

        w.write_header_to_file()
        w.write_kv_data_to_file()
        w.write_ti_data_to_file()
        for spec, producer, qt, nb in plan:
            data = producer()
            want = _numpy_shape(spec.ne)
            if tuple(data.shape) != want:
                raise ValueError(f"{spec.name}: producer gave shape {tuple(data.shape)}, expected {want}")
            enc = encode(data, qt)
            del data
            if enc.nbytes != nb:
                raise AssertionError(f"{spec.name}: encoded {enc.nbytes} bytes, expected {nb}")
            w.write_tensor_data(enc)
            del enc
        w.close()
        umask = os.umask(0)
        os.umask(umask)
        os.chmod(tmp, 0o666 & ~umask)
        os.replace(tmp, path)
    except BaseException:
        if w is not None:
            try:
                w.close()  # release the file (Windows cannot remove an open file)
            except Exception:  # noqa: BLE001 - the original error is the one to report
                pass
        tmp.unlink(missing_ok=True)
        raise
    return path
