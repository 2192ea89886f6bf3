"""`azr db upgrade`: bring the buffer store's database to the newest schema (Alembic)."""

from __future__ import annotations

import json
from typing import Annotated, Optional

import typer

from services.settings import Settings, mask_url_password

db_app = typer.Typer(help="Manage the buffer store's database.", no_args_is_help=True)


@db_app.command("upgrade")
def upgrade(
    database_url: Annotated[Optional[str], typer.Option(help="SQLAlchemy URL (default: AZR_DATABASE_URL, "
                                                             "else the profile's).")] = None,
) -> None:
    """Create or migrate the tables to head; prints the URL (password masked) and the revision as JSON."""
    from sqlalchemy.exc import SQLAlchemyError

    from services.store import upgrade_database

    url = database_url or Settings().database_url
    try:
        revision = upgrade_database(url)
    except (SQLAlchemyError, ValueError) as error:
        typer.echo(f"database upgrade failed for {mask_url_password(url)}: {type(error).__name__}: "
                   f"{str(error).splitlines()[0] if str(error) else ''}", err=True)
        raise typer.Exit(1) from error
    typer.echo(json.dumps({"database_url": mask_url_password(url), "revision": revision}))
