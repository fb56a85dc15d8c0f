"""The live web view (`specrun web`): its own process, a client of the service's control
socket like the CLI, serving one page on loopback. It never imports the service."""
