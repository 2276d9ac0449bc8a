"""CLAW-IDL: TypeScript-like interfaces → JSON Schema.

Accepts ``interface Name { field?: type; … }`` (``export``, ``extends``, ``readonly``,
``;`` or ``,`` optional), ``type Alias = …``, the types ``string``, ``number``,
``integer``, ``boolean``, ``object``, ``any``, ``null``, ``T[]``, ``Array<T>``,
``Record<string, T>``, inline ``{ … }`` objects, references to other interfaces,
and unions (string/number literal unions become ``enum``). A ``// comment`` line
before a field, or a trailing one, describes it; ``// @dialect:dotted.key (note)``
annotates it with an auto-fill hint.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

_TOKEN = re.compile(
    r"(?P<ws>[ \t\r]+)|(?P<nl>\n)|(?P<lc>//[^\n]*)|(?P<bc>/\*.*?\*/)"
    r"|(?P<str>\"(?:[^\"\\\n]|\\.)*\"|'(?:[^'\\\n]|\\.)*')"
    r"|(?P<num>-?\d+(?:\.\d+)?)|(?P<id>[A-Za-z_$][\w$]*)|(?P<p>[{}()\[\]<>:;,|?=&.])",
    re.S,
)
PRIMITIVES: dict[str, dict[str, Any]] = {
    "string": {"type": "string"}, "number": {"type": "number"}, "float": {"type": "number"},
    "integer": {"type": "integer"}, "int": {"type": "integer"}, "boolean": {"type": "boolean"},
    "bool": {"type": "boolean"}, "object": {"type": "object"}, "null": {"type": "null"},
    "any": {}, "unknown": {}, "Date": {"type": "string", "format": "date-time"},
}


class IdlError(Exception):
    def __init__(self, line: int, message: str):
        self.line, self.message = line, message
        super().__init__(f"line {line}: {message}")


@dataclass
class Tok:
    kind: str  # id str num p lc bc end
    value: str
    line: int
    own_line: bool = False  # a comment with nothing but whitespace before it on its line


@dataclass
class Field:
    name: str
    type: Any  # parsed type node
    optional: bool
    line: int
    description: str = ""
    dialect: str | None = None


@dataclass
class Interface:
    name: str
    fields: list[Field]
    line: int
    extends: list[str] = field(default_factory=list)
    description: str = ""


def tokenize(text: str, first_line: int = 1) -> list[Tok]:
    toks: list[Tok] = []
    line, pos, line_has_code = first_line, 0, False
    while pos < len(text):
        m = _TOKEN.match(text, pos)
        if not m:
            raise IdlError(line, f"unexpected character {text[pos]!r}")
        kind, value = m.lastgroup, m.group()
        pos = m.end()
        if kind == "nl":
            line, line_has_code = line + 1, False
            continue
        if kind == "ws":
            continue
        if kind in ("lc", "bc"):
            toks.append(Tok(kind, value, line, own_line=not line_has_code))
            line += value.count("\n")
            continue
        toks.append(Tok(kind, value, line))  # type: ignore[arg-type]
        line_has_code = True
    toks.append(Tok("end", "", line))
    return toks


def _comment_text(tok: Tok) -> str:
    v = tok.value
    if tok.kind == "lc":
        return v[2:].strip()
    return re.sub(r"^\s*\*\s?", "", v[2:-2].strip(), flags=re.M).strip().strip("*").strip()


class Parser:
    def __init__(self, text: str, first_line: int = 1):
        self.toks = tokenize(text, first_line)
        self.i = 0
        self.interfaces: dict[str, Interface] = {}
        self.aliases: dict[str, tuple[Any, int]] = {}
        self.order: list[str] = []

    # token helpers
    def peek(self, skip_comments: bool = True) -> Tok:
        j = self.i
        while skip_comments and self.toks[j].kind in ("lc", "bc"):
            j += 1
        return self.toks[j]

    def next(self) -> Tok:
        while self.toks[self.i].kind in ("lc", "bc"):
            self.i += 1
        t = self.toks[self.i]
        self.i += 1
        return t

    def expect(self, value: str) -> Tok:
        t = self.next()
        if t.value != value:
            raise IdlError(t.line, f"expected {value!r}, found {t.value or 'end of block'!r}")
        return t

    def comments(self) -> list[Tok]:
        out = []
        while self.toks[self.i].kind in ("lc", "bc"):
            out.append(self.toks[self.i])
            self.i += 1
        return out

    # grammar
    def parse(self) -> "Parser":
        pending: list[Tok] = []
        while True:
            pending += self.comments()
            t = self.toks[self.i]
            if t.kind == "end":
                return self
            if t.value == "export":
                self.i += 1
                continue
            if t.value == "interface":
                self.i += 1
                iface = self.interface(pending)
                if iface.name in self.interfaces:
                    raise IdlError(iface.line, f"interface {iface.name} is defined twice")
                self.interfaces[iface.name] = iface
                self.order.append(iface.name)
            elif t.value == "type":
                self.i += 1
                name = self.next()
                self.expect("=")
                self.aliases[name.value] = (self.type(), name.line)
                if self.peek().value == ";":
                    self.next()
            elif t.value == ";":
                self.i += 1
            else:
                raise IdlError(t.line, f"expected 'interface' or 'type', found {t.value!r}")
            pending = []

    def interface(self, pending: list[Tok]) -> Interface:
        name = self.next()
        if name.kind != "id":
            raise IdlError(name.line, f"expected an interface name, found {name.value!r}")
        extends: list[str] = []
        if self.peek().value == "extends":
            self.next()
            extends.append(self.next().value)
            while self.peek().value == ",":
                self.next()
                extends.append(self.next().value)
        self.expect("{")
        desc = " ".join(_comment_text(c) for c in pending if not _comment_text(c).startswith("@"))
        return Interface(name.value, self.fields("}"), name.line, extends, desc)

    def fields(self, close: str) -> list[Field]:
        fields: list[Field] = []
        while True:
            pending = self.comments()
            t = self.toks[self.i]
            if t.value == close:
                self.i += 1
                return fields
            if t.kind == "end":
                raise IdlError(t.line, f"missing {close!r} before the end of the block")
            if t.value == "readonly":
                self.i += 1
                t = self.toks[self.i]
            if t.value == "[":  # index signature: [key: string]: T
                self.i += 1
                self.next(), self.expect(":"), self.next(), self.expect("]"), self.expect(":")
                fields.append(Field("[*]", self.type(), True, t.line))
            else:
                if t.kind not in ("id", "str"):
                    raise IdlError(t.line, f"expected a field name, found {t.value!r}")
                self.i += 1
                name = t.value.strip("\"'") if t.kind == "str" else t.value
                optional = False
                if self.toks[self.i].value == "?":
                    optional, self.i = True, self.i + 1
                if self.toks[self.i].value == "(":
                    raise IdlError(t.line, f"method signatures are not supported ({name}); declare fields only")
                if self.next().value != ":":
                    raise IdlError(t.line, f"expected ':' after field {name!r}")
                ftype = self.type()
                fields.append(Field(name, ftype, optional, t.line))
            last_line = self.toks[self.i - 1].line
            if self.toks[self.i].value in (";", ","):
                self.i += 1
            trailing = [c for c in self.toks[self.i : self.i + 1] if c.kind in ("lc", "bc") and c.line == last_line and not c.own_line]
            if trailing:
                self.i += 1
            f = fields[-1]
            texts = []
            for c in pending:
                txt = _comment_text(c)
                m = re.match(r"^@dialect\s*:\s*([\w.\-]+)\s*(?:\((.*)\))?\s*(.*)$", txt)
                if m:
                    f.dialect = m.group(1)
                    note = (m.group(2) or m.group(3) or "").strip()
                    if note:
                        texts.append(note)
                elif txt and not txt.startswith("@"):
                    texts.append(txt)
            if trailing:
                texts.append(_comment_text(trailing[0]))
            f.description = " ".join(t for t in texts if t).strip()

    def type(self) -> Any:
        if self.peek().value == "|":
            self.next()
        options = [self.postfix()]
        while self.peek().value == "|":
            self.next()
            options.append(self.postfix())
        return options[0] if len(options) == 1 else ("union", options)

    def postfix(self) -> Any:
        t = self.primary()
        while self.peek().value == "[" and self.toks[self.i + 1].value == "]":
            self.next(), self.next()
            t = ("array", t)
        return t

    def primary(self) -> Any:
        t = self.next()
        if t.kind == "str":
            return ("lit", bytes(t.value[1:-1], "utf-8").decode("unicode_escape"))
        if t.kind == "num":
            return ("lit", float(t.value) if "." in t.value else int(t.value))
        if t.value == "(":
            inner = self.type()
            self.expect(")")
            return inner
        if t.value == "{":
            return ("object", self.fields("}"))
        if t.kind == "id":
            if t.value in ("true", "false"):
                return ("lit", t.value == "true")
            if self.peek().value == "<":
                self.next()
                args = [self.type()]
                while self.peek().value == ",":
                    self.next()
                    args.append(self.type())
                self.expect(">")
                return ("generic", t.value, args, t.line)
            return ("ref", t.value, t.line)
        raise IdlError(t.line, f"expected a type, found {t.value or 'end of block'!r}")


class SchemaBuilder:
    """Turns parsed types into JSON Schema, resolving interface and alias references."""

    def __init__(self, parser: Parser):
        self.p = parser
        self.stack: list[str] = []

    def fields_schema(self, fields: list[Field]) -> dict[str, Any]:
        props: dict[str, Any] = {}
        required: list[str] = []
        extra: Any = False
        for f in fields:
            s = self.schema(f.type)
            if f.name == "[*]":
                extra = s or True
                continue
            if f.description:
                s = {**s, "description": f.description}
            props[f.name] = s
            if not f.optional:
                required.append(f.name)
        out: dict[str, Any] = {"type": "object", "properties": props}
        if required:
            out["required"] = required
        out["additionalProperties"] = extra
        return out

    def interface_schema(self, name: str, line: int = 0) -> dict[str, Any]:
        iface = self.p.interfaces[name]
        if name in self.stack:
            raise IdlError(line or iface.line, f"interface {name} refers to itself; recursive types are not supported")
        self.stack.append(name)
        try:
            fields: list[Field] = []
            for base in iface.extends:
                if base not in self.p.interfaces:
                    raise IdlError(iface.line, f"{name} extends unknown interface {base}")
                fields += self.p.interfaces[base].fields
            return self.fields_schema(fields + iface.fields)
        finally:
            self.stack.pop()

    def schema(self, t: Any) -> dict[str, Any]:
        tag = t[0]
        if tag == "lit":
            v = t[1]
            kind = "boolean" if isinstance(v, bool) else "string" if isinstance(v, str) else "integer" if isinstance(v, int) else "number"
            return {"type": kind, "enum": [v]}
        if tag == "array":
            return {"type": "array", "items": self.schema(t[1])}
        if tag == "object":
            return self.fields_schema(t[1])
        if tag == "union":
            return self.union([self.schema(o) for o in t[1]])
        if tag == "generic":
            _, name, args, line = t
            if name in ("Array", "ReadonlyArray", "Set") and len(args) == 1:
                return {"type": "array", "items": self.schema(args[0])}
            if name in ("Record", "Map") and len(args) == 2:
                return {"type": "object", "additionalProperties": self.schema(args[1]) or True}
            raise IdlError(line, f"unsupported generic type {name}<…>")
        _, name, line = t
        if name in PRIMITIVES:
            return dict(PRIMITIVES[name])
        if name in self.p.interfaces:
            return self.interface_schema(name, line)
        if name in self.p.aliases:
            if name in self.stack:
                raise IdlError(line, f"type {name} refers to itself")
            self.stack.append(name)
            try:
                return self.schema(self.p.aliases[name][0])
            finally:
                self.stack.pop()
        raise IdlError(line, f"unknown type {name!r} (use string, number, integer, boolean, object, T[] or a declared interface)")

    @staticmethod
    def union(options: list[dict[str, Any]]) -> dict[str, Any]:
        if options and all("enum" in o and len(o) == 2 for o in options):
            kinds = {o["type"] for o in options}
            values = [v for o in options for v in o["enum"]]
            if len(kinds) == 1:
                return {"type": kinds.pop(), "enum": values}
            return {"enum": values}
        nonnull = [o for o in options if o != {"type": "null"}]
        if len(nonnull) == 1 and len(options) == 2 and set(nonnull[0]) == {"type"}:
            return {"type": [nonnull[0]["type"], "null"]}
        return {"anyOf": options}


@dataclass
class IdlResult:
    """Parsed interfaces; ``tools`` are the ones that become tool definitions."""

    interfaces: dict[str, Interface]
    schemas: dict[str, dict[str, Any]]
    tools: list[str]
    dialects: dict[str, dict[str, str]]  # interface -> {field: dotted key}


_OUTPUT = re.compile(r"(Result|Output|Response|Returns?)$")


def compile_idl(text: str, first_line: int = 1) -> IdlResult:
    """Parse an IDL block. Raises :class:`IdlError` with the file line of the problem.

    Tools are the interfaces no other interface refers to, except output types
    (names ending in Result, Output, Response or Return(s)).
    """
    p = Parser(text, first_line).parse()
    if not p.interfaces:
        raise IdlError(first_line, "no interface declared (expected `interface Name { field: type; }`)")
    b = SchemaBuilder(p)
    schemas = {name: b.interface_schema(name) for name in p.order}
    referenced: set[str] = set()

    def walk(t: Any) -> None:
        if t[0] == "ref":
            referenced.add(t[1])
        elif t[0] in ("array",):
            walk(t[1])
        elif t[0] == "union":
            for o in t[1]:
                walk(o)
        elif t[0] == "object":
            for f in t[1]:
                walk(f.type)
        elif t[0] == "generic":
            for a in t[2]:
                walk(a)

    for iface in p.interfaces.values():
        referenced.update(iface.extends)
        for f in iface.fields:
            walk(f.type)
    for alias, _ in p.aliases.values():
        walk(alias)
    tools = [n for n in p.order if n not in referenced and not _OUTPUT.search(n)]
    if not tools:
        tools = [p.order[0]]
    dialects = {n: {f.name: f.dialect for f in p.interfaces[n].fields if f.dialect} for n in p.order}
    return IdlResult(p.interfaces, schemas, tools, dialects)
