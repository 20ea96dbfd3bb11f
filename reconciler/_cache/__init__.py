"""The informer caches: list+watch informers, the indexed store, label selectors, the cache reader,
the own-write recorder.

Modules: ``informers`` (``Informer``, ``InformerManager``), ``stores`` (``IndexedCache``:
tombstones and the stream's high-water mark, so nothing deleted comes back), ``selectors``
(``LabelSelector``), ``readers`` (``InformerReader``, the reconcile's ``ReadCache``), ``listed``
(``ListedReader``: a ``ReadCache`` over one LIST per kind, the fleet plan's snapshot),
``recording`` (``RecordingClient``: own writes and their echoes).

Private: the public names are re-exported by ``reconciler`` and its public
modules.
"""
