# cython: language_level=3
# The text of the datetime markers (docs/format.md, "Known types") from pickled fields, inline: the Cython
# decoder's known types (_decode_cython.pyx) and the store path's direct lane (_pickletext_cython.pyx) write
# them alike.  Buffers: 40 bytes for a datetime, 16 for a date, 32 for an offset.  And the checks of
# "Values that exist" that C makes (_known's rules decide the rest), for the Cython encoder too.

from libc.stdint cimport int64_t


cdef inline int zero_padded(char* out, int64_t value, int width) noexcept nogil:
    """Decimal digits of value >= 0, zero-padded to width (printf's %0*d); how many were written."""
    cdef int n = 1, i
    cdef int64_t rest = value
    while rest >= 10:
        rest //= 10
        n += 1
    if n < width:
        n = width
    rest = value
    for i in range(n - 1, -1, -1):
        out[i] = <char>(48 + rest % 10)
        rest //= 10
    return n


cdef inline int date_text(char* out, int year, int month, int day) noexcept nogil:
    """YYYY-MM-DD (a longer year as Python's {:04d} writes it)."""
    cdef int n = zero_padded(out, year, 4)
    out[n] = 45  # -
    n += 1 + zero_padded(out + n + 1, month, 2)
    out[n] = 45
    n += 1 + zero_padded(out + n + 1, day, 2)
    return n


cdef inline bint day_exists(long y, long m, long d) noexcept nogil:
    """Is d a day of month m (1-12) of year y?  _known.month_days."""
    if m == 2:
        return 1 <= d <= 28 or (d == 29 and y % 4 == 0 and (y % 100 != 0 or y % 400 == 0))
    return 1 <= d <= 30 + ((m + (m >> 3)) & 1)  # 31 in January, March, May, July, August, October, December


cdef inline bint date_exists(long y, long m, long d) noexcept nogil:
    """_known.date_exists: year 1-9999, month 1-12, a day of that month."""
    return 1 <= y <= 9999 and 1 <= m <= 12 and day_exists(y, m, d)


cdef inline Py_ssize_t _after_digits(const unsigned char* p, Py_ssize_t i, Py_ssize_t n) noexcept nogil:
    while i < n and <unsigned char>(p[i] - 48) < 10:
        i += 1
    return i


cdef inline bint _word(const unsigned char* p, Py_ssize_t n, const char* word) noexcept nogil:
    """Is p[0:n] the lower-case ASCII word, in any case?  (b | 32 lowers a letter and makes no other byte one.)"""
    cdef Py_ssize_t k = 0
    while k < n and word[k] and p[k] | 32 == <unsigned char>word[k]:
        k += 1
    return k == n and not word[k]


cdef inline bint decimal_text(const unsigned char* p, Py_ssize_t n) noexcept nogil:
    """Is p[0:n] a number decimal.Decimal reads whatever its context: a sign or none, then digits with at most
    one "." (at least one digit) and an exponent of at most 9 digits or none, or Inf, Infinity, NaN or sNaN
    (any case, NaN's digits after)?  Others (spaces, _, long exponents...) _known.decimal_reads decides."""
    cdef Py_ssize_t i = 1 if n and (p[0] == 43 or p[0] == 45) else 0, j, k, digits
    if i < n and p[i] | 32 in (105, 110, 115):  # i, n, s
        k = 3 if p[i] | 32 == 110 else 4
        return _word(p + i, n - i, b"inf") or _word(p + i, n - i, b"infinity") or (
            n - i >= k and _word(p + i, k, b"nan" if k == 3 else b"snan") and _after_digits(p, i + k, n) == n)
    j = _after_digits(p, i, n)
    k = _after_digits(p, j + 1, n) if j < n and p[j] == 46 else j  # 46: "."
    digits = (j - i) + (k - j - 1 if k > j else 0)
    if k < n and p[k] | 32 == 101:  # an exponent: e, a sign or none, digits
        j = k + 2 if k + 1 < n and (p[k + 1] == 43 or p[k + 1] == 45) else k + 1
        k = _after_digits(p, j, n)
        if k == j or k - j > 9:
            return False
    return k == n and digits > 0


cdef inline int date_state_text(char* out, const unsigned char* raw) noexcept nogil:
    """The text of a date's 4-byte pickled state; -1 for a date that does not exist (no @date then)."""
    cdef int year = raw[0] << 8 | raw[1], month = raw[2], day = raw[3]
    if not date_exists(year, month, day):
        return -1
    return date_text(out, year, month, day)


cdef inline int datetime_state_text(char* out, const unsigned char* raw) noexcept nogil:
    """YYYY-MM-DDTHH:MM:SS[.ffffff] of a datetime's 10-byte pickled state; -1 for one that does not exist,
    or the protocol 4 fold bit (month >= 128): the raw bytes are kept then."""
    cdef int year = raw[0] << 8 | raw[1]
    cdef int month = raw[2], day = raw[3], hour = raw[4], minute = raw[5], second = raw[6]
    cdef int us = raw[7] << 16 | raw[8] << 8 | raw[9]
    cdef int length
    if not (date_exists(year, month, day) and hour < 24 and minute < 60 and second < 60 and us < 1000000):
        return -1
    length = date_text(out, year, month, day)
    out[length] = 84  # T
    length += 1 + zero_padded(out + length + 1, hour, 2)
    out[length] = 58  # :
    length += 1 + zero_padded(out + length + 1, minute, 2)
    out[length] = 58
    length += 1 + zero_padded(out + length + 1, second, 2)
    if us:
        out[length] = 46  # .
        length += 1 + zero_padded(out + length + 1, us, 6)
    return length


cdef inline bint offset_field(int64_t x) noexcept nogil:
    """A timedelta field the offset text takes (others go to _decode_known)."""
    return -1000000 < x < 1000000000


cdef inline int offset_text(char* out, int64_t days, int64_t seconds, int64_t microseconds) noexcept nogil:
    """"+HH:MM[:SS[.ffffff]]" of timezone(timedelta(days, seconds, microseconds)), fields offset_field;
    -1 when it is not a valid datetime.timezone (24 hours or more)."""
    cdef int64_t total
    if days < -100000 or days > 100000:
        # 24 hours or more whatever the other fields (each under 10**9): and days * 86400 * 10**6 would
        # overflow 64 bits from about 106,751 days on.
        return -1
    total = (days * 86400 + seconds) * 1000000 + microseconds
    cdef int64_t a = -total if total < 0 else total
    cdef int64_t secs = a // 1000000, us = a % 1000000
    cdef int64_t hours = secs // 3600, rest = secs % 3600
    cdef int64_t minutes = rest // 60
    cdef int n
    secs = rest % 60
    if hours >= 24:
        return -1
    out[0] = 43 if total >= 0 else 45  # + or -
    n = 1 + zero_padded(out + 1, hours, 2)
    out[n] = 58  # :
    n += 1 + zero_padded(out + n + 1, minutes, 2)
    if secs or us:
        out[n] = 58
        n += 1 + zero_padded(out + n + 1, secs, 2)
    if us:
        out[n] = 46  # .
        n += 1 + zero_padded(out + n + 1, us, 6)
    return n
