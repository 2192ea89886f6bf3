"""`python -m services` is the same as the `azr` console command."""

from services.cli.main import app

if __name__ == "__main__":
    app()
