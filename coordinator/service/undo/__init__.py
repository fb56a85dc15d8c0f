"""Undo: checkpoints of the files each accept and main-chat turn writes, kept in specrun's
state directory, and ``specrun undo`` taking them back (docs/cli.md#undo)."""
