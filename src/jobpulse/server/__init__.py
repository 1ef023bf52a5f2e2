"""The jobpulse HTTP server (ASGI)."""

from .app import add_error_shape, create_app

__all__ = ["add_error_shape", "create_app"]
