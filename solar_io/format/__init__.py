"""The einsum-graph file format: decoding and encoding (``codec``), semantic checks (``validate``),
the YAML text layer (``yamltext``), version migration (``versioning``) and file I/O (``files``)."""
