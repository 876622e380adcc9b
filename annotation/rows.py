"""Model instances from the rows of a hand-written statement, converted as a queryset converts them.

The ORM builds and compiles its SQL anew on every call. For the few statements each reading request
runs, that costs several milliseconds of Python, more than the database spends on them. Such a
statement is written once in SQL; `Selected` makes its select list from a model (every concrete
column, under a table alias) and turns the row's slice back into an instance with the ORM's own
database converters and Model.from_db, as a queryset would.
"""

from django.db.backends.base.base import BaseDatabaseWrapper
from django.db.models import Model


class Selected:
    """A model's concrete columns under a table alias, in the select list of a statement."""

    def __init__(self, model: type[Model], alias: str) -> None:
        self.model = model
        self.alias = alias
        self.fields = tuple(model._meta.concrete_fields)
        self.attnames = [field.attname for field in self.fields]
        self._converters: dict[str, list] = {}
        self._columns: dict[str, str] = {}

    def __len__(self) -> int:
        return len(self.fields)

    def table(self, connection: BaseDatabaseWrapper) -> str:
        """The model's table, under its alias, for a FROM or JOIN clause."""
        quote = connection.ops.quote_name
        return f"{quote(self.model._meta.db_table)} {quote(self.alias)}"

    def columns(self, connection: BaseDatabaseWrapper) -> str:
        found = self._columns.get(connection.vendor)
        if found is None:
            quote = connection.ops.quote_name
            found = ", ".join(f"{quote(self.alias)}.{quote(field.column)}" for field in self.fields)
            self._columns[connection.vendor] = found
        return found

    def instance(self, values, connection: BaseDatabaseWrapper) -> Model:
        """The instance a queryset would make of these values, in the order of columns()."""
        values = list(values)
        for position, converters, expression in self._converters_for(connection):
            for convert in converters:
                values[position] = convert(values[position], expression, connection)
        return self.model.from_db(connection.alias, self.attnames, values)

    def _converters_for(self, connection: BaseDatabaseWrapper) -> list:
        # The compiler's own choice (SQLCompiler.get_converters): the backend's, then the field's.
        found = self._converters.get(connection.vendor)
        if found is None:
            found = []
            for position, field in enumerate(self.fields):
                column = field.get_col(self.alias)
                converters = connection.ops.get_db_converters(column) + column.get_db_converters(connection)
                if converters:
                    found.append((position, converters, column))
            self._converters[connection.vendor] = found
        return found


def select_list(connection: BaseDatabaseWrapper, *selected: Selected) -> str:
    return ", ".join(part.columns(connection) for part in selected)


def instances(row, connection: BaseDatabaseWrapper, *selected: Selected) -> list[Model]:
    """One instance per Selected, from a row whose select list is select_list(*selected), then any
    further columns (left to the caller)."""
    made, start = [], 0
    for part in selected:
        made.append(part.instance(row[start : start + len(part)], connection))
        start += len(part)
    return made


def attach(instance: Model, **related: Model) -> None:
    """Set an instance's forward relations to instances made alongside it, as select_related does:
    reading them then costs no query."""
    for name, value in related.items():
        instance._meta.get_field(name).set_cached_value(instance, value)
