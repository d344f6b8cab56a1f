"""YAML to plain Python values, keeping the line of every key and value (for error messages).

Uses yaml.compose (nodes carry marks) and a SafeLoader constructor for scalars. Anchors, aliases
and merge keys (`<<: *defaults`) are resolved; a key repeated within one mapping is reported.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import yaml

Path_ = tuple  # path of keys / list indices from the document root


@dataclass
class Located:
    value: Any
    lines: dict[Path_, int] = field(default_factory=dict)  # value line (1-based) per path
    key_lines: dict[Path_, int] = field(default_factory=dict)  # line of the key naming that path
    duplicates: list[tuple[Path_, int]] = field(default_factory=list)

    def line(self, path: Path_) -> int:
        p = tuple(path)
        while p:
            if p in self.key_lines:
                return self.key_lines[p]
            if p in self.lines:
                return self.lines[p]
            p = p[:-1]
        return self.lines.get((), 1)


class YamlSyntaxError(Exception):
    def __init__(self, line: int, message: str):
        self.line = line
        self.message = message
        super().__init__(f"line {line}: {message}")


_MERGE_TAG = "tag:yaml.org,2002:merge"


def load(text: str) -> Located:
    try:
        node = yaml.compose(text, Loader=yaml.SafeLoader)
    except yaml.MarkedYAMLError as e:
        mark = e.problem_mark or e.context_mark
        line = mark.line + 1 if mark else 1
        raise YamlSyntaxError(line, f"{e.problem or e}".strip()) from None
    except yaml.YAMLError as e:
        raise YamlSyntaxError(1, str(e)) from None
    out = Located(None)
    if node is None:
        return out
    constructor = yaml.SafeLoader("")
    try:
        out.value = _convert(node, (), out, constructor)
    except yaml.constructor.ConstructorError as e:
        mark = e.problem_mark
        raise YamlSyntaxError(mark.line + 1 if mark else 1, str(e.problem)) from None
    return out


def _convert(node: yaml.Node, path: Path_, out: Located, c: yaml.SafeLoader) -> Any:
    out.lines.setdefault(path, node.start_mark.line + 1)
    if isinstance(node, yaml.ScalarNode):
        return c.construct_object(node, deep=True)
    if isinstance(node, yaml.SequenceNode):
        return [_convert(n, path + (i,), out, c) for i, n in enumerate(node.value)]
    if isinstance(node, yaml.MappingNode):
        result: dict[Any, Any] = {}
        merged: dict[Any, Any] = {}
        for knode, vnode in node.value:
            if knode.tag == _MERGE_TAG:
                sources = vnode.value if isinstance(vnode, yaml.SequenceNode) else [vnode]
                for src in sources:
                    if not isinstance(src, yaml.MappingNode):
                        raise yaml.constructor.ConstructorError(
                            None, None, "`<<` merges mappings only", src.start_mark)
                    val = _convert(src, path, out, c)
                    for k, v in val.items():
                        merged.setdefault(k, v)
                continue
            key = c.construct_object(knode, deep=True)
            if isinstance(key, (list, dict)):
                raise yaml.constructor.ConstructorError(None, None, "a mapping key must be a scalar",
                                                        knode.start_mark)
            if key in result:
                out.duplicates.append((path + (key,), knode.start_mark.line + 1))
            out.key_lines[path + (key,)] = knode.start_mark.line + 1
            result[key] = _convert(vnode, path + (key,), out, c)
        for k, v in merged.items():
            result.setdefault(k, v)
        return result
    return None
