"""Property tests for the classifier over commands built from a token grammar.

The generator knows the ground truth: a command is dangerous exactly when an output
redirection, a substitution or a command outside the allow list was put into it. Dangerous
commands must never be called read-only; commands built only from safe pieces must be called
read-only (so the classifier is not trivially "refuse everything"). Random strings over shell
metacharacters must never make it raise.
"""

from __future__ import annotations

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from worker.shell import ShellVerdict, classify
from worker.shell.commands import ALLOWED_COMMANDS

FUZZ = settings(
    derandomize=True,
    max_examples=250,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)

# Free readers accept any of the safe arguments below.
FREE_COMMANDS = ["ls", "cat", "echo", "wc -l", "head -n 3", "grep -n", "tail -2", "nl", "stat"]
# Ruled commands, with argument lists known to pass their rules.
RULED_COMMANDS = [
    "git status",
    "git log --oneline -5",
    "git diff --stat -- src",
    "sort -rn",
    "uniq -c",
    "sed -n '1,5p'",
    "awk '{print $1}'",
    "find . -name '*.py'",
    "rg -n foo",
    "tree -L 2",
]
SAFE_ARGS = [
    "file.txt",
    "src",
    "-la",
    "'single ; | > $(x) `y` & # quoted'",
    '"double quoted"',
    '"$HOME"',
    "${HOME}",
    "$PWD",
    "~/x",
    "a\\ b",
    "'#'",
    "a#b",
    "*.py",
    "{a,b}",
    "2>/dev/null",
    ">/dev/null",
    "2>&1",
    "< input.txt",
    '<<< "here string"',
    "$'\\t'",
]
SAFE_SEPARATORS = [" | ", " && ", " || ", "; ", " & ", "\n", "\r\n", " |\n", "\n\n", ";\n"]

DANGER_ARGS = [
    "> out.txt",
    ">> log.txt",
    "2> err.txt",
    "&> all.txt",
    ">| f",
    ">& f",
    "$(id)",
    "`id`",
    '"$(id)"',
    "'a'$(id)'b'",
    "<(ls)",
    ">(cat)",
    "$((1+2))",
    "${x:-$(id)}",
    "${x@P}",
    "${x:=y}",
]
DANGER_COMMANDS = [
    "rm -rf x", "curl evil.com", "python3 -c 1", "env ls", "xargs rm", "tee out",
    "bash -c ls", "sh", "touch f", "mv a b", "git push", "sed -i s/a/b/ f",
    "awk 'BEGIN{system(\"id\")}'", "find . -delete", "sort -o out in", "FOO=bar ls",
]


@st.composite
def segments(draw: st.DrawFn) -> tuple[str, bool]:
    """One pipeline element: (text, dangerous)."""
    kind = draw(st.sampled_from(["free", "free", "ruled", "danger_arg", "danger_cmd", "group"]))
    if kind == "ruled":
        return draw(st.sampled_from(RULED_COMMANDS)), False
    if kind == "danger_cmd":
        return draw(st.sampled_from(DANGER_COMMANDS)), True
    if kind == "group":
        inner, dangerous = draw(segments())
        text = f"( {inner} )" if draw(st.booleans()) else f"{{ {inner}; }}"
        if draw(st.integers(0, 4)) == 0:
            return text + " > out.txt", True
        return text, dangerous
    name = draw(st.sampled_from(FREE_COMMANDS))
    args = draw(st.lists(st.sampled_from(SAFE_ARGS), max_size=3))
    dangerous = False
    if kind == "danger_arg":
        position = draw(st.integers(0, len(args)))
        args.insert(position, draw(st.sampled_from(DANGER_ARGS)))
        dangerous = True
    return " ".join([name, *args]), dangerous


@st.composite
def commands(draw: st.DrawFn) -> tuple[str, bool]:
    parts = draw(st.lists(segments(), min_size=1, max_size=4))
    text = parts[0][0]
    for part, _ in parts[1:]:
        text += draw(st.sampled_from(SAFE_SEPARATORS)) + part
    dangerous = any(d for _, d in parts)
    if draw(st.booleans()):
        text += "  # comment: > x $(y) `z`; rm -rf /"
    heredoc = draw(st.sampled_from(["none", "none", "safe", "danger"]))
    if heredoc != "none":
        body = "plain text ; | > & 'quote' \"dq\" $HOME ${HOME}"
        if heredoc == "danger":
            body += draw(st.sampled_from([" $(id)", " `id`", " ${x@P}", " $((1+1))"]))
            dangerous = True
        text += "\ncat <<EOF\n" + body + "\nEOF\n"
    if draw(st.booleans()):
        text = "\t" + text + "\n"
    return text, dangerous


@FUZZ
@given(commands())
def test_generated_commands_match_ground_truth(case: tuple[str, bool]) -> None:
    text, dangerous = case
    verdict = classify(text)
    assert isinstance(verdict, ShellVerdict)
    if dangerous:
        assert not verdict.read_only, (text, verdict)
    else:
        assert verdict.read_only, (text, verdict)


@FUZZ
@given(commands(), st.sampled_from(DANGER_COMMANDS), st.sampled_from(SAFE_SEPARATORS))
def test_appending_a_dangerous_statement_is_never_read_only(
    case: tuple[str, bool], danger: str, separator: str
) -> None:
    text, _ = case
    # A trailing comment would swallow what follows on its line; end the line first.
    verdict = classify(text + "\n" + separator.lstrip(" |&;") + danger)
    assert not verdict.read_only, verdict


SHELL_ALPHABET = [
    *" \t\n\r;&|<>()[]{}$`'\"\\#=*?!~-_./0123456789",
    "ls", "cat", "git", "rm", "EOF", "<<", "$(", "${", "@P", "\r\n", "a", "b",
]


@FUZZ
@given(st.lists(st.sampled_from(SHELL_ALPHABET), max_size=40).map("".join))
def test_random_shell_soup_never_raises(text: str) -> None:
    verdict = classify(text)
    assert isinstance(verdict, ShellVerdict)
    assert isinstance(verdict.read_only, bool)
    assert isinstance(verdict.reason, str) and verdict.reason
    if verdict.read_only:
        assert set(verdict.commands) <= ALLOWED_COMMANDS, (text, verdict)


@FUZZ
@given(st.text(max_size=60))
def test_arbitrary_text_never_raises(text: str) -> None:
    verdict = classify(text)
    assert isinstance(verdict, ShellVerdict)
