"""Human and JSON-lines explanations of shell verdicts (backs ``specrun explain-shell``)."""

from __future__ import annotations

from collections.abc import Iterable, Iterator

import msgspec

from protocol.text.inert_text import inert, inert_json
from worker.shell.classifier import ShellVerdict, classify

_encoder = msgspec.json.Encoder()
_decoder = msgspec.json.Decoder(str)


def explain_text(command: str) -> str:
    """Verdict and deciding rule for ``command``, as a few lines of plain text."""
    verdict = classify(command)
    return _render(command, verdict)


explain = explain_text


def _render(command: str, verdict: ShellVerdict) -> str:
    head = "read-only" if verdict.read_only else "NOT read-only"
    lines = [f"{head}: {command!r}", f"  rule: {verdict.reason}"]
    if verdict.commands:
        lines.append(f"  commands: {' '.join(verdict.commands)}")
    if not verdict.read_only:
        lines.append("  a speculation stops at this command (boundary); the main chat asks first")
    return "\n".join(lines)


def batch(lines: Iterable[str | bytes]) -> Iterator[str]:
    """One JSON object per input line.

    Each input line is a JSON string holding one command; each output line is
    ``{"command": ..., "read_only": ..., "reason": ...}``. A line that is not a JSON string
    yields ``{"command": null, "read_only": false, "reason": "bad-input: ..."}``. Blank lines
    are skipped.
    """
    for line in lines:
        text = line.strip()
        if not text:
            continue
        try:
            command = _decoder.decode(text)
        except (msgspec.DecodeError, msgspec.ValidationError) as exc:
            message = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
            yield _encoder.encode(
                {"command": None, "read_only": False, "reason": f"bad-input: {message}"}
            ).decode()
            continue
        verdict = classify(command)
        yield _encoder.encode(
            {"command": command, "read_only": verdict.read_only, "reason": verdict.reason}
        ).decode()


def main(argv: list[str] | None = None) -> int:
    """``python -m worker.shell.explain CMD`` or ``--batch`` (JSON lines on stdin).

    Exit status for one command: 0 read-only, 1 not read-only, 2 usage error. ``--batch``
    exits 0 once all lines are answered.
    """
    import sys

    args = sys.argv[1:] if argv is None else argv
    if args == ["--batch"]:
        for out in batch(sys.stdin):
            sys.stdout.write(inert_json(out) + "\n")  # the same JSON, safe on a terminal
        sys.stdout.flush()
        return 0
    if len(args) != 1:
        sys.stderr.write("usage: python -m worker.shell.explain COMMAND | --batch\n")
        return 2
    sys.stdout.write(inert(explain_text(args[0])) + "\n")  # the rule may quote the command
    return 0 if classify(args[0]).read_only else 1


if __name__ == "__main__":
    raise SystemExit(main())
