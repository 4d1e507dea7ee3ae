"""decode_zodb_record (record bytes -> class and state values) over each dataset, pickle and both twins."""


def test_decode(time_each, twin, records):
    time_each(twin.decode_zodb_record, records)
