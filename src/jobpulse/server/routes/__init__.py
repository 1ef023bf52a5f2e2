"""The native API's routes, one module per concept, all under ``/jp/v1``."""
