"""
A change to a state document as its owner describes it: small enough to log on every write.

An owner that changes a small part of a big document (the journal gains one entry) tells the
state store what it did: `ports.state.set(name, document, change=[...])`. A store that logs
every write (the game's write-ahead log, `plumbing.state_log`) may record the change instead
of the whole document, and a replay applies the changes, in order, to the document's last
whole value (`apply`). A store that logs nothing ignores the change.

A change is a list of operations on plain data (dicts and lists), each a small tuple made by
the functions below. A path is a tuple of dict keys from the document's top; `()` is the
document itself.

- `assign(path, value)`: the value at `path` becomes `value` (a key is added if need be);
- `append(path, item)` / `extend(path, items)`: items added at the end of the list at `path`;
- `remove(path, values, key=None)`: the items of the list at `path` that are in `values` (or,
  with `key`, whose `item[key]` is) are dropped, the others keep their order;
- `pop(path, index)`: the item at `index` of the list at `path` is dropped;
- `merge(path, key, match, fields)`: the dict items of the list at `path` whose `item[key]`
  is `match` get `fields` (`dict.update`).

The owner's contract: applied to the document as it was before the write, the change gives
the document as it is after it. The operations hold the owner's values, not copies: a store
that keeps a change must serialise it before the owner changes those values again (the log
pickles it at once).
"""

ASSIGN, APPEND, EXTEND, REMOVE, POP, MERGE = "assign", "append", "extend", "remove", "pop", "merge"


class ChangeError(ValueError):
    """A change does not fit the document it is applied to."""


def assign(path, value):
    """The value at `path` becomes `value`."""
    return (ASSIGN, tuple(path), value)


def append(path, item):
    """`item` is added at the end of the list at `path`."""
    return (APPEND, tuple(path), item)


def extend(path, items):
    """`items` are added, in order, at the end of the list at `path`."""
    return (EXTEND, tuple(path), list(items))


def remove(path, values, key=None):
    """The items of the list at `path` in `values` (by `item[key]` when `key` is given) go."""
    return (REMOVE, tuple(path), list(values), key)


def pop(path, index):
    """The item at `index` of the list at `path` is dropped."""
    return (POP, tuple(path), int(index))


def merge(path, key, match, fields):
    """The dict items of the list at `path` whose `item[key]` is `match` get `fields`."""
    return (MERGE, tuple(path), key, match, dict(fields))


def _at(document, path):
    """The value at `path` in `document`."""
    value = document
    for key in path:
        if not isinstance(value, dict) or key not in value:
            raise ChangeError(f"no {key!r} on the way to {path!r}")
        value = value[key]
    return value


def _list_at(document, path):
    value = _at(document, path)
    if not isinstance(value, list):
        raise ChangeError(f"{path!r} is a {type(value).__name__}, not a list")
    return value


def _identity(item, key):
    """What `remove` compares of a list item: the item, or its `key` (None if it has none)."""
    if key is None:
        return item
    return item.get(key) if isinstance(item, dict) else None


def apply(document, change):
    """
    Apply a change to a document, in place.

    Args:
        document (dict or list): The document as it was before the change (changed here).
        change (list): The operations, in order.

    Returns:
        dict or list: The changed document (a new one when an operation assigns `()`).

    Raises:
        ChangeError: When an operation does not fit the document (a missing key, a list
            that is not one, an operation nobody defined).
    """
    for operation in change:
        if not isinstance(operation, tuple) or not operation:
            raise ChangeError(f"not an operation: {operation!r}")
        kind, path = operation[0], operation[1]
        if kind == ASSIGN:
            if not path:
                document = operation[2]
                continue
            parent = _at(document, path[:-1])
            if not isinstance(parent, dict):
                raise ChangeError(f"{path[:-1]!r} is a {type(parent).__name__}, not a dict")
            parent[path[-1]] = operation[2]
        elif kind == APPEND:
            _list_at(document, path).append(operation[2])
        elif kind == EXTEND:
            _list_at(document, path).extend(operation[2])
        elif kind == REMOVE:
            values, key = operation[2], operation[3]
            items = _list_at(document, path)
            try:
                gone = set(values)
                items[:] = [item for item in items if _identity(item, key) not in gone]
            except TypeError:
                raise ChangeError("remove compares hashable values (ids, names)") from None
        elif kind == POP:
            items = _list_at(document, path)
            if not -len(items) <= operation[2] < len(items):
                raise ChangeError(f"no item {operation[2]} in the {len(items)} at {path!r}")
            del items[operation[2]]
        elif kind == MERGE:
            key, match, fields = operation[2], operation[3], operation[4]
            for item in _list_at(document, path):
                if isinstance(item, dict) and item.get(key) == match:
                    item.update(fields)
        else:
            raise ChangeError(f"unknown operation {kind!r}")
    return document
