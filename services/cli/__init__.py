"""The `azr` command line."""
