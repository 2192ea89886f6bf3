"""`azr db upgrade`: bring the buffer store's database to the newest schema (Alembic). A database that cannot be
reached or migrated exits with status 1 (a runtime failure), invalid settings with 2."""

from __future__ import annotations

import json
from typing import Annotated

import typer

from azr.cli.exit_codes import runtime_failure
from azr.cli.settings_options import cli_settings, command_line_values, setting_option
from services.settings import mask_url_password

db_app = typer.Typer(help="Manage the buffer store's database.", no_args_is_help=True)


@db_app.command("upgrade")
def upgrade(
    ctx: typer.Context,
    database_url: Annotated[str | None, setting_option("database_url", "SQLAlchemy URL of the buffer store.")
                            ] = None,
) -> None:
    """Create or migrate the tables to head; prints the URL (password masked) and the revision as JSON."""
    from sqlalchemy.exc import SQLAlchemyError

    from services.store import upgrade_database

    url = cli_settings(**command_line_values(ctx, database_url=database_url)).storage.database_url
    try:
        revision = upgrade_database(url)
    except (SQLAlchemyError, ValueError) as error:
        raise runtime_failure(f"database upgrade failed for {mask_url_password(url)}: {type(error).__name__}: "
                              f"{str(error).splitlines()[0] if str(error) else ''}") from error
    typer.echo(json.dumps({"database_url": mask_url_password(url), "revision": revision}))
