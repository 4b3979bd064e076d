"""The einsum-graph file format (``schema/README.md`` is its human description).

- ``files``: reading and writing einsum-graph files, text <-> validated ``Graph``.
- ``codec``: document <-> ``Graph``, with the structural checks; ``encode``: the canonical document;
  ``decoder``: the decoder's issues and typed field reads; ``decode_node``: one node record.
- ``kinds``: the format as a table (fields per record and node kind, the version that added each).
- ``validate``: semantic checks of a ``Graph`` (per node kind), with ``validate_index`` (accesses and
  index bounds) and ``validate_dataflow`` (produced once, before read; roles; cycles).
- ``limits``: bounds on the numbers of a file, and the echo of user content in error lines.
- ``versioning``: format versions and migration; ``kernels``: declared kernels (1.3) and the 1.2 rule.
- ``assumptions``: the ``assumptions`` record (1.3); ``repeat``, ``repeat_codec``: repeat blocks (1.4).
- ``yamltext``: the YAML text layer (safe limited loader, size-limited reads, atomic writes), with
  ``yamlemit`` (the canonical emitter) and ``yamlparse`` (the fast parser of canonical text).
"""
