"""Model instances from the rows of a hand-written statement, converted as a queryset converts them.

The ORM builds and compiles its SQL anew on every call. For the few statements each reading request
runs, that costs several milliseconds of Python, more than the database spends on them. Such a
statement is written once in SQL; `Selected` makes its select list from a model (every concrete
column, under a table alias) and turns the row's slice back into an instance with the ORM's own
database converters and Model.from_db, as a queryset would.
"""

import functools
import uuid

from django.db.backends.base.base import BaseDatabaseWrapper
from django.db.models import Model
from django.db.models.base import ModelState
from django.db.models.fields.related_descriptors import ForeignKeyDeferredAttribute
from django.db.models.query_utils import DeferredAttribute
from django.db.models.signals import post_init, pre_init


class Selected:
    """A model's concrete columns under a table alias, in the select list of a statement."""

    def __init__(self, model: type[Model], alias: str) -> None:
        self.model = model
        self.alias = alias
        self.fields = tuple(model._meta.concrete_fields)
        self.attnames = [field.attname for field in self.fields]
        self._converters: dict[str, list] = {}
        self._columns: dict[str, str] = {}
        self._plain = _made_plainly(model, self.attnames)

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
        model = self.model
        if not self._plain or pre_init.has_listeners(model) or post_init.has_listeners(model):
            return model.from_db(connection.alias, self.attnames, values)
        # What from_db makes of a full row, without Model.__init__'s signals and setattr per field: each
        # value straight into the instance's __dict__, where __init__'s setattr puts it (no column's
        # attribute does more to a new instance).
        instance = model.__new__(model)
        state = instance._state = ModelState()
        state.adding, state.db = False, connection.alias
        instance.__dict__.update(zip(self.attnames, values, strict=True))
        return instance

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


def _made_plainly(model: type[Model], attnames: list[str]) -> bool:
    """Whether from_db's instance of a full row is the model's bare instance with each value in its
    __dict__: the model's own __init__ and from_db, and each column's attribute one of Django's plain
    two (DeferredAttribute sets nothing; ForeignKeyDeferredAttribute only drops a related instance
    cached on the instance, which a new one has not)."""
    return (
        model.__init__ is Model.__init__
        and model.from_db.__func__ is Model.from_db.__func__
        and all(type(getattr(model, name, None)) in _PLAIN_ATTRIBUTES for name in attnames)
    )


_PLAIN_ATTRIBUTES = (DeferredAttribute, ForeignKeyDeferredAttribute)


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


_INSERT = "INSERT INTO {table} ({columns}) VALUES ({values}){returning}"


class Inserted:
    """A model's INSERT, written once: the row a save() of a new instance would write, without the
    query compilation that costs a save 0.3 ms or more of Python on every rating.

    Each value is what the ORM's insert sends (the field's pre_save, then get_db_prep_save: an
    auto_now_add time is set on the instance, JSON dumped, a UUID as the backend stores it). No
    save signals are sent and the model's save() is not called, so it is for models nothing listens
    to and whose save() adds nothing to a new row's (or whose caller does what it adds); and not for a
    field whose value is left to the database (a database default without a Python one, or any
    expression), which the ORM leaves out of the statement or compiles."""

    def __init__(self, model: type[Model]) -> None:
        meta = model._meta
        if any(field.has_db_default() and not field.has_default() for field in meta.local_concrete_fields):
            raise ValueError(f"{meta.label} has a field with only a database default: insert it with the ORM.")
        self.model = model
        self.pk = meta.pk
        self.fields = [field for field in meta.local_concrete_fields if field is not meta.pk]
        self._statements: dict[str, str] = {}

    def insert(self, instance: Model, connection: BaseDatabaseWrapper) -> Model:
        """Insert the new instance's row and set its pk (the database's), as save() would."""
        assert isinstance(instance, self.model) and instance._state.adding and instance.pk is None
        values = [field.pre_save(instance, True) for field in self.fields]
        if any(hasattr(value, "resolve_expression") for value in values):
            raise ValueError(f"{self.model._meta.label}: a value is an expression; insert it with the ORM.")
        values = [field.get_db_prep_save(value, connection) for field, value in zip(self.fields, values, strict=True)]
        with connection.cursor() as cursor:
            cursor.execute(self._statement(connection), values)
            if connection.features.can_return_columns_from_insert:
                (pk,) = cursor.fetchone()
            else:
                pk = connection.ops.last_insert_id(cursor, self.model._meta.db_table, self.pk.column)
        setattr(instance, self.pk.attname, pk)
        instance._state.adding = False
        instance._state.db = connection.alias
        return instance

    def _statement(self, connection: BaseDatabaseWrapper) -> str:
        found = self._statements.get(connection.vendor)
        if found is None:
            quote = connection.ops.quote_name
            columns = ", ".join(quote(field.column) for field in self.fields)
            returning = ""
            if connection.features.can_return_columns_from_insert:
                returning = f" RETURNING {quote(self.pk.column)}"
            found = _INSERT.format(
                table=quote(self.model._meta.db_table),
                columns=columns,
                values=", ".join(["%s"] * len(self.fields)),
                returning=returning,
            )
            self._statements[connection.vendor] = found
        return found


@functools.cache
def _inserted(model: type[Model]) -> Inserted:
    return Inserted(model)


def insert(instance: Model, connection: BaseDatabaseWrapper) -> Model:
    """Insert a new instance's row as its save() would (Inserted says for which models), and return it."""
    return _inserted(type(instance)).insert(instance, connection)


_UPDATE = "UPDATE {table} SET {assignments} WHERE {pk} = %s"


def update_row(model: type[Model], pk, connection: BaseDatabaseWrapper, **values) -> int:
    """UPDATE one row's columns by its pk, each value as the ORM's update sends it (the field's
    get_db_prep_save), without the query compilation; how many rows changed (0 or 1). As
    QuerySet.update, it calls no save() and sends no signal."""
    meta, quote = model._meta, connection.ops.quote_name
    fields = [meta.get_field(name) for name in values]
    statement = _UPDATE.format(
        table=quote(meta.db_table),
        assignments=", ".join(f"{quote(field.column)} = %s" for field in fields),
        pk=quote(meta.pk.column),
    )
    params = [field.get_db_prep_save(values[field.name], connection) for field in fields]
    with connection.cursor() as cursor:
        cursor.execute(statement, [*params, meta.pk.get_db_prep_value(pk, connection)])
        return cursor.rowcount


def as_uuid(value) -> uuid.UUID:
    """A UUID column's value read by hand: PostgreSQL's driver gives a UUID, SQLite its 32 hex digits."""
    return value if isinstance(value, uuid.UUID) else uuid.UUID(value)
