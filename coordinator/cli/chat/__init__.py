"""``specrun chat``, the interactive chat in a terminal: the prompt loop (``interactive``),
its slash commands, the preview of a suggestion's changes, the recap of a reopened
session and the watch on the service it talks to.

Nothing is imported here: the light CLI path imports a module of it only when the chat
runs."""
