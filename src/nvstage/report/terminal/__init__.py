"""What the commands print on a terminal: rich tables and lines, one module per command.
Plain text when the console has no colour (pipes, tests, ``NO_COLOR``)."""
