"""``public_api``: the wrapper ``vramlib/__init__.py`` applies to every exported function, so that no call reaches a
Python traceback through its arguments' shape or types (unknown keywords, wrong arity, text or NaN where a number
belongs: one line naming the field). It sits above ``errors`` and ``units`` (a size typed where an int belongs is
answered with ``parse_memory``'s reading). Used in: every chapter, through the package's exports.
"""
from __future__ import annotations

from .errors import InvalidValueError, check_number, checked_call

_SIMPLE_TYPES = {"int", "float", "bool", "str", "None", "Fraction", "ModelSpec", "GPU", "Precision", "ParallelPlan",
                 "Hardware", "Breakdown"}


def _annotation_atoms(annotation: object) -> set[str] | None:
    """``'int | None'`` -> {'int', 'None'}; None when the annotation is not a union of simple names."""
    if not isinstance(annotation, str):
        return None
    atoms = {a.strip() for a in annotation.split("|")}
    return atoms if atoms <= _SIMPLE_TYPES else None


def _check_annotated(field: str, value: object, atoms: set[str]) -> object:
    """Check one argument against the simple union type its annotation names; raise naming ``field``."""
    import numbers
    from fractions import Fraction

    if value is None:
        if "None" in atoms:
            return value
        raise InvalidValueError(field, value, "a value is required here")
    if "str" in atoms and isinstance(value, str):
        return value
    classes = {type(value).__name__, *(c.__name__ for c in type(value).__mro__)}
    if classes & (atoms - {"int", "float", "bool", "str", "None", "Fraction"}):
        return value
    if "str" in atoms and type(value).__module__.startswith("vramlib"):
        return value  # a catalogue object (Precision, GPU, ModelSpec) where its name is expected: the function decides
    if "bool" in atoms and (isinstance(value, bool) or type(value).__name__ == "bool_"):
        return bool(value)
    if "float" in atoms or "Fraction" in atoms:
        if isinstance(value, (numbers.Real, Fraction)) and not isinstance(value, bool):
            return check_number(field, value)
    if "int" in atoms and isinstance(value, numbers.Real) and not isinstance(value, bool):
        return check_number(field, value, integer=True, allowed="must be a whole number")
    wanted = sorted(atoms - {"None"})
    if {"ModelSpec", "GPU", "Precision"} & atoms:
        wanted = [w for w in wanted if w != "str"]
    if isinstance(value, str) and "int" in atoms:
        try:
            from .units import parse_memory

            n = parse_memory(value)
            raise InvalidValueError(field, value, f"must be a whole number; for a size in bytes write "
                                    f"parse_memory({value!r}) = {n:,}")
        except InvalidValueError as e:
            if "parse_memory(" in str(e):
                raise
    names = {"int": "a whole number", "float": "a number", "bool": "True or False", "str": "a name (text)",
             "ModelSpec": "a catalogue model name or a ModelSpec", "GPU": "a GPU name or a GPU",
             "Fraction": "a number", "Precision": "a precision name", "ParallelPlan": "a ParallelPlan",
             "Hardware": "a hardware string such as '2x80GB'", "Breakdown": "a Breakdown"}
    raise InvalidValueError(field, value, "must be " + " or ".join(dict.fromkeys(names[w] for w in wanted)))


def public_api(fn):
    """Wrap a public function so that no call reaches a Python traceback through its arguments' shape or types:
    unknown keywords and wrong arity are one-line errors with close matches (as :func:`vramlib.core.errors.checked_call`), and every
    argument whose annotation is a union of simple types (``int``, ``float``, ``bool``, ``str``, ``None``,
    ``ModelSpec``, ``GPU`` ...) is checked against it (no strings where numbers belong, no NaN or infinity, no
    ``"false"`` for a flag). Ranges stay the function's own business; a function marked ``validates_itself = True``
    (parse_memory, whose messages name the caller's field) gets the shape check only. ``vramlib/__init__.py`` applies it to every
    function it exports."""
    import functools
    import inspect

    if getattr(fn, "__vramlib_public__", False):
        return fn
    sig = inspect.signature(fn)
    checks = {} if getattr(fn, "validates_itself", False) else {
        name: atoms for name, p in sig.parameters.items() if (atoms := _annotation_atoms(p.annotation)) is not None}
    bound_check = checked_call(fn)
    kinds = inspect.Parameter
    positional = [n for n, p in sig.parameters.items() if p.kind in (kinds.POSITIONAL_ONLY, kinds.POSITIONAL_OR_KEYWORD)]
    var_positional = any(p.kind is kinds.VAR_POSITIONAL for p in sig.parameters.values())
    none_default = {n for n, p in sig.parameters.items() if p.default is None}
    plain = {name: tuple(t for t, atom in ((int, "int"), (str, "str")) if atom in atoms) for name, atoms in checks.items()}

    def check(name, value):
        if name in checks and type(value) not in plain[name] and not (value is None and name in none_default):
            _check_annotated(name, value, checks[name])

    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        if len(args) > len(positional) and not var_positional:
            return bound_check(*args, **kwargs)  # raises the one-line error
        for name, value in zip(positional, args):
            check(name, value)
        for name, value in kwargs.items():
            check(name, value)
        return bound_check(*args, **kwargs)  # a call that does not bind is a one-line error there

    wrapper.__signature__ = sig
    wrapper.__vramlib_public__ = True
    return wrapper
