"""The warm pool of worker processes: the fork server, starting, routing and killing workers."""
