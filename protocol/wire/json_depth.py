"""How deeply a JSON text nests, found without recursion.

Tool-call arguments are model text. Decoding them recurses once per ``[`` or ``{``, so
arguments nested 1,200 deep ended a turn with "internal error" (a RecursionError) instead
of a tool error the model could read and correct. No tool takes arguments nested past a
few levels: a text nested deeper than ``MAX_DEPTH`` is refused before it is decoded.
"""

from __future__ import annotations

#: Deeper than any tool's arguments, far below what a decoder recurses through safely.
MAX_DEPTH = 64


def nesting_depth(text: str | bytes, stop_after: int = MAX_DEPTH) -> int:
    """The deepest ``[``/``{`` nesting of ``text`` outside strings, counted up to
    ``stop_after + 1`` (the scan stops there). Linear; malformed text is counted as far as
    it goes (its decoder reports the rest)."""
    data = text.encode("utf-8", "surrogatepass") if isinstance(text, str) else text
    depth = deepest = 0
    in_string = escaped = False
    for byte in data:
        if in_string:
            if escaped:
                escaped = False
            elif byte == 0x5C:  # backslash
                escaped = True
            elif byte == 0x22:  # quote
                in_string = False
        elif byte == 0x22:
            in_string = True
        elif byte in (0x5B, 0x7B):  # [ {
            depth += 1
            if depth > deepest:
                deepest = depth
                if deepest > stop_after:
                    return deepest
        elif byte in (0x5D, 0x7D):
            depth = max(0, depth - 1)
    return deepest


def too_deep(text: str | bytes) -> str | None:
    """The sentence for a text nested past ``MAX_DEPTH``, or None."""
    if nesting_depth(text) > MAX_DEPTH:
        return (f"the arguments nest more than {MAX_DEPTH} levels deep (arrays or objects "
                "inside each other); no tool takes that, send them flat")
    return None
