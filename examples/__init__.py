"""Example operators built on operator-toolkit, kept in the repository as a user's own code.

Not an installed package: run them from the repository root (``python -m examples.thanos.demo``,
``PYTHONPATH=. optk run examples.thanos.operator:operator``, since the ``optk`` script does not
put the working directory on ``sys.path``).
"""
