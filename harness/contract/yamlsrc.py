"""YAML to plain Python values, keeping the line of every key and value (for error messages).

Uses yaml.compose (nodes carry marks) and a SafeLoader constructor for scalars. Anchors, aliases
and merge keys (`<<: *defaults`) are resolved; a key repeated within one mapping is reported.
Loading is bounded: an alias inside its own anchor (a recursive document), nesting deeper than
MAX_DEPTH, and an expansion beyond MAX_ALIAS_USES aliases, MAX_NODES nodes or MAX_SCALAR_CHARS
characters (an "alias bomb": a few hundred bytes that expand to gigabytes) are YamlLimitErrors
with the line of the alias or node at fault.
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


class YamlLimitError(YamlSyntaxError):
    """Valid YAML refused because loading it would be unbounded (recursion, alias bomb, depth)."""


_MERGE_TAG = "tag:yaml.org,2002:merge"
_PLAIN_TAGS = ("tag:yaml.org,2002:seq", "tag:yaml.org,2002:map")

MAX_DEPTH = 64  # nesting of mappings/sequences, aliases and merges expanded
MAX_ALIAS_USES = 1_000  # aliases (and merge keys) expanded in all
MAX_NODES = 100_000  # nodes of the expanded document
MAX_SCALAR_CHARS = 16 * 1024 * 1024  # characters of all scalars of the expanded document


class _BoundedLoader(yaml.SafeLoader):
    """SafeLoader whose composer refuses an alias to an anchor still being composed (the node
    would contain itself) and nesting deeper than MAX_DEPTH, and remembers where each anchored
    node is first used through an alias (for the messages of the expansion caps)."""

    def __init__(self, stream: str):
        super().__init__(stream)
        self.open_anchors: set[str] = set()
        self.depth = 0
        self.alias_use: dict[int, tuple[int, str]] = {}  # id(node) -> (line of first alias, anchor)

    def compose_node(self, parent: Any, index: Any) -> Any:
        event = self.peek_event()
        if isinstance(event, yaml.AliasEvent):
            if event.anchor in self.open_anchors:
                raise YamlLimitError(event.start_mark.line + 1, f"recursive alias *{event.anchor}: it is used "
                                     f"inside its own anchor &{event.anchor} (the value would contain itself)")
            node = super().compose_node(parent, index)
            self.alias_use.setdefault(id(node), (event.start_mark.line + 1, str(event.anchor)))
            return node
        if self.depth >= MAX_DEPTH:
            raise YamlLimitError(event.start_mark.line + 1, f"nested deeper than {MAX_DEPTH} levels")
        anchor = getattr(event, "anchor", None)
        self.depth += 1
        if anchor is not None:
            self.open_anchors.add(anchor)
        try:
            return super().compose_node(parent, index)
        finally:
            self.depth -= 1
            if anchor is not None:
                self.open_anchors.discard(anchor)


@dataclass
class _Budget:
    """What the expansion of aliases has used so far; see the MAX_* caps."""

    alias_use: dict[int, tuple[int, str]]
    seen: set[int] = field(default_factory=set)
    aliases: int = 0
    nodes: int = 0
    chars: int = 0

    def spend(self, node: yaml.Node, depth: int) -> None:
        line = node.start_mark.line + 1
        if id(node) in self.seen and id(node) in self.alias_use:  # one more use of an alias
            self.aliases += 1
            line, anchor = self.alias_use[id(node)]
            if self.aliases > MAX_ALIAS_USES:
                raise YamlLimitError(line, f"more than {MAX_ALIAS_USES} aliases expanded (here *{anchor}): "
                                     "an alias bomb?")
        self.seen.add(id(node))
        self.nodes += 1
        if self.nodes > MAX_NODES:
            raise YamlLimitError(line, f"the document expands to more than {MAX_NODES} values "
                                 "(aliases included): an alias bomb?")
        if isinstance(node, yaml.ScalarNode):
            self.chars += len(node.value)
            if self.chars > MAX_SCALAR_CHARS:
                raise YamlLimitError(line, f"the document expands to more than {MAX_SCALAR_CHARS} characters "
                                     "of values (aliases included)")
        if depth > MAX_DEPTH:
            raise YamlLimitError(line, f"nested deeper than {MAX_DEPTH} levels once aliases are expanded")


def load(text: str) -> Located:
    loader: _BoundedLoader | None = None
    try:
        loader = _BoundedLoader(text)  # the reader checks the characters here
        node = loader.get_single_node()
    except YamlSyntaxError:
        raise
    except yaml.MarkedYAMLError as e:
        mark = e.problem_mark or e.context_mark
        line = mark.line + 1 if mark else 1
        raise YamlSyntaxError(line, f"{e.problem or e}".strip()) from None
    except yaml.YAMLError as e:
        raise YamlSyntaxError(1, str(e)) from None
    finally:
        if loader is not None:
            loader.dispose()
    out = Located(None)
    if node is None:
        return out
    constructor = yaml.SafeLoader("")
    try:
        out.value = _convert(node, (), out, constructor, _Budget(loader.alias_use if loader else {}), 0)
    except yaml.constructor.ConstructorError as e:
        mark = e.problem_mark
        raise YamlSyntaxError(mark.line + 1 if mark else 1, str(e.problem)) from None
    return out


def _scalar(node: yaml.ScalarNode, c: yaml.SafeLoader) -> Any:
    """A scalar's value. PyYAML's own constructors raise bare Python errors on some values
    (`!!float` with no text: IndexError; `2026-13-45`, read as a date: ValueError)."""
    try:
        value = c.construct_object(node, deep=True)
    except yaml.YAMLError:
        raise
    except (ValueError, IndexError, KeyError, AttributeError, TypeError, OverflowError) as e:
        tag = node.tag.rsplit(":", 1)[-1]
        why = f" ({e})" if isinstance(e, ValueError) else ""
        raise yaml.constructor.ConstructorError(None, None, f"cannot read {node.value[:40]!r} as a {tag}{why}",
                                                node.start_mark) from None
    if isinstance(value, str):
        # escapes can write what no file name, argv or report can hold: NUL, a lone UTF-16 surrogate
        if "\0" in value:
            raise yaml.constructor.ConstructorError(None, None, f"{value[:40]!r} holds a NUL character",
                                                    node.start_mark)
        try:
            value.encode("utf-8")
        except UnicodeEncodeError:
            raise yaml.constructor.ConstructorError(None, None, f"{value[:40]!r} holds a lone surrogate, "
                                                    "which is not a character", node.start_mark) from None
    return value


def _convert(node: yaml.Node, path: Path_, out: Located, c: yaml.SafeLoader, budget: _Budget,
             depth: int) -> Any:
    budget.spend(node, depth)
    out.lines.setdefault(path, node.start_mark.line + 1)
    if isinstance(node, yaml.ScalarNode):
        return _scalar(node, c)
    if not isinstance(node, yaml.ScalarNode) and node.tag not in _PLAIN_TAGS:
        raise yaml.constructor.ConstructorError(None, None, f"tag {node.tag} is not allowed (plain lists and "
                                                "mappings only)", node.start_mark)
    if isinstance(node, yaml.SequenceNode):
        return [_convert(n, path + (i,), out, c, budget, depth + 1) for i, n in enumerate(node.value)]
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
                    val = _convert(src, path, out, c, budget, depth + 1)
                    for k, v in val.items():
                        merged.setdefault(k, v)
                continue
            key = _scalar(knode, c) if isinstance(knode, yaml.ScalarNode) else c.construct_object(knode, deep=True)
            if isinstance(key, (list, dict)):
                raise yaml.constructor.ConstructorError(None, None, "a mapping key must be a scalar",
                                                        knode.start_mark)
            if key in result:
                out.duplicates.append((path + (key,), knode.start_mark.line + 1))
            out.key_lines[path + (key,)] = knode.start_mark.line + 1
            result[key] = _convert(vnode, path + (key,), out, c, budget, depth + 1)
        for k, v in merged.items():
            result.setdefault(k, v)
        return result
    return None
