"""The ``specrun`` command line: the client side of the coordinator.

``main`` runs a light command (``light.py``: status, suggestion, accept, ...) without
click when the command line is plainly one of theirs; everything else goes through the
click group (``app.py``), which imports a command's module when it runs. The commands
are found by name, never listed by hand:

    ../commands/           the control commands, each declared once (options, help,
                           request and reply, client half and server half)
    declared.py            a declared command made into a click command
    client_side.py         what a declared command's client half is handed; runs it
    light.py               the light command lines, run without click
    local/                 the command line's own commands, one module each: start,
                           stop, logs, chat, serve (the only module here that imports
                           the service side), web, demo, memory, config, model,
                           explain-shell, sandbox
    command_table.py       docs/cli.md's command tables, made from the commands
    turns.py               one turn streamed: events shown, approvals answered, Ctrl-C
    approval.py            the approval question and its prompt
    chat/                  the chat REPL (interactive.py: prompt_toolkit, ghost text),
                           its slash commands, preview, recap and service watch
    render.py              how replies look (rich, imported on first drawing) and JSON
    client.py              the control socket client; daemon.py starts and stops the
                           service; service_start.py starts it for a command
    context.py, errors.py, options.py   what commands share

Importing this package imports nothing else: every module below imports it first.
"""

from __future__ import annotations


def main() -> None:
    """The ``specrun`` console script."""
    import signal
    import sys

    signal.signal(signal.SIGPIPE, signal.SIG_DFL)
    from coordinator.cli.light import light_call, run_light

    call = light_call(sys.argv[1:])
    if call is not None:
        run_light(call)
    from coordinator.cli.app import cli

    cli(prog_name="specrun")
