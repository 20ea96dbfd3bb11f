"""The informer caches: list+watch informers and their pool, the child informers, the declared
inputs, the indexed store, label selectors, the cache reader, the own-write recorder.

Modules: ``informers`` (``Informer``, ``WatchOptions``), ``pool`` (``InformerPool``: informers by
scope, reference-counted, started on use and stopped unused, shared by the child informers and the
declared inputs), ``children`` (``InformerManager``: one informer per child kind, by parent;
``Caches``), ``inputs`` (``InputWatch``: declared inputs resolved from the pool's informers, the
index input -> parents, precise triggers; the sources ``optk plan`` and ``optk manifests`` read
inputs from), ``stores`` (``IndexedCache``:
tombstones and the stream's high-water mark, so nothing deleted comes back), ``selectors``
(``LabelSelector``), ``readers`` (``InformerReader``, the reconcile's ``ReadCache``), ``listed``
(``ListedReader``: a ``ReadCache`` over one LIST per kind, the fleet plan's snapshot),
``recording`` (``RecordingClient``: own writes and their echoes), ``remote``
(``RemoteCaches``: the placed children's informers per (cluster, kind), issue 41).

Private: the public names are re-exported by ``reconciler`` and its public
modules.
"""
