"""The ``specrun`` command line: the client side of the coordinator.

``main`` runs a light command (``light.py``: status, suggestion, accept, ...) without
click when the command line is plainly one of theirs; everything else goes through the
click group (``app.py``), which imports a command's family module when it runs:

    app.py                 the click group; command -> family module, imported on use
    light.py               the light command lines, run without click
    service_requests.py    bodies of the commands that are one request to the service
    service_cmds.py        start, stop, status, workers, logs, debug kill-worker
    serve.py               serve (the only module here that imports the service side)
    chat_cmds.py           ask, chat, reset, compact
    speculation_cmds.py    suggestion, accept, reject, stats
    memory_cmds.py         memory list/show/add
    config_cmds.py         config show/set
    sandbox_cmds.py        explain-shell, sandbox
    model_cmds.py          model serve (the embedded scripted model)
    demo_cmd.py            demo (the session itself: demo/run.py)
    turns.py               one turn streamed: events shown, approvals answered, Ctrl-C
    approval.py            the approval question and its prompt
    interactive.py         the chat REPL (prompt_toolkit, ghost text)
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
