"""Declared inputs: what builders read besides their parent (docs/builders.md, "Declared inputs").

``builders.Inputs`` (on the facade) is the read-only value ``build(parent, inputs)`` receives when
an ``Operator`` declares ``inputs=``; here are the rest: ``SelectorRef`` (the inputs a label
selector matches, ``Inputs.selected``), ``ClusterSelector`` and ``Cluster`` (the clusters
children may be placed in, selected by label, ``Inputs.clusters``), the errors
``Inputs.require`` raises (the parent's conditions name the reference with reason
``InputMissing``/``InputForbidden``), "is this kind served" as an input (``kind_served``,
answered by ``Inputs.established``), the ``checksum/config`` helpers that stamp a digest of
chosen inputs into a pod template (``optk.dev/inputs-digest``), and the type of a declaration.
This public module only re-exports.
"""

from __future__ import annotations

from builders._errors import InputForbiddenError, InputMissingError, InputUnavailableError
from builders._inputs import (
    INPUTS_DIGEST_ANNOTATION,
    Cluster,
    ClusterSelector,
    InputDeclaration,
    InputRef,
    Inputs,
    SelectorRef,
    inputs_digest,
    kind_served,
    with_inputs_digest,
)

__all__ = [
    "INPUTS_DIGEST_ANNOTATION",
    "Cluster",
    "ClusterSelector",
    "InputDeclaration",
    "InputForbiddenError",
    "InputMissingError",
    "InputRef",
    "InputUnavailableError",
    "Inputs",
    "SelectorRef",
    "inputs_digest",
    "kind_served",
    "with_inputs_digest",
]
