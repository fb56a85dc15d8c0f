"""The kernel calls the overlay needs: the C library handle, openat2 below a root, fd helpers."""
