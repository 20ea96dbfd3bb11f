"""Official Kubernetes client models (``V1Deployment``, ...) as JSON-shaped dicts.

Builders may return client models; they are converted by walking the models'
``openapi_types``/``attribute_map`` as the client's serializer does, without importing
``kubernetes``. This public module only re-exports; see ``docs/builders.md``.
"""

from __future__ import annotations

from builders._convert import is_client_model, to_plain, to_plain_object

__all__ = [
    "is_client_model",
    "to_plain",
    "to_plain_object",
]
