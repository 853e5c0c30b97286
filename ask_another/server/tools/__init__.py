"""One module per area of tools, each with `register(server)`."""
