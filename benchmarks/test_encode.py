"""encode_zodb_record (values -> record bytes) of each dataset's decoded records, pickle and both twins."""


def test_encode(time_each, twin, records):
    # Each contender encodes what it decoded itself (pickle: the loaded objects).
    decoded = [twin.decode_zodb_record(data) for data in records]
    time_each(twin.encode_zodb_record, decoded)
