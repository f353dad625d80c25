"""The front door and composition root: CLI, settings, HTTP routes, the page."""
