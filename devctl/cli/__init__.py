"""The typer CLI: one module per command group; a command resolves, collects, analyses, renders."""
