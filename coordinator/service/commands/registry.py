"""Control commands: one handler per request type, registered where it is defined.

    @handles(StatusRequest)
    async def status(deps: HandlerDeps, identity: bytes, req: StatusRequest) -> None: ...

``dispatch`` finds a request's handler by its type. A second handler for the same type,
or a handler whose request parameter names another type, fails at import.
"""

from __future__ import annotations

import inspect
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

from coordinator.service.commands.deps import HandlerDeps
from protocol.wire.control import ControlRequest

# What the registry keeps. The request is ``Any`` here only because each handler takes
# its own request type; ``handles`` checks that it is the type it is registered for.
Handler = Callable[[HandlerDeps, bytes, Any], Awaitable[None]]
H = TypeVar("H", bound=Handler)

HANDLERS: dict[type[ControlRequest], Handler] = {}


def handles(request_type: type[ControlRequest]) -> Callable[[H], H]:
    """Register the decorated function as the handler of ``request_type``."""

    def register(handler: H) -> H:
        existing = HANDLERS.get(request_type)
        if existing is not None:
            raise TypeError(
                f"{request_type.__name__} already has a handler "
                f"({existing.__module__}.{existing.__qualname__})"
            )
        params = list(inspect.signature(handler).parameters.values())
        declared = params[2].annotation if len(params) == 3 else None
        if declared not in (request_type, request_type.__name__):
            raise TypeError(
                f"{handler.__qualname__} is registered for {request_type.__name__} but takes "
                f"{declared!r}"
            )
        HANDLERS[request_type] = handler
        return handler

    return register


async def dispatch(context: HandlerDeps, identity: bytes, request: ControlRequest) -> None:
    handler = HANDLERS.get(type(request))
    if handler is None:  # a request type the protocol has and the service does not serve yet
        raise LookupError(f"no handler for {type(request).__name__}")
    await handler(context, identity, request)
