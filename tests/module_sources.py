"""The GPU module's kernel definitions read from its sources (native/cuda), for the tests that
check their signatures: one parser, so that a new signature macro is taught to it once."""

from __future__ import annotations

import re


def _without_signature_macros(text: str) -> str:
    """text without // comments and without __launch_bounds__(...) or KC_MAX_REGISTERS(...) (their
    parentheses may nest)."""
    text = re.sub(r"//[^\n]*", "", text)
    while (m := re.search(r"(__launch_bounds__|KC_MAX_REGISTERS)\(", text)):
        i, end, depth = m.start(), m.end() - 1, 0
        while True:  # to the parenthesis that closes the first one
            depth += {"(": 1, ")": -1}.get(text[end], 0)
            if depth == 0:
                break
            end += 1
        text = text[:i] + text[end + 1:]
    return text


def kernel_definitions(text: str) -> list[tuple[str, str]]:
    """(name, parameter list) of each __global__ function defined in text: its parameter list is
    followed by its body (a declaration ends in ';')."""
    return re.findall(r"__global__\s+void\s+(\w+)\s*\(([^;{]*)\)\s*\{", _without_signature_macros(text))
