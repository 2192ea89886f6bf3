"""Reports on a finished (or running) self-play run: its metrics file read into series, and figures of them."""
