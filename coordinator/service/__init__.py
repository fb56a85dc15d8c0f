"""The service side: one process per project (``specrun serve``), owning the control
socket, the worker pool, the main chat and the speculations. Nothing here imports the
client side (``coordinator.cli``)."""
