"""Frontend-independent parts of capture: graph builder, validation flow, folder capture."""
