"""The Linux calls Python's ``os`` module does not offer, made through the C library
(design §2: the lowest package, importing no other project package)."""
