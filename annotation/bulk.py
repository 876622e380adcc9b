"""Writing many rows at once, without a model instance per row."""

from collections.abc import Iterable

from django.db import connection, models


def insert_rows(model: type[models.Model], fields: tuple[str, ...], rows: Iterable[tuple]) -> None:
    """Insert rows of values already prepared for the database (in the order of fields):
    binary COPY on PostgreSQL, executemany elsewhere. Runs in the caller's transaction."""
    quote = connection.ops.quote_name
    table = quote(model._meta.db_table)
    model_fields = [model._meta.get_field(name) for name in fields]
    columns = ", ".join(quote(field.column) for field in model_fields)
    with connection.cursor() as cursor:
        if connection.vendor == "postgresql":
            with cursor.copy(f"COPY {table} ({columns}) FROM STDIN (FORMAT BINARY)") as copy:
                # Binary needs each column's exact type: the one the model gave it ("varchar(64)" -> varchar).
                copy.set_types([field.db_type(connection).split("(")[0] for field in model_fields])
                for row in rows:
                    copy.write_row(row)
        else:
            placeholders = ", ".join(["%s"] * len(fields))
            # The table and columns are the model's own, quoted; the values go as parameters.
            sql = f"INSERT INTO {table} ({columns}) VALUES ({placeholders})"  # noqa: S608
            cursor.executemany(sql, rows)
