"""Reading YAML input files safely: scenarios, model scenarios and GPU configs.

The loader is PyYAML's safe loader with three changes: a key given twice in one mapping is an
error (PyYAML silently keeps the last); numbers such as ``25e6`` are floats, as in YAML 1.2
(YAML 1.1 makes them strings); and a document whose aliases expand to an absurd size (a "billion
laughs" file) or refer to themselves is refused before anything walks it. Aliases stay shared
references: nothing here copies a document, so a small file never becomes a large object.
"""
from __future__ import annotations

import errno
import os
import re
import stat
from pathlib import Path

import yaml

from .errors import ScenarioError
from .errors import short as _short

# A scenario is a few dozen lines; 1 MiB is far beyond any real one and PyYAML (pure Python)
# still parses it in seconds.
MAX_FILE_BYTES = 1 << 20
# Values after expanding every alias. A real sweep has at most thousands; the point limit of a
# sweep (scenario.MAX_POINTS) bounds the work, this bounds walking the document itself.
MAX_EXPANDED_NODES = 1_000_000

_FLOAT_12 = re.compile(r"""^(?:[-+]?(?:[0-9][0-9_]*)\.[0-9_]*(?:[eE][-+]?[0-9]+)?
                          |[-+]?(?:[0-9][0-9_]*)(?:[eE][-+]?[0-9]+)
                          |[-+]?\.[0-9_]+(?:[eE][-+]?[0-9]+)?
                          |[-+]?\.(?:inf|Inf|INF)
                          |\.(?:nan|NaN|NAN))$""", re.X)


class InputError(Exception):
    """A problem in the YAML text; the caller prefixes where the text came from."""


class _Loader(yaml.SafeLoader):
    def construct_mapping(self, node, deep=False):
        seen = {}
        for key_node, _ in node.value:
            if key_node.tag == "tag:yaml.org,2002:merge" or not isinstance(key_node, yaml.ScalarNode):
                continue
            key = self.construct_object(key_node, deep=True)
            try:
                first = seen.setdefault(key, key_node)
            except TypeError:
                continue
            if first is not key_node:
                m, m0 = key_node.start_mark, first.start_mark
                raise InputError(f"line {m.line + 1}, column {m.column + 1}: duplicate key {key!r} "
                                  f"(first at line {m0.line + 1}); each key may appear once")
        return super().construct_mapping(node, deep=deep)


_Loader.yaml_implicit_resolvers = {
    ch: [r for r in rs if r[0] != "tag:yaml.org,2002:float"]
    for ch, rs in yaml.SafeLoader.yaml_implicit_resolvers.items()}
_Loader.add_implicit_resolver("tag:yaml.org,2002:float", _FLOAT_12, list("-+0123456789."))
# Integers and booleans as YAML 1.2 reads them: no sexagesimal (2:08 is not 128), no underscores
# (1_2_8 is not 128), no yes/no/on/off; such values stay strings and the field check refuses them.
_Loader.yaml_implicit_resolvers = {
    ch: [r for r in rs if r[0] not in ("tag:yaml.org,2002:int", "tag:yaml.org,2002:bool")]
    for ch, rs in _Loader.yaml_implicit_resolvers.items()}
_Loader.add_implicit_resolver("tag:yaml.org,2002:int", re.compile(r"^(?:[-+]?[0-9]+|0x[0-9a-fA-F]+)$"),
                              list("-+0123456789"))
_Loader.add_implicit_resolver("tag:yaml.org,2002:bool", re.compile(r"^(?:true|True|TRUE|false|False|FALSE)$"),
                              list("tTfF"))


def _children(node):
    if isinstance(node, yaml.MappingNode):
        return [x for kv in node.value for x in kv]
    if isinstance(node, yaml.SequenceNode):
        return node.value
    return []


def _check_size(root) -> None:
    """Count the nodes the document has once every alias is expanded, without expanding it."""
    size, on_path = {}, set()
    stack = [(root, False)]
    while stack:
        node, finished = stack.pop()
        i = id(node)
        if finished:
            on_path.discard(i)
            size[i] = 1 + sum(size[id(c)] for c in _children(node))
            if size[i] > MAX_EXPANDED_NODES:
                raise InputError(f"aliases expand to more than {MAX_EXPANDED_NODES:,} values (an alias bomb?); "
                                  f"write the values out or use fewer aliases")
            continue
        if i in size:
            continue
        if i in on_path:
            m = node.start_mark
            raise InputError(f"line {m.line + 1}: a YAML alias refers to a node that contains it; "
                              f"recursive structures are not allowed")
        on_path.add(i)
        stack.append((node, True))
        stack.extend((c, False) for c in _children(node) if id(c) not in size)


def loads(text: str):
    """Parse one YAML document with the checks above; raises ``yaml.YAMLError`` or ``InputError``."""
    loader = _Loader(text)
    try:
        node = loader.get_single_node()
        if node is None:
            return None
        _check_size(node)
        return loader.construct_document(node)
    finally:
        loader.dispose()


def _yaml_problem(e: yaml.YAMLError) -> str:
    mark = getattr(e, "problem_mark", None)
    where = f"line {mark.line + 1}, column {mark.column + 1}" if mark else "?"
    return f"YAML syntax error at {where}: {getattr(e, 'problem', None) or e}"


def read_at_most(p, cap: int) -> bytes:
    """At most ``cap + 1`` bytes of file ``p`` (one more than allowed tells a file that grew past the
    cap while it was read), opened without blocking (a FIFO cannot hang the read)."""
    fd = os.open(p, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0))
    try:
        data = os.read(fd, cap + 1)
        while data and len(data) <= cap:
            more = os.read(fd, cap + 1 - len(data))
            if not more:
                break
            data += more
    finally:
        os.close(fd)
    return data


def read_text_bounded(p: Path, expected: str, error=ScenarioError) -> str:
    """The text of ``p`` if it is a regular file of at most MAX_FILE_BYTES: devices (/dev/zero),
    FIFOs and symlinks to them are refused before opening, and the read never blocks or grows
    past the cap even if the file changes under us."""
    st = os.stat(p)
    if stat.S_ISDIR(st.st_mode):
        raise IsADirectoryError(errno.EISDIR, "is a directory", str(p))
    if not stat.S_ISREG(st.st_mode):
        raise error(f"{p}: not a regular file (a device, FIFO or socket); expected {expected}")
    if st.st_size > MAX_FILE_BYTES:
        raise error(f"{p}: {st.st_size:,} bytes; {expected} is at most {MAX_FILE_BYTES:,} bytes")
    data = read_at_most(p, MAX_FILE_BYTES)
    if len(data) > MAX_FILE_BYTES:
        raise error(f"{p}: more than {MAX_FILE_BYTES:,} bytes; {expected} is at most {MAX_FILE_BYTES:,} bytes")
    return data.decode("utf-8")


def read_yaml(path: str | Path, expected: str = "a scenario YAML file", error=ScenarioError, missing_hint: str = ""):
    """The parsed document of ``path``; every failure is a one-line ``error`` (default
    ``ScenarioError``) naming the file (``missing_hint`` follows "file not found")."""
    p = Path(path)
    try:
        text = read_text_bounded(p, expected, error)
    except FileNotFoundError:
        raise error(f"{p}: file not found{missing_hint}") from None
    except IsADirectoryError:
        raise error(f"{p}: is a directory, expected {expected}") from None
    except UnicodeDecodeError as e:
        raise error(f"{p}: not a text file (byte {e.start} is not UTF-8); expected {expected}") from None
    except OSError as e:
        raise error(f"{p}: cannot read: {e.strerror}") from None
    try:
        return loads(text)
    except RecursionError:
        raise error(f"{p}: nested too deeply; {expected} is a few levels of mappings and lists") from None
    except yaml.YAMLError as e:
        raise error(f"{p}: {_yaml_problem(e)}") from None
    except InputError as e:
        raise error(f"{p}: {e}") from None


# --- the one parser of ``--set KEY=VALUE`` scenario overrides ---

def storage_path(key: str) -> list:
    """Where a ``--set`` field path lives in the scenario: ``gpu.FIELD`` is a GPU override
    (``gpu_overrides.FIELD``) and ``sweep.gpu.FIELD`` is one sweep key (``gpu.FIELD``)."""
    parts = key.strip().split(".")
    if parts[0] == "gpu" and len(parts) > 1:
        return ["gpu_overrides", ".".join(parts[1:])]
    if parts[0] == "sweep" and len(parts) > 2 and parts[1] == "gpu":
        return ["sweep", ".".join(parts[1:])]
    if parts[:3] == ["sweep", "zip", "gpu"] and len(parts) > 3:     # a zipped GPU field: one key of the group
        return ["sweep", "zip", ".".join(parts[2:])]
    return parts


def parse_value(raw: str, where: str):
    """One command-line value (``--set``, ``--space``) parsed as YAML with the checks of ``loads``
    (YAML 1.2 scalars, no tags, no alias bombs); every failure is one ``ScenarioError`` line
    starting with ``where`` (e.g. ``--set 'M=[1'``: M)."""
    try:
        return loads(raw)
    except yaml.constructor.ConstructorError:
        raise ScenarioError(f"{where}: value {_short(raw)} carries a YAML tag (!!...); a value is a number, "
                            f"a string, true/false or a [list] of them") from None
    except yaml.YAMLError as e:
        raise ScenarioError(f"{where}: value {_short(raw)} is not valid YAML "
                            f"({getattr(e, 'problem', None) or e}); quote strings, write lists as [a,b]") from None
    except InputError as e:
        raise ScenarioError(f"{where}: {e}") from None
    except RecursionError:
        raise ScenarioError(f"{where}: nested too deeply; a value is a number, "
                            f"a string or a short list or mapping") from None


def parse_assignment(a: str, src: str = "--set") -> tuple:
    """``KEY=VALUE`` -> (field path as a list, value parsed as YAML). The one parser of ``--set``."""
    if "=" not in a:
        raise ScenarioError(f"{src} {_short(a)}: expected KEY=VALUE with a dotted field path, "
                            f"e.g. params.head_dim=128 or sweep.seq_len=[512,1024]")
    key, raw = a.split("=", 1)
    parts = key.strip().split(".")
    if not all(parts):
        raise ScenarioError(f"{src} {_short(a)}: empty field path {key.strip()!r}; expected e.g. params.head_dim=128")
    return storage_path(key), parse_value(raw, f"{src} {_short(a)}: {key.strip()}")


def apply_set(data: dict, assignments: list, src: str = "--set") -> dict:
    """Apply ``key=value`` overrides to ``data``, copying only the mappings on each changed path
    (``data`` itself is not modified; nothing else is copied, so shared aliases stay shared)."""
    data = dict(data)
    for a in assignments or []:
        parts, val = parse_assignment(a, src)
        cur = data
        for depth, part in enumerate(parts[:-1]):
            nxt = cur.get(part)
            if nxt is None:
                nxt = {}
            elif not isinstance(nxt, dict):
                raise ScenarioError(f"{src} {a!r}: {'.'.join(parts[:depth + 1])} is {_short(nxt)}, "
                                    f"not a mapping, so it has no field {parts[depth + 1]!r}")
            else:
                nxt = dict(nxt)
            cur[part] = nxt
            cur = nxt
        cur[parts[-1]] = val
    return data
