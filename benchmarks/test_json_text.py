"""The PostgreSQL paths over each dataset, pickle and both twins: JSON text, and the dict form."""


def test_pg_json(time_each, twin, records):
    """decode_zodb_record_for_pg_json; pickle's counterpart is loads + json.dumps(default=repr)."""
    time_each(twin.decode_zodb_record_for_pg_json, records)


def test_pg_dict(time_each, twin, records):
    """decode_zodb_record_for_pg; pickle's counterpart is loads alone."""
    time_each(twin.decode_zodb_record_for_pg, records)
