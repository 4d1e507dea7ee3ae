# cython: language_level=3, embedsignature=True
# cython: boundscheck=False, wraparound=False, cdivision=True
"""The store path's direct lane: a record's state pickle straight to PostgreSQL JSON text.

``decode_zodb_record_for_pg_json`` (Cython twin) tries this first.  The state pickle is read into C nodes
(text and bytes stay in the pickle, as offsets) and written as JSON text from them, with the GIL released
for records of 4 KB and more.  It takes plain values, ZODB's references, BTree states, the known types the
decoder recognises in C and objects made by NEWOBJ without arguments then BUILD; anything else (a key
starting with ``@`` or repeated, a float that needs ``@f``, a shared dict or list, another call, deep
nesting, an error) makes it decline (None), and the decoder reads the record.  The Python twin's output is
the definition (``tests/test_direct_lane.py``).
"""

from cpython.bytes cimport PyBytes_AS_STRING, PyBytes_GET_SIZE
from cpython.pyport cimport PY_SSIZE_T_MAX
from libc.math cimport isinf, isnan, signbit
from libc.stdint cimport int64_t, uint64_t
from libc.stdlib cimport free, malloc, realloc
from libc.string cimport memchr, memcmp, memcpy, memset, strlen

from ._classnames cimport BTREE_IS_MAP, BTREE_IS_TREE
from ._datetext cimport date_state_text, datetime_state_text, decimal_text, offset_field, offset_text
from ._jsontext_cython cimport (INLINE_CAPACITY, Buffer, _digits_before, _escape_utf8, _put, _put_char, _reserve,
                                _text, _write_float)
from ._opcodes cimport Opcode as Op
from ._primitives cimport ZJC_B64_LENGTH, zjc_b64_encode, zjc_hex_encode, zjc_utf8_prefix
from ._pickletext_cython cimport ClassPickle

from ._common import C_WALK_DEPTH


cdef enum Kind:
    K_TEXT
    K_BYTES
    K_INT
    K_FLOAT
    K_TRUE
    K_FALSE
    K_NULL
    K_CLASS   # GLOBAL: written only as the class of a reference
    K_REF     # BINPERSID of (oid, class) or (oid, None)
    K_CALL    # REDUCE of a class: written only as a known type's marker
    K_BIGINT  # LONG1 of 9 to 17 bytes: written only as a UUID's int
    K_DICT    # children: key, value, key, value...; this kind and the ones below are not fetched from
    K_LIST    # the memo (the decoder decides what sharing them means)
    K_TUPLE
    K_NEW     # NEWOBJ of a class, then BUILD: {"@cls": [module, name], "@s": state}, or a UUID


cdef struct Node:
    Kind kind
    Py_ssize_t start      # K_TEXT, K_BYTES, K_BIGINT: offset in the pickle; K_CLASS: the module's; K_REF:
                          # the 8-byte oid's; containers, K_CALL, K_NEW: first child, or -1
    Py_ssize_t size       # K_TEXT, K_BYTES, K_BIGINT, K_CLASS: bytes (of the module); containers, K_CALL,
                          # K_NEW: children (a call's are its arguments)
    Py_ssize_t last       # containers: last child
    Py_ssize_t next       # next sibling, or -1
    int64_t integer
    double number
    Py_ssize_t name_start  # K_CLASS: the name's offset and size
    Py_ssize_t name_size
    Py_ssize_t klass      # K_REF: its K_CLASS node, or -1 for None; K_CALL, K_NEW: the class called
    Py_ssize_t state      # K_NEW: what BUILD gave it, or -1


# Deeper states take the usual way (its limit is 1000): no deep C recursion here (_common.C_WALK_DEPTH).
cdef Py_ssize_t MAX_LANE_DEPTH = C_WALK_DEPTH

cdef enum:
    INLINE_NODES = 64
    INLINE_SLOTS = 64        # stack, marks and memo entries
    MAX_MEMO_INDEX = 1 << 16  # a LONG_BINPUT beyond: the usual way
    SMALL_DICT = 8           # up to this many keys, repeated ones are found by comparing every pair
    NOGIL_RECORD = 4096      # records from this size on are walked and written with the GIL released
    WRITTEN_RATIO = 29       # _decode_common.WRITTEN_RATIO (tests/test_direct_lane.py compares)


cdef struct Slots:  # a growable array of indices (the stack, the marks, the memo), inline while small
    Py_ssize_t* items
    Py_ssize_t count
    Py_ssize_t capacity
    Py_ssize_t inline[INLINE_SLOTS]


cdef struct Lane:
    const unsigned char* p
    Py_ssize_t end
    Node* nodes
    Py_ssize_t node_count
    Py_ssize_t node_capacity
    Slots stack
    Slots marks
    Slots memo               # node index by memo index; -1: not this pickle's (the class pickle's, or unset)
    Slots refs               # the oids' offsets, in document order
    ClassPickle* klass       # the record's class pickle, whose memo entries the state may GET
    Py_ssize_t fetched       # the weight of the nodes GET gave again, and what it may be: over the
    Py_ssize_t budget        # decoder's expansion budget, the lane declines (the decoder refuses such records)
    Node inline_nodes[INLINE_NODES]


cdef inline void _init_slots(Slots* s) noexcept nogil:
    s.items = s.inline
    s.count = 0
    s.capacity = INLINE_SLOTS


cdef inline void _free_slots(Slots* s) noexcept nogil:
    if s.items != s.inline:
        free(s.items)


cdef int _room(void** items, void* inline_items, Py_ssize_t count, Py_ssize_t* capacity, Py_ssize_t want,
               size_t item_size) noexcept nogil:
    """Capacity for want items in an array of count items, inline or on the heap (moved to a bigger heap
    block; the inline ones stay where they are); -1 when memory runs out."""
    cdef Py_ssize_t grown = capacity[0]
    cdef void* block
    while grown < want:
        if <size_t>grown > <size_t>PY_SSIZE_T_MAX / item_size / 2:
            return -1
        grown *= 2
    if items[0] != inline_items:
        block = realloc(items[0], grown * item_size)
    else:
        block = malloc(grown * item_size)
        if block != NULL:
            memcpy(block, inline_items, count * item_size)
    if block == NULL:
        return -1
    items[0] = block
    capacity[0] = grown
    return 0


cdef inline int _push_slot(Slots* s, Py_ssize_t value) noexcept nogil:
    if s.count == s.capacity and _room(<void**>&s.items, s.inline, s.count, &s.capacity, s.count + 1,
                                       sizeof(Py_ssize_t)) < 0:
        return -1
    s.items[s.count] = value
    s.count += 1
    return 0


# ---------------------------------------------------------------------------
# Reading the pickle into nodes.  Every reader returns the position after its opcode's argument, or -1.
# ---------------------------------------------------------------------------

cdef inline Py_ssize_t _alloc_node(Lane* lane, Kind kind) noexcept nogil:
    """A new node, not on the stack; its index, or -1."""
    cdef Py_ssize_t i = lane.node_count
    if i == lane.node_capacity and _room(<void**>&lane.nodes, lane.inline_nodes, i, &lane.node_capacity, i + 1,
                                         sizeof(Node)) < 0:
        return -1
    lane.node_count = i + 1
    lane.nodes[i].kind = kind
    lane.nodes[i].start = -1
    lane.nodes[i].size = 0
    lane.nodes[i].next = -1
    return i


cdef inline Py_ssize_t _new_node(Lane* lane, Kind kind) noexcept nogil:
    """A new node pushed on the stack; its index, or -1."""
    cdef Py_ssize_t i = _alloc_node(lane, kind)
    if i < 0 or _push_slot(&lane.stack, i) < 0:
        return -1
    return i


cdef inline Py_ssize_t _fence(Lane* lane) noexcept nogil:
    """The stack height at the innermost MARK: what an opcode may pop down to."""
    return lane.marks.items[lane.marks.count - 1] if lane.marks.count else 0


cdef inline void _adopt_stack_items(Lane* lane, Py_ssize_t parent, Py_ssize_t from_slot) noexcept nogil:
    """The nodes of stack[from_slot:] moved to the end of parent's children."""
    cdef Node* node = &lane.nodes[parent]
    cdef Py_ssize_t j, child
    for j in range(from_slot, lane.stack.count):
        child = lane.stack.items[j]
        if node.start < 0:
            node.start = child
        else:
            lane.nodes[node.last].next = child
        node.last = child
        lane.nodes[child].next = -1
    node.size += lane.stack.count - from_slot
    lane.stack.count = from_slot


cdef inline Py_ssize_t _read_span(Lane* lane, Kind kind, Py_ssize_t pos, Py_ssize_t n) noexcept nogil:
    """A node of the n bytes at pos, left in the pickle: K_TEXT (checked when written: most bail-outs come
    before), K_BYTES, or K_BIGINT (LONG1 of 9 to 17 bytes: a UUID's int is up to 128 bits)."""
    cdef Py_ssize_t i
    if n > lane.end - pos:
        return -1
    i = _new_node(lane, kind)
    if i < 0:
        return -1
    lane.nodes[i].start = pos
    lane.nodes[i].size = n
    return pos + n


cdef inline uint64_t _unsigned(const unsigned char* p, int width, bint big_endian) noexcept nogil:
    cdef uint64_t v = 0
    cdef int i
    for i in range(width):
        v = (v << 8) | p[i if big_endian else width - 1 - i]
    return v


cdef inline Py_ssize_t _read_number(Lane* lane, Kind kind, Py_ssize_t pos, int width, bint signed) noexcept nogil:
    """A K_INT node of the width-byte little-endian integer at pos (LONG1's two's complement when signed), or
    a K_FLOAT node of BINFLOAT's big-endian double."""
    cdef uint64_t u
    cdef Py_ssize_t i
    if width > lane.end - pos:
        return -1
    u = _unsigned(lane.p + pos, width, kind == K_FLOAT)
    if signed and 0 < width < 8 and (u >> (8 * width - 1)) & 1:
        u |= ~0ULL << (8 * width)  # sign-extend
    i = _new_node(lane, kind)
    if i < 0:
        return -1
    lane.nodes[i].integer = <int64_t>u
    memcpy(&lane.nodes[i].number, &u, 8)  # a float's bits
    return pos + width


cdef int _fill(Lane* lane, Kind kind, Py_ssize_t from_slot) noexcept nogil:
    """The stack items from from_slot up become the children of a new node of kind, pushed in their place."""
    cdef Py_ssize_t i = _alloc_node(lane, kind)
    if i < 0:
        return -1
    _adopt_stack_items(lane, i, from_slot)
    return _push_slot(&lane.stack, i)


cdef inline Py_ssize_t _pop_mark(Lane* lane) noexcept nogil:
    """The stack height at the innermost MARK, which is dropped; -1 without one."""
    if lane.marks.count == 0:
        return -1
    lane.marks.count -= 1
    return lane.marks.items[lane.marks.count]


cdef int _add_children(Lane* lane, Kind kind, Py_ssize_t target_slot, Py_ssize_t from_slot) noexcept nogil:
    """SETITEM(S), APPEND(S): stack[from_slot:] added to the container of kind at stack[target_slot]."""
    cdef Py_ssize_t target
    if target_slot < 0 or target_slot < _fence(lane) or from_slot > lane.stack.count:
        return -1
    target = lane.stack.items[target_slot]
    if lane.nodes[target].kind != kind or (kind == K_DICT and (lane.stack.count - from_slot) % 2):
        return -1
    _adopt_stack_items(lane, target, from_slot)
    return 0


cdef int _memo_put(Lane* lane, Py_ssize_t index) noexcept nogil:
    """BINPUT, LONG_BINPUT: the top of the stack is memo entry index."""
    if lane.stack.count <= _fence(lane) or index > MAX_MEMO_INDEX:
        return -1
    if index >= lane.memo.count:
        if index >= lane.memo.capacity and _room(<void**>&lane.memo.items, lane.memo.inline, lane.memo.count,
                                                 &lane.memo.capacity, index + 1, sizeof(Py_ssize_t)) < 0:
            return -1
        while lane.memo.count <= index:
            lane.memo.items[lane.memo.count] = -1
            lane.memo.count += 1
    lane.memo.items[index] = lane.stack.items[lane.stack.count - 1]
    return 0


cdef bint _immutable(Lane* lane, Py_ssize_t i) noexcept nogil:
    """May node i be written wherever the memo gives it again?  Scalars, references and calls; a built
    object and a tuple of such (no later opcode of the lane changes them).  A dict or list, or an object
    not yet built (its own state may hold it: a cycle), are the decoder's."""
    cdef Kind kind = lane.nodes[i].kind
    cdef Py_ssize_t child
    if kind < K_DICT:
        return True
    if kind == K_NEW:
        return lane.nodes[i].state >= 0
    if kind != K_TUPLE:
        return False
    child = lane.nodes[i].start
    while child >= 0:
        if lane.nodes[child].kind >= K_DICT:
            return False
        child = lane.nodes[child].next
    return True


cdef int _memo_get(Lane* lane, Py_ssize_t index) noexcept nogil:
    """BINGET, LONG_BINGET of a value this pickle or the class pickle put: a copy of its node, sharing its
    children (a node's next is its place in its parent); declined past the decoder's budget (weights bound its)."""
    cdef Py_ssize_t source, i, weight
    if index < lane.memo.count and lane.memo.items[index] >= 0:
        source = lane.memo.items[index]
    else:
        source = _class_entry(lane, index)
    if source < 0 or not _immutable(lane, source):
        return -1
    weight = _fetched_weight(lane, source, lane.budget - lane.fetched)
    if weight < 0:
        return -1
    lane.fetched += weight
    i = _new_node(lane, lane.nodes[source].kind)
    if i < 0:
        return -1
    lane.nodes[i] = lane.nodes[source]
    lane.nodes[i].next = -1
    return 0


cdef Py_ssize_t _fetched_weight(Lane* lane, Py_ssize_t root, Py_ssize_t limit) noexcept nogil:
    """The weight of node root's value as the decoder weighs what the memo gives again (_decode_common.weight:
    a shared part counted each time it is reached), taken when GET asks, as the decoder takes it; -1 once
    past limit (>= 0), or when memory for the walk runs out.  An explicit stack, any depth, and no more steps
    than the weight it finds (the budget bounds them all)."""
    cdef Slots todo
    cdef uint64_t total = 0, room = <uint64_t>limit
    cdef Py_ssize_t child
    cdef Node* node
    _init_slots(&todo)
    todo.items[0] = root
    todo.count = 1
    while todo.count and total <= room:
        todo.count -= 1
        node = &lane.nodes[todo.items[todo.count]]
        total += _own_weight(lane, node)  # no wrap: total <= room < 2**63 and a part is less than 2**62
        if node.kind == K_CALL or node.kind >= K_DICT:
            child = node.start
            while child >= 0 and total <= room:
                if _push_slot(&todo, child) < 0:
                    total = room + 1
                child = lane.nodes[child].next
            if node.kind == K_NEW and node.state >= 0 and total <= room:
                # the state; a BTree's flattened ({"@kv": [[k, v], ...]}: a list more for each two items) twice
                if (_push_slot(&todo, node.state) < 0
                        or _is_btree_class(lane, &lane.nodes[node.klass]) and _push_slot(&todo, node.state) < 0):
                    total = room + 1
    _free_slots(&todo)
    return <Py_ssize_t>total if total <= room else -1


cdef inline uint64_t _own_weight(Lane* lane, Node* node) noexcept nogil:
    """What node's own part of the decoder's value weighs (its children, arguments and state not counted)."""
    cdef Kind kind = node.kind
    cdef Node* first
    if kind == K_TEXT:
        return 1 + <uint64_t>node.size  # a str: 1 and its code points, at most its bytes
    if kind == K_BYTES:
        return 5 + 4 * ((<uint64_t>node.size + 2) // 3)  # {"@b": base64}
    if kind == K_BIGINT:
        return 48  # a big int's {"@bi": digits}
    if kind == K_CLASS:
        return _class_weight(node)
    if kind == K_REF:  # {"@ref": ["<16 hex digits>", "module.Name"]}: 26 and the names
        return 26 + (_class_weight(&lane.nodes[node.klass]) - 9 if node.klass >= 0 else 0)
    if kind == K_CALL:
        # The decoder's marker of the call: generic ({"@reduce": {"callable": ..., "args": {"@t": [...]}}}:
        # 29, the class and the arguments' tuple) or a known type's (a pytz zone's name twice: its first
        # argument once more).
        first = &lane.nodes[node.start] if node.start >= 0 else NULL
        return (64 + _class_weight(&lane.nodes[node.klass]) + 5
                + (1 + <uint64_t>first.size if first != NULL and first.kind == K_TEXT else 0))
    if kind == K_NEW:  # {"@cls": [...], "@s": {"@args": {"@t": [...]}, "@state": ...}}: 31, the class, a tuple
        return 31 + _class_weight(&lane.nodes[node.klass]) + 5
    if kind == K_DICT:  # 5, and one for each key and value: the decoder may write {"@d": [[k, v], ...]}
        return 5 + <uint64_t>node.size
    if kind == K_TUPLE:  # {"@t": [...]}
        return 5
    return 1  # any other value (a list: its items are counted as they are reached)


cdef inline uint64_t _class_weight(Node* klass) noexcept nogil:
    """{"@cls": [module, name]}: 9 and the names' lengths."""
    return 9 + <uint64_t>klass.size + <uint64_t>klass.name_size


cdef inline Py_ssize_t _class_line_end(Lane* lane, Py_ssize_t pos) noexcept nogil:
    """The newline ending a non-empty line of printable ASCII at pos, without a quote or backslash (which the
    text "module.Name" would have to escape); -1 for anything else."""
    cdef Py_ssize_t at = pos
    cdef unsigned char c
    while at < lane.end:
        c = lane.p[at]
        if c == 10:
            return at if at > pos else -1
        if c < 33 or c > 126 or c == 34 or c == 92:
            return -1
        at += 1
    return -1


cdef Py_ssize_t _read_global(Lane* lane, Py_ssize_t pos) noexcept nogil:
    """GLOBAL "module\nname\n": a K_CLASS node, for names any reading of the lines gives alike."""
    cdef Py_ssize_t module_end = _class_line_end(lane, pos), name_end, i
    if module_end < 0:
        return -1
    name_end = _class_line_end(lane, module_end + 1)
    if name_end < 0:
        return -1
    i = _new_node(lane, K_CLASS)
    if i < 0:
        return -1
    lane.nodes[i].start = pos
    lane.nodes[i].size = module_end - pos
    lane.nodes[i].name_start = module_end + 1
    lane.nodes[i].name_size = name_end - module_end - 1
    return name_end + 1


cdef int _persistent_ref(Lane* lane) noexcept nogil:
    """BINPERSID of ZODB's (oid, class) or (oid, None), oid 8 bytes, the class name without a dot (else
    the verbose form): a K_REF node in place of the tuple, the oid noted for refs."""
    cdef Py_ssize_t pid, oid, klass, i
    if lane.stack.count <= _fence(lane):
        return -1
    pid = lane.stack.items[lane.stack.count - 1]
    if lane.nodes[pid].kind != K_TUPLE or lane.nodes[pid].size != 2:
        return -1
    oid = lane.nodes[pid].start
    klass = lane.nodes[oid].next
    if lane.nodes[oid].kind != K_BYTES or lane.nodes[oid].size != 8:
        return -1
    if lane.nodes[klass].kind == K_NULL:
        klass = -1
    elif lane.nodes[klass].kind != K_CLASS or memchr(lane.p + lane.nodes[klass].name_start, 46,  # .
                                                     lane.nodes[klass].name_size) != NULL:
        return -1
    lane.stack.count -= 1
    i = _new_node(lane, K_REF)
    if i < 0 or _push_slot(&lane.refs, lane.nodes[oid].start) < 0:
        return -1
    lane.nodes[i].start = lane.nodes[oid].start
    lane.nodes[i].klass = klass
    return 0


cdef Py_ssize_t _class_entry(Lane* lane, Py_ssize_t index) noexcept nogil:
    """The node of memo 0 of ZODB's class pickle, GLOBAL (one memo for both pickles: a reference to an object
    of the record's own class GETs it), made when the state first GETs it; -1 for any other entry, or names
    the text "module.Name" would have to escape (the decoder's).  Read as the state's GLOBAL is, and put in
    the memo, from the top of the stack."""
    if (lane.klass.form != CLASS_GLOBAL or index != 0 or _read_global(lane, lane.klass.module_start) < 0
            or _memo_put(lane, 0) < 0):
        return -1
    lane.stack.count -= 1
    return lane.stack.items[lane.stack.count]


cdef int _call(Lane* lane, Kind kind) noexcept nogil:
    """REDUCE (K_CALL) or NEWOBJ (K_NEW) of a class and a tuple: a node with the tuple's items as arguments."""
    cdef Py_ssize_t top = lane.stack.count, klass, args, i
    if top - 2 < _fence(lane):
        return -1
    klass = lane.stack.items[top - 2]
    args = lane.stack.items[top - 1]
    if lane.nodes[klass].kind != K_CLASS or lane.nodes[args].kind != K_TUPLE:
        return -1
    lane.stack.count = top - 2
    i = _new_node(lane, kind)
    if i < 0:
        return -1
    lane.nodes[i].start = lane.nodes[args].start
    lane.nodes[i].size = lane.nodes[args].size
    lane.nodes[i].klass = klass
    lane.nodes[i].state = -1
    return 0


cdef int _build(Lane* lane) noexcept nogil:
    """BUILD of an object NEWOBJ just made (anything else: @inst, the decoder's)."""
    cdef Py_ssize_t top = lane.stack.count, target
    if top - 2 < _fence(lane):
        return -1
    target = lane.stack.items[top - 2]
    if lane.nodes[target].kind != K_NEW or lane.nodes[target].state >= 0:
        return -1
    lane.nodes[target].state = lane.stack.items[top - 1]
    lane.stack.count = top - 1
    return 0


cdef inline bint _is_btree_class(Lane* lane, Node* klass) noexcept nogil:
    """A class of the BTrees package (their states are the decoder's to flatten)."""
    return klass.size >= 6 and memcmp(lane.p + klass.start, b"BTrees", 6) == 0


cdef Py_ssize_t _read_state(Lane* lane, Py_ssize_t pos) noexcept nogil:
    """The root node of the pickle at pos, or -1: something the lane does not take."""
    cdef const unsigned char* p = lane.p
    cdef Py_ssize_t end = lane.end, n = 0, m
    cdef uint64_t u
    cdef unsigned char op
    cdef int failed
    while 0 <= pos < end:
        op = p[pos]
        pos += 1
        failed = 0
        if op == Op.SHORT_BINUNICODE or op == Op.SHORT_BINBYTES or op == Op.BINPUT or op == Op.BINGET \
                or op == Op.LONG1 or op == Op.PROTO:
            if pos >= end:
                return -1
            n = p[pos]  # a one-byte argument
            pos += 1
        elif op == Op.BINUNICODE or op == Op.BINBYTES or op == Op.LONG_BINPUT or op == Op.LONG_BINGET:
            if end - pos < 4:
                return -1
            u = _unsigned(p + pos, 4, False)  # a four-byte argument, compared unsigned before the cast: past both what
            pos += 4             # remains and the memo's bound, it is neither a length nor an index here
            if u > <uint64_t>(end - pos) and u > <uint64_t>MAX_MEMO_INDEX:
                return -1
            n = <Py_ssize_t>u  # _read_span checks a length against what remains, _memo_put an index
        if op == Op.SHORT_BINUNICODE or op == Op.BINUNICODE:
            pos = _read_span(lane, K_TEXT, pos, n)
        elif op == Op.SHORT_BINBYTES or op == Op.BINBYTES:
            pos = _read_span(lane, K_BYTES, pos, n)
        elif op == Op.BINPUT or op == Op.LONG_BINPUT:
            failed = _memo_put(lane, n)
        elif op == Op.BINGET or op == Op.LONG_BINGET:
            failed = _memo_get(lane, n)
        elif op == Op.MARK:
            failed = _push_slot(&lane.marks, lane.stack.count)
        elif op == Op.EMPTY_DICT or op == Op.EMPTY_LIST or op == Op.EMPTY_TUPLE:
            failed = _new_node(lane, K_DICT if op == Op.EMPTY_DICT else K_LIST if op == Op.EMPTY_LIST else K_TUPLE) < 0
        elif op == Op.NONE or op == Op.NEWTRUE or op == Op.NEWFALSE:
            failed = _new_node(lane, K_NULL if op == Op.NONE else K_TRUE if op == Op.NEWTRUE else K_FALSE) < 0
        elif op == Op.SETITEMS or op == Op.APPENDS:
            m = _pop_mark(lane)
            failed = _add_children(lane, K_DICT if op == Op.SETITEMS else K_LIST, m - 1, m)
        elif op == Op.SETITEM or op == Op.APPEND:
            m = lane.stack.count - (2 if op == Op.SETITEM else 1)
            failed = _add_children(lane, K_DICT if op == Op.SETITEM else K_LIST, m - 1, m)
        elif op == Op.TUPLE or op == Op.TUPLE1 or op == Op.TUPLE2 or op == Op.TUPLE3:
            m = _pop_mark(lane) if op == Op.TUPLE else lane.stack.count - (op - Op.TUPLE1 + 1)
            failed = m < _fence(lane) or _fill(lane, K_TUPLE, m) < 0  # (no mark: m is -1)
        elif op == Op.BININT1:  # (a width of its own in each call: the reading loop is unrolled)
            pos = _read_number(lane, K_INT, pos, 1, False)
        elif op == Op.BININT2:
            pos = _read_number(lane, K_INT, pos, 2, False)
        elif op == Op.BININT:
            pos = _read_number(lane, K_INT, pos, 4, True)
        elif op == Op.LONG1:  # a K_BIGINT of up to 128 bits, for a UUID's int
            pos = (_read_number(lane, K_INT, pos, <int>n, True) if n <= 8
                   else _read_span(lane, K_BIGINT, pos, n) if n <= 17 else -1)
        elif op == Op.BINFLOAT:
            pos = _read_number(lane, K_FLOAT, pos, 8, False)
        elif op == Op.GLOBAL:
            pos = _read_global(lane, pos)
        elif op == Op.BINPERSID:
            failed = _persistent_ref(lane)
        elif op == Op.REDUCE or op == Op.NEWOBJ:
            failed = _call(lane, K_CALL if op == Op.REDUCE else K_NEW)
        elif op == Op.BUILD:
            failed = _build(lane)
        elif op == Op.PROTO:
            failed = n > 5
        elif op == Op.STOP:
            return lane.stack.items[0] if lane.marks.count == 0 and lane.stack.count == 1 else -1
        else:
            return -1
        if failed:
            return -1
    return -1


# ---------------------------------------------------------------------------
# Writing the nodes as JSON text, without the GIL.  The writers return 1 for what turns out not to be the
# lane's; when memory runs out, out.failed is set and the lane declines too (the decoder raises MemoryError).
# ---------------------------------------------------------------------------

cdef struct Out:
    Buffer buffer
    bint failed


cdef inline int _emit(Out* out, const char* text, Py_ssize_t n) noexcept nogil:
    out.failed |= _put(&out.buffer, text, n) < 0
    return 0


cdef inline int _emit_char(Out* out, char c) noexcept nogil:
    out.failed |= _put_char(&out.buffer, c) < 0
    return 0


cdef int _write_base64(Out* out, const char* marker, const unsigned char* p, Py_ssize_t n) noexcept nogil:
    """{"@b": "<base64>"} (marker is '{"@b":"', or '{"@ns":"'), padded as base64.b64encode pads."""
    _emit(out, marker, strlen(marker))
    if _reserve(&out.buffer, ZJC_B64_LENGTH(n) + 2) < 0:
        out.failed = True
        return 0
    zjc_b64_encode(p, n, <unsigned char*>out.buffer.data + out.buffer.size)
    out.buffer.size += ZJC_B64_LENGTH(n)
    return _emit(out, b'"}', 2)


cdef int _write_ref(Lane* lane, Out* out, Node* ref) noexcept nogil:
    """{"@ref": ["<16 hex digits>", "module.Name"]} or {"@ref": "<16 hex digits>"}."""
    cdef unsigned char oid[16]
    cdef Node* klass
    zjc_hex_encode(lane.p + ref.start, 8, oid)
    _emit(out, b'{"@ref":"' if ref.klass < 0 else b'{"@ref":["', 9 if ref.klass < 0 else 10)
    _emit(out, <const char*>oid, 16)
    if ref.klass < 0:
        return _emit(out, b'"}', 2)
    klass = &lane.nodes[ref.klass]
    _emit(out, b'","', 3)
    _emit(out, <const char*>lane.p + klass.start, klass.size)
    _emit_char(out, 46)  # .
    _emit(out, <const char*>lane.p + klass.name_start, klass.name_size)
    return _emit(out, b'"]}', 3)


cdef inline bint _named(Lane* lane, Node* klass, const char* module, Py_ssize_t module_size,
                        const char* name, Py_ssize_t name_size) noexcept nogil:
    return (klass.size == module_size and klass.name_size == name_size
            and memcmp(lane.p + klass.start, module, module_size) == 0
            and memcmp(lane.p + klass.name_start, name, name_size) == 0)


cdef int _write_call(Lane* lane, Out* out, Node* call, int depth) noexcept nogil:
    """The marker of a call of a known type, in the shapes _decode_cython._recognize reads in C
    (docs/format.md, "Known types"); 1: any other call (its rules are the decoder's)."""
    cdef Node* klass = &lane.nodes[call.klass]
    cdef Node* arg
    cdef Py_ssize_t j
    if call.size == 0:
        return 1
    arg = &lane.nodes[call.start]
    if _named(lane, klass, b"datetime", 8, b"datetime", 8) or _named(lane, klass, b"datetime", 8, b"date", 4):
        return _write_datetime(lane, out, call, klass.name_size == 4)
    if _named(lane, klass, b"datetime", 8, b"timedelta", 9):
        j = call.start
        while j >= 0 and lane.nodes[j].kind == K_INT and -900000000 <= lane.nodes[j].integer <= 900000000:
            j = lane.nodes[j].next
        if call.size != 3 or j >= 0:  # three ints a timedelta surely takes (the decoder decides the rest)
            return 1
        _emit(out, b'{"@td":[', 8)
        _write_items(lane, out, call.start, -1, depth + 1)
        return _emit(out, b"]}", 2)
    if _named(lane, klass, b"decimal", 7, b"Decimal", 7):
        if call.size != 1 or not _ascii_text(lane, arg) or not decimal_text(lane.p + arg.start, arg.size):
            return 1
        _emit(out, b'{"@dec":', 8)
        _write_text(lane, out, arg, False)  # ASCII: never refused
        return _emit_char(out, 125)  # }
    if _named(lane, klass, b"builtins", 8, b"set", 3) or _named(lane, klass, b"builtins", 8, b"frozenset", 9):
        j = arg.start if lane.fetched and arg.kind == K_LIST else -1  # a tuple or object the memo repeats
        while j >= 0 and lane.nodes[j].kind < K_TUPLE:                 # may be one item: the decoder's
            j = lane.nodes[j].next
        if call.size != 1 or arg.kind != K_LIST or j >= 0:
            return 1
        _emit(out, b'{"@set":' if klass.name_size == 3 else b'{"@fset":', 8 if klass.name_size == 3 else 9)
        if _write_node(lane, out, call.start, depth + 1):
            return 1
        return _emit_char(out, 125)
    return 1


cdef int _write_uuid(Lane* lane, Out* out, Node* obj) noexcept nogil:
    """{"@uuid": "8-4-4-4-12 hex digits"} of a UUID whose state is exactly {"int": value}, 0 <= value <
    2**128; 1: another state (the object's generic form)."""
    cdef Node* state = &lane.nodes[obj.state]
    cdef Node* key
    cdef Node* value
    cdef unsigned char le[17]  # the value little-endian, as LONG1 holds it
    cdef char text[36]
    cdef int n = 8, k, at = 0
    if state.kind != K_DICT or state.size != 2:
        return 1
    key = &lane.nodes[state.start]
    value = &lane.nodes[key.next]
    if key.kind != K_TEXT or key.size != 3 or memcmp(lane.p + key.start, b"int", 3) != 0:
        return 1
    memset(le, 0, 17)
    if value.kind == K_INT:
        for k in range(8):
            le[k] = <unsigned char>(<uint64_t>value.integer >> (8 * k))
    elif value.kind == K_BIGINT:
        n = <int>value.size
        memcpy(le, lane.p + value.start, n)
    else:
        return 1
    if le[n - 1] & 0x80 or le[16]:  # negative, or 2**128 and more
        return 1
    for k in range(16):
        if k == 4 or k == 6 or k == 8 or k == 10:
            text[at] = 45  # -
            at += 1
        zjc_hex_encode(le + 15 - k, 1, <unsigned char*>text + at)
        at += 2
    _emit(out, b'{"@uuid":"', 10)
    _emit(out, text, 36)
    return _emit(out, b'"}', 2)


cdef int _write_instance(Lane* lane, Out* out, Node* obj, int depth) noexcept nogil:
    """NEWOBJ without arguments then BUILD: {"@cls": [module, name], "@s": state}; a UUID of the usual state
    as {"@uuid": ...}.  1: not built, made with arguments (rare: the decoder writes {"@args": ...}), or a
    BTrees class (its state rules are the decoder's)."""
    cdef Node* klass = &lane.nodes[obj.klass]
    if obj.state < 0 or obj.size or _is_btree_class(lane, klass):
        return 1
    if _named(lane, klass, b"uuid", 4, b"UUID", 4) and not _write_uuid(lane, out, obj):
        return 0
    _emit(out, b'{"@cls":["', 10)
    _emit(out, <const char*>lane.p + klass.start, klass.size)
    _emit(out, b'","', 3)
    _emit(out, <const char*>lane.p + klass.name_start, klass.name_size)
    _emit(out, b'"],"@s":', 8)
    if _write_node(lane, out, obj.state, depth + 1):
        return 1
    return _emit_char(out, 125)  # }


cdef int _write_datetime(Lane* lane, Out* out, Node* call, bint date) noexcept nogil:
    """{"@date": text} of a date; {"@dt": text} of a naive datetime, or one with a fixed offset (timezone(
    timedelta(...))) in the text; {"@dt": text, "@tz": {"pytz": [...], "name": zone}} with a pytz zone."""
    cdef char text[72]
    cdef Node* state = &lane.nodes[call.start]
    cdef Node* zone = NULL
    cdef int n, m
    if call.size > 2 - date or state.kind != K_BYTES or state.size != (4 if date else 10):
        return 1
    n = date_state_text(text, lane.p + state.start) if date else datetime_state_text(text, lane.p + state.start)
    if n < 0:
        return 1
    if call.size == 2:
        zone = &lane.nodes[state.next]
        if zone.kind != K_CALL:
            return 1
        if not _named(lane, &lane.nodes[zone.klass], b"pytz", 4, b"_p", 2):
            m = _offset_text(lane, zone, text + n)
            if m < 0:
                return 1
            n += m
            zone = NULL
    _emit(out, b'{"@date":"' if date else b'{"@dt":"', 10 if date else 8)
    _emit(out, text, n)
    if zone == NULL:
        return _emit(out, b'"}', 2)
    return _write_pytz(lane, out, zone)


cdef int _offset_text(Lane* lane, Node* zone, char* text) noexcept nogil:
    """The offset of timezone(timedelta(days, seconds, microseconds)) into text, as _decode_known._tz_marker
    writes it; its length, or -1: another zone (the decoder's; pytz's UTC too, which is rare)."""
    cdef Node* delta
    cdef Node* field
    cdef int64_t parts[3]
    cdef Py_ssize_t j, child
    if zone.size != 1 or not _named(lane, &lane.nodes[zone.klass], b"datetime", 8, b"timezone", 8):
        return -1
    delta = &lane.nodes[zone.start]
    if delta.kind != K_CALL or delta.size != 3 or not _named(lane, &lane.nodes[delta.klass], b"datetime", 8,
                                                             b"timedelta", 9):
        return -1
    child = delta.start
    for j in range(3):
        field = &lane.nodes[child]
        if field.kind != K_INT or not offset_field(field.integer):
            return -1
        parts[j] = field.integer
        child = field.next
    return offset_text(text, parts[0], parts[1], parts[2])


cdef bint _ascii_text(Lane* lane, Node* node) noexcept nogil:
    """A K_TEXT node of ASCII without U+0000."""
    cdef Py_ssize_t k
    if node.kind != K_TEXT:
        return False
    for k in range(node.start, node.start + node.size):
        if lane.p[k] == 0 or lane.p[k] > 127:
            return False
    return True


cdef int _write_pytz(Lane* lane, Out* out, Node* zone) noexcept nogil:
    """The rest of a datetime's marker with a pytz zone, pytz._p(zone name, ...) of ASCII text and 64-bit
    ints, the first a text: ',"@tz":{"pytz":[...],"name":zone}}'; 1 for other arguments (the decoder's)."""
    cdef Py_ssize_t child = zone.start, i = 0
    if zone.size == 0 or lane.nodes[child].kind != K_TEXT:
        return 1
    while child >= 0:
        if (lane.nodes[child].kind != K_INT and not _ascii_text(lane, &lane.nodes[child])) or (lane.nodes[
                child].kind == K_INT and 1 <= i <= 2 and not -86399 <= lane.nodes[child].integer <= 86399):
            return 1  # utcoffset, dstoffset: under 24 hours (_known.OFFSET_MAX_SECONDS)
        child = lane.nodes[child].next
        i += 1
    _emit(out, b'","@tz":{"pytz":[', 17)
    _write_items(lane, out, zone.start, -1, 2)  # ints and ASCII texts: never refused
    _emit(out, b'],"name":', 9)
    _write_node(lane, out, zone.start, 2)
    return _emit(out, b"}}", 2)


cdef int _write_int64(Out* out, int64_t x) noexcept nogil:
    cdef char digits[24]
    cdef unsigned long long u = <unsigned long long>(-(x + 1)) + 1 if x < 0 else <unsigned long long>x
    cdef int i = <int>(_digits_before(digits + 24, u) - digits)
    if x < 0:
        i -= 1
        digits[i] = 45  # -
    return _emit(out, digits + i, 24 - i)


cdef inline uint64_t _key_hash(const unsigned char* p, Py_ssize_t n) noexcept nogil:
    """A hash of a key's bytes for finding repeats (FNV-1a)."""
    cdef uint64_t h = 0xCBF29CE484222325ULL
    cdef Py_ssize_t k
    for k in range(n):
        h = (h ^ p[k]) * 0x100000001B3ULL
    return h ^ (h >> 29)  # the high bits into the low ones, which pick the slot


cdef inline bint _same_key(Lane* lane, Py_ssize_t a, Py_ssize_t b) noexcept nogil:
    cdef Node* x = &lane.nodes[a]
    cdef Node* y = &lane.nodes[b]
    return x.size == y.size and memcmp(lane.p + x.start, lane.p + y.start, x.size) == 0


cdef bint _plain_keys(Lane* lane, Node* d) noexcept nogil:
    """Are the dict's keys text the rules need not look at: none starting with "@" (a marker, an escaped
    key), none repeated (its value would replace the first one's, in its place)?"""
    cdef Py_ssize_t key = d.start, before
    cdef Node* node
    while key >= 0:
        node = &lane.nodes[key]
        if node.kind != K_TEXT or (node.size and lane.p[node.start] == 64):  # @
            return False
        before = d.start
        while before != key and d.size <= 2 * SMALL_DICT:  # a small dict's: compared with each key before
            if _same_key(lane, before, key):
                return False
            before = lane.nodes[lane.nodes[before].next].next
        key = lane.nodes[node.next].next
    # -1 (out of memory, or keys made to collide): the decoder's, which raises MemoryError if memory stays short
    return d.size <= 2 * SMALL_DICT or _hashed_keys_repeat(lane, d) == 0


cdef int _hashed_keys_repeat(Lane* lane, Node* d) noexcept nogil:
    """Does a bigger dict repeat a key?  1, 0, or -1 when memory runs out or the keys collide far past chance
    (keys made to collide in this unkeyed hash would take quadratic time: the decoder, whose dicts hash with
    CPython's secret key, takes them).  An open-addressing table at least twice the keys' number."""
    cdef Py_ssize_t capacity = 16, mask, slot, key = d.start, probes_left
    cdef Py_ssize_t* table
    cdef int repeated = 0
    while capacity < d.size:
        capacity *= 2
    table = <Py_ssize_t*>malloc(capacity * sizeof(Py_ssize_t))
    if table == NULL:
        return -1
    memset(table, 0xff, capacity * sizeof(Py_ssize_t))  # every slot -1: empty
    mask = capacity - 1
    probes_left = 4 * capacity  # at most half full: about one probe a key by chance
    while key >= 0 and not repeated:
        slot = <Py_ssize_t>(_key_hash(lane.p + lane.nodes[key].start, lane.nodes[key].size) & <uint64_t>mask)
        while table[slot] >= 0 and not repeated:
            repeated = _same_key(lane, table[slot], key)
            slot = (slot + 1) & mask
            probes_left -= 1
            if probes_left < 0:
                repeated = -1
        table[slot] = key
        key = lane.nodes[lane.nodes[key].next].next
    free(table)
    return repeated


cdef int _write_text(Lane* lane, Out* out, Node* text, bint value) noexcept nogil:
    """A JSON string of valid UTF-8 without U+0000; a value with U+0000 as {"@ns": base64 of its UTF-8} (if
    the repeats weigh little: the decoder weighs it so); 1 for the rest (keys with U+0000, lone surrogates)."""
    cdef const unsigned char* p = lane.p + text.start
    if zjc_utf8_prefix(p, text.size, 1) == text.size:
        out.failed |= _escape_utf8(&out.buffer, p, text.size) < 0
        return 0
    if value and lane.fetched <= lane.budget // WRITTEN_RATIO and zjc_utf8_prefix(p, text.size, 0) == text.size:
        return _write_base64(out, b'{"@ns":"', p, text.size)
    return 1


cdef int _write_pg_float(Out* out, double x) noexcept nogil:
    """A float as JSON text; 1 for NaN, an infinity or -0.0 (rare: the decoder writes {"@f": ...}, as
    PostgreSQL cannot hold them as numbers)."""
    if isnan(x) or isinf(x) or (x == 0.0 and signbit(x)):
        return 1
    out.failed |= _write_float(&out.buffer, x) != 0  # not NaN or an infinity: out of memory
    return 0


cdef int _write_node(Lane* lane, Out* out, Py_ssize_t i, int depth) noexcept nogil:
    """Write node i as JSON text; 1: not for the lane after all (a key the rules look at, too deep)."""
    cdef Node* node = &lane.nodes[i]
    cdef Kind kind = node.kind
    cdef Py_ssize_t key
    if kind == K_TEXT:
        return _write_text(lane, out, node, True)
    if kind == K_INT:
        return _write_int64(out, node.integer)
    if kind == K_FLOAT:
        return _write_pg_float(out, node.number)
    if kind == K_BYTES:
        return _write_base64(out, b'{"@b":"', lane.p + node.start, node.size)
    if kind == K_REF:
        return _write_ref(lane, out, node)
    if kind == K_NULL:
        return _emit(out, b"null", 4)
    if kind == K_TRUE:
        return _emit(out, b"true", 4)
    if kind == K_FALSE:
        return _emit(out, b"false", 5)
    if kind == K_BIGINT or kind == K_CLASS:  # {"@bi": digits}, a class as a value: the decoder's
        return 1
    if depth >= MAX_LANE_DEPTH:  # a call, an object or a container: its parts are written one level
        return 1                 # down, and no deeper C recursion
    if kind == K_CALL:
        return _write_call(lane, out, node, depth)
    if kind == K_NEW:
        return _write_instance(lane, out, node, depth)
    if kind != K_DICT:
        _emit(out, b"[" if kind == K_LIST else b'{"@t":[', 1 if kind == K_LIST else 7)
        if _write_items(lane, out, node.start, -1, depth + 1) < -1:
            return 1
        return _emit(out, b"]" if kind == K_LIST else b"]}", 1 if kind == K_LIST else 2)
    if not _plain_keys(lane, node):
        return 1
    _emit_char(out, 123)  # {
    key = node.start
    while key >= 0:  # a key (text, as _plain_keys saw), then its value
        if key != node.start:
            _emit_char(out, 44)  # ,
        if _write_text(lane, out, &lane.nodes[key], False):
            return 1
        _emit_char(out, 58)  # :
        if _write_node(lane, out, lane.nodes[key].next, depth + 1):
            return 1
        key = lane.nodes[lane.nodes[key].next].next
    return _emit_char(out, 125)  # }


cdef inline Py_ssize_t _write_items(Lane* lane, Out* out, Py_ssize_t child, Py_ssize_t count, int depth) noexcept nogil:
    """count nodes (all, when count < 0) from child on, comma-separated: the node after them (-1 at the end),
    or -2: not for the lane."""
    cdef Py_ssize_t first = child
    while child >= 0 and count != 0:
        if child != first:
            _emit_char(out, 44)  # ,
        if _write_node(lane, out, child, depth):
            return -2
        child = lane.nodes[child].next
        count -= 1
    return child


cdef inline Py_ssize_t _only_tuple_child(Lane* lane, Py_ssize_t i) noexcept nogil:
    """The one child of a tuple node of one child, else -1."""
    if lane.nodes[i].kind == K_TUPLE and lane.nodes[i].size == 1:
        return lane.nodes[i].start
    return -1


cdef int _write_flat(Lane* lane, Out* out, Py_ssize_t flat, bint is_map) noexcept nogil:
    """A bucket's or set's items: {"@kv": [[k, v], ...]} or {"@ks": [k, ...]}, without the closing brace
    (an "@next" may follow); 1: a map's items of odd count (the generic form: the usual way)."""
    cdef Py_ssize_t child = lane.nodes[flat].start
    if not is_map:
        _emit(out, b'{"@ks":[', 8)
        return 1 if _write_items(lane, out, child, -1, 2) < -1 else _emit_char(out, 93)
    if lane.nodes[flat].size % 2:
        return 1
    _emit(out, b'{"@kv":[', 8)
    while child >= 0:
        if child != lane.nodes[flat].start:
            _emit_char(out, 44)  # ,
        _emit_char(out, 91)  # [
        child = _write_items(lane, out, child, 2, 2)
        if child < -1:
            return 1
        _emit_char(out, 93)  # ]
    return _emit_char(out, 93)


cdef int _write_btree_state(Lane* lane, Out* out, Py_ssize_t root, int btree) noexcept nogil:
    """The state of a BTrees class, flattened as docs/format.md ("BTrees") and _decode_known.btree_state
    say; 1: a shape the lane leaves to the decoder (it writes those as plain values)."""
    cdef Py_ssize_t first, second = -1, child
    cdef Node* state = &lane.nodes[root]
    if state.kind != K_TUPLE or state.size == 0 or state.size > 2:
        return 1 if state.kind != K_NULL else _emit(out, b"null", 4)
    first = state.start
    if state.size == 2:
        second = lane.nodes[first].next
    if btree & BTREE_IS_TREE and second < 0:  # ((((items),),),): a tree of one bucket, kept inline
        child = _only_tuple_child(lane, first)
        if child < 0 or _only_tuple_child(lane, child) < 0:
            return 1
        return _write_btree_state(lane, out, child, btree & BTREE_IS_MAP)  # as the bucket's ((items),)
    if lane.nodes[first].kind != K_TUPLE:
        return 1
    if btree & BTREE_IS_TREE:  # ((child, key, child, ...), first bucket)
        child = lane.nodes[first].start
        while child >= 0 and lane.nodes[child].kind != K_REF:
            child = lane.nodes[child].next
        if child < 0:
            return 1
        _emit(out, b'{"@children":[', 14)
        if _write_items(lane, out, lane.nodes[first].start, -1, 2) < -1:
            return 1
        _emit(out, b'],"@first":', 11)
        if _write_node(lane, out, second, 1):
            return 1
        return _emit_char(out, 125)  # }
    if _write_flat(lane, out, first, btree & BTREE_IS_MAP):  # ((items), next bucket) or ((items),)
        return 1
    if second >= 0:
        _emit(out, b',"@next":', 9)
        if _write_node(lane, out, second, 1):
            return 1
    return _emit_char(out, 125)


# ---------------------------------------------------------------------------
# The entry point
# ---------------------------------------------------------------------------

cdef object lane_text(bytes data, ClassPickle* klass, int btree, list refs, Py_ssize_t budget):
    """The PostgreSQL JSON text of the record's state pickle, its references' oids appended to refs; or
    None: not for the lane.  budget: the record's expansion budget (_decode_common.expansion_budget).
    The walk and the writing touch no Python object: for a record of NOGIL_RECORD bytes and more they run
    with the GIL released, so that threads storing big objects run at once."""
    # window: the pickle's bytes, without the GIL | an exact `bytes` the caller holds; the lane's C touches no object
    cdef Lane lane
    cdef Out out
    cdef bint taken
    cdef Py_ssize_t j
    lane.p = <const unsigned char*>PyBytes_AS_STRING(data)
    lane.end = PyBytes_GET_SIZE(data)
    lane.nodes = lane.inline_nodes
    lane.node_count = 0
    lane.node_capacity = INLINE_NODES
    lane.fetched = 0
    lane.budget = budget
    _init_slots(&lane.stack)
    _init_slots(&lane.marks)
    _init_slots(&lane.memo)
    _init_slots(&lane.refs)
    out.buffer.data = out.buffer.inline
    out.buffer.size = 0
    out.buffer.capacity = INLINE_CAPACITY
    out.failed = False
    try:
        if lane.end >= NOGIL_RECORD:
            with nogil:
                taken = _walk_and_write(&lane, &out, klass, btree)
        else:
            taken = _walk_and_write(&lane, &out, klass, btree)
        if not taken:
            return None
        for j in range(lane.refs.count):  # the oids, as ZODB's referencesf reads them: signed big-endian
            refs.append(<int64_t>_unsigned(lane.p + lane.refs.items[j], 8, True))
        return _text(&out.buffer)
    finally:
        if out.buffer.data != out.buffer.inline:
            free(out.buffer.data)
        if lane.nodes != lane.inline_nodes:
            free(lane.nodes)
        _free_slots(&lane.stack)
        _free_slots(&lane.marks)
        _free_slots(&lane.memo)
        _free_slots(&lane.refs)


cdef bint _walk_and_write(Lane* lane, Out* out, ClassPickle* klass, int btree) noexcept nogil:
    """Read the state pickle into nodes and write them: is the text whole and the lane's?"""
    cdef Py_ssize_t root
    lane.klass = klass
    root = _read_state(lane, klass.stop)
    if root < 0:
        return False
    if _write_btree_state(lane, out, root, btree) if btree else _write_node(lane, out, root, 0):
        return False
    return not out.failed
