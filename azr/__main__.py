"""`python -m azr` is the same as the `azr` console command."""

from azr.cli.main import app

if __name__ == "__main__":
    app()
