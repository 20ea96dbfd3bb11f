"""The templates of ``optk new`` (``reconciler._commands.new``): package data, no code.

One ``*.tmpl`` file per file of a new project; ``{{placeholder}}`` fields are filled in by
``render_project``. A package (not a bare folder) so that setuptools ships them as its data.
"""
