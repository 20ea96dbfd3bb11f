"""The error tree of the embedded API server: one root for every exception it defines.

::

    EmbeddedServerError (Exception)                  root: ``except EmbeddedServerError``
    ├── ServerNotRunningError (RuntimeError,         misuse: used before start() or after stop()
    │                          ValueError)           (_server.py; public in reconciler.embedded)
    ├── KubeconfigError (ValueError)                 refuses a kubeconfig path holding something
    │                                                else than a kubeconfig (_kubeconfig.py; public)
    ├── ApiStatusError                               a request fails: .code, the Status body and
    │                                                headers to answer with (_statuses.py)
    ├── Invalid                                      an object fails validation: 422 with
    │                                                .causes as a real server sends them (_kinds.py)
    ├── TooOld                                       a resourceVersion older than the retained
    │                                                window: 410 Expired (_storage.py)
    ├── ExcessiveAliasingError (ValueError)          a YAML body whose aliases expand too far
    │                                                (CVE-2019-11253): 400 (_encoding.py)
    ├── ClientGoneError (ConnectionResetError)       the client left mid-body: 499, no traceback
    │                                                (_requests.py)
    ├── UnsupportedProtobuf (ValueError)             a body this server cannot decode (_protobuf.py)
    ├── WebhookCallError (ConnectionError)           a conversion or admission webhook could
    │                                                not be called, or answered late, too much
    │                                                or nonsense (_calling.py)
    ├── MustNotBlock                                 a webhook call asked for on the event loop:
    │                                                nothing sent, the request moves to a worker
    │                                                thread (_calling.py, _offloading.py)
    └── StaleWrite                                   what a write read changed while the store's
                                                     lock was released for a webhook call: run
                                                     again, or .conflict (409) (_calling.py)

Only ``ServerNotRunningError`` and ``KubeconfigError`` reach users; the others are raised and caught
inside the server and turned into the HTTP answers a kube-apiserver gives. The classes stay beside
the code that raises them (they are part of each module's protocol); this module holds the root they
share, so a test or a caller can catch anything the server raises with one ``except``. The server's
answers about patches come from ``objectmatcher.PatchError`` (shared with the matcher), not from
here.
"""

from __future__ import annotations

__all__ = ["EmbeddedServerError"]


class EmbeddedServerError(Exception):
    """Root of every exception the embedded API server defines."""
